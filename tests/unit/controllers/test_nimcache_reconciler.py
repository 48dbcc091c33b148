"""The NIMCache reconciler on an in-memory API: the state machine a user watches."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.nimcache import FINALIZER, NIMCacheKind
from controllers.reconciler import KindReconciler
from localcluster.catalog import SAMPLE_MODEL_MANIFEST
from nimctl_runtime.reconcile import Request
from tests.unit.controllers.fakes import FakeAPI, FakeRecorder

API = "apps.nvidia.com/v1alpha1"
REQ = Request("default", "cache")


def nimcache(**pvc: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "NIMCache",
        "metadata": {"name": "cache", "namespace": "default"},
        "spec": {
            "source": {
                "ngc": {
                    "modelPuller": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
                    "pullSecret": "ngc-secret",
                    "authSecret": "ngc-api",
                    "model": {"engine": "tensorrt_llm", "tensorParallelism": "1"},
                }
            },
            "storage": {
                "pvc": pvc or {"create": True, "size": "50Gi", "volumeAccessMode": "ReadWriteOnce"}
            },
        },
    }


def make(
    api: FakeAPI, logs: str = SAMPLE_MODEL_MANIFEST
) -> tuple[KindReconciler[Any, Any], FakeRecorder]:
    rec = FakeRecorder()

    async def pod_logs(namespace: str, pod: str, container: str) -> str:
        return logs

    r: KindReconciler[Any, Any] = KindReconciler(
        kind=NIMCacheKind(api_reader=api, pod_logs=pod_logs),
        cache=api,
        client=api,
        api_reader=api,
        recorder=rec,
    )
    return r, rec


def state(api: FakeAPI) -> str:
    obj = api.obj(API, "NIMCache", "cache")
    assert obj is not None
    return str((obj.get("status") or {}).get("state", ""))


def gpu_node(api: FakeAPI) -> None:
    api.put(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": "gpu-0",
                "namespace": "",
                "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            },
        }
    )


async def test_cache_goes_pvc_created_started_ready() -> None:
    api = FakeAPI()
    gpu_node(api)
    api.put(nimcache())
    r, rec = make(api)
    result = await r.reconcile(REQ)
    assert result.requeue_after == 30  # waiting for the manifest pod
    assert state(api) == "PVC-Created"
    assert api.obj("v1", "PersistentVolumeClaim", "cache-pvc") is not None
    assert api.obj("v1", "ServiceAccount", "nim-cache-sa") is not None
    assert api.obj("v1", "Pod", "cache-pod") is not None
    assert FINALIZER in api.obj(API, "NIMCache", "cache")["metadata"]["finalizers"]  # type: ignore[index]

    api.set_status("v1", "Pod", "cache-pod", {"phase": "Running"})
    await r.reconcile(REQ)
    assert api.obj("v1", "Pod", "cache-pod") is None  # deleted once read
    cm = api.obj("v1", "ConfigMap", "cache-manifest")
    assert cm is not None and "193649a2eb95" in cm["data"]["model_manifest.yaml"]
    job = api.obj("batch/v1", "Job", "cache-job")
    assert job is not None
    ctr = job["spec"]["template"]["spec"]["containers"][0]
    assert ctr["args"] == [
        "--profiles",
        "193649a2eb95e821309d6023a2cabb31489d3b690a9973c7ab5d1ff58b0aa7eb",
    ]
    assert state(api) == "Started"

    api.set_status("batch/v1", "Job", "cache-job", {"active": 1})
    await r.reconcile(REQ)
    assert state(api) == "InProgress"
    api.set_status("batch/v1", "Job", "cache-job", {"succeeded": 1})
    await r.reconcile(REQ)
    st = api.obj(API, "NIMCache", "cache")["status"]  # type: ignore[index]
    assert st["state"] == "Ready" and st["pvc"] == "cache-pvc"
    assert [p["name"][:12] for p in st["profiles"]] == ["193649a2eb95"]
    assert st["profiles"][0]["config"]["precision"] == "bf16"
    assert [e[1] for e in rec.events] == ["PVC-Created", "Started", "InProgress", "Ready"]
    writes = len(api.writes)
    await r.reconcile(REQ)
    assert len(api.writes) == writes


async def test_failing_job_gives_failed() -> None:
    api = FakeAPI()
    gpu_node(api)
    api.put(nimcache())
    r, _ = make(api)
    await r.reconcile(REQ)
    api.set_status("v1", "Pod", "cache-pod", {"phase": "Running"})
    await r.reconcile(REQ)
    api.set_status(
        "batch/v1",
        "Job",
        "cache-job",
        {"failed": 6, "conditions": [{"type": "Failed", "status": "True"}]},
    )
    await r.reconcile(REQ)
    st = api.obj(API, "NIMCache", "cache")["status"]  # type: ignore[index]
    assert st["state"] == "Failed"
    cond = next(c for c in st["conditions"] if c["type"] == "NIM_CACHE_JOB_COMPLETED")
    assert (cond["status"], cond["reason"]) == ("False", "JobFailed")


async def test_missing_pvc_is_a_reconcile_failure() -> None:
    api = FakeAPI()
    api.put(nimcache(name="mine"))
    r, rec = make(api)
    with pytest.raises(Exception, match="mine"):
        await r.reconcile(REQ)
    st = api.obj(API, "NIMCache", "cache")["status"]  # type: ignore[index]
    assert st["state"] == "NotReady"
    cond = next(c for c in st["conditions"] if c["type"] == "NIM_CACHE_RECONCILE_FAILED")
    assert cond["reason"] == "ReconcileFailed" and "mine" in cond["message"]
    assert rec.events[0][:2] == ("Warning", "ReconcileFailed")


async def test_image_without_manifest_is_model_free() -> None:
    api = FakeAPI()
    api.put(nimcache())
    r, _ = make(api, logs="model_manifest.yaml not found\n")
    await r.reconcile(REQ)
    api.set_status("v1", "Pod", "cache-pod", {"phase": "Running"})
    with pytest.raises(Exception, match="no profiles"):
        await r.reconcile(REQ)
    st = api.obj(API, "NIMCache", "cache")["status"]  # type: ignore[index]
    assert st["type"] == "model-free"
