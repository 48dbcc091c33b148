"""Taking over from NVIDIA's NIM Operator restarts no NIM.

For NVIDIA's standalone (plain and autoscaled: HPA and ServiceMonitor),
multi-node (LeaderWorkerSet), NIMPipeline and KServe (Standard mode) samples, the cluster first holds what NVIDIA's operator made
for them (``tests/integration/takeover/nvidia_nim.py``, derived from NVIDIA's
code, not from nimctl's render): CRs with NVIDIA's finalizers and status,
children owned by the CRs, the simulated NIM pods running. Then nimctl's
operator starts, and once it has settled and the simulated controllers have
seen what it wrote, the test counts rollouts: a workload whose stored pod
template (an InferenceService's predictor) changed, that got a new ReplicaSet
or StatefulSet revision, or whose pods were replaced.

What the test asserts, per sample: 0 rollouts; NVIDIA's NIMService finalizer
gone (the NIMCache and NIMPipeline ones, which nimctl uses under the same
name, kept); the CRs Ready; every child still the same object (uid), NVIDIA's
workloads now carrying nimctl's hash; every child's content (spec, data, rules,
subjects) as NVIDIA's operator wrote it, but the MPI start script
(docs/differences.md).
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from ruamel.yaml import YAML

from localcluster.addons import install_ecosystem
from nimctl.demo import apply_objects
from nimctl_runtime.client import Client
from nimctl_runtime.meta import Obj
from tests.integration.controllers.harness import (
    API,
    cluster_with_crds,
    settle,
    start_operator,
    wait_for,
)
from tests.integration.takeover import nvidia_nim as nv

pytestmark = pytest.mark.asyncio(loop_scope="module")

SAMPLES = {
    "standalone": "standalone-basic-llm.yaml",
    "multi-node": "advanced-multi-node-multi-node-nimservice.yaml",
    "pipeline": "pipelines-rag-rag-pipeline.yaml",
    "autoscaling": "standalone-autoscaling-llm.yaml",
    "kserve": "../nemo-kserve-build-inputs/kserve-standard-llm/_inputs/input.yaml",
}
STAMP = "2026-01-01T00:00:00Z"
# Room for every sample at once: 16 GPUs for the multi-node group, 5 for the rest.
NODES: Obj = {
    "description": "4 GPU nodes (8 x H100 each)",
    "pools": [
        {
            "namePrefix": "gpu-node",
            "count": 4,
            "cpu": "96",
            "memory": "1536Gi",
            "gpus": 8,
            "gpuProduct": "NVIDIA-H100-80GB-HBM3",
        }
    ],
}
STORAGE_CLASS: Obj = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": "standard",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    },
    "provisioner": "localcluster.nimctl.io/hostpath",
    "volumeBindingMode": "Immediate",
}
# The one object whose content nimctl changes on take-over (docs/differences.md,
# "Taking over"): its own MPI start script replaces NVIDIA's text; leaders read
# it only when they start.
REWRITTEN_DATA = ("-mpi-start-script",)
SHARED_FINALIZERS = ("NIMCache", "NIMPipeline")  # nimctl's finalizer has NVIDIA's name
WORKLOAD_API = {
    "Deployment": "apps/v1",
    "LeaderWorkerSet": nv.LWS_API,
    "InferenceService": nv.ISVC_API,
}
WORKLOADS = tuple((api, kind) for kind, api in WORKLOAD_API.items())
# Predictor fields KServe turns into its HPA, not into the pods.
ISVC_SCALING = ("minReplicas", "maxReplicas", "scaleMetric", "scaleMetricType", "scaleTarget")


def samples_dir() -> Path:
    root = Path(__file__).resolve().parents[3]
    for base in (root, *root.parents):
        found = base / "shared" / "nvidia-samples" / "golden-inputs"
        if found.is_dir():
            return found
    pytest.skip(f"NVIDIA's samples (shared/nvidia-samples/golden-inputs) are not above {root}")


def sample_docs(case: str, namespace: str) -> list[Obj]:
    path = samples_dir() / SAMPLES[case]
    docs = [d for d in YAML(typ="safe").load_all(path.read_text()) if d]
    for d in docs:
        d["metadata"]["namespace"] = namespace
    return docs


def secrets(namespace: str) -> list[Obj]:
    """The pull and API-key Secrets NVIDIA's samples name (created by the user)."""
    auth = json.dumps({"auths": {"nvcr.io": {"username": "$oauthtoken", "password": "x"}}})
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ngc-secret", "namespace": namespace},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(auth.encode()).decode()},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ngc-api-secret", "namespace": namespace},
            "stringData": {"NGC_API_KEY": "simulated", "HF_TOKEN": "simulated"},
        },
    ]


# -- the cluster NVIDIA's operator left -----------------------------------------------------


async def create_cr(admin: Client, kind: str, obj: Obj, spec: Obj) -> Obj:
    """The CR as it stands after NVIDIA's operator added its finalizer (spec round-tripped)."""
    meta = {
        k: v
        for k, v in obj["metadata"].items()
        if k in ("name", "namespace", "labels", "annotations", "ownerReferences")
    }
    meta["finalizers"] = [nv.FINALIZERS[kind]]
    return await admin.create({"apiVersion": API, "kind": kind, "metadata": meta, "spec": spec})


async def set_status(admin: Client, obj: Obj, status: Obj) -> Obj:
    return await admin.update_status({**obj, "status": status})


async def nvidia_nimservice(admin: Client, svc: Obj, caches: Mapping[str, Obj]) -> Obj:
    """Children of a stored NIMService, running; then NVIDIA's Ready status."""
    cache_name = ((svc["spec"].get("storage") or {}).get("nimCache") or {}).get("name")
    children = nv.nimservice_children(svc, caches.get(cache_name) if cache_name else None)
    await apply_objects(admin, children)
    ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
    await wait_for(lambda: workload_ready(admin, ns, *workload_of(svc)), timeout=60)
    if svc["spec"].get("inferencePlatform") == "kserve":
        isvc = await admin.get(nv.ISVC_API, "InferenceService", name, ns)
        endpoints = (isvc["status"]["address"]["url"], isvc["status"].get("url", ""))
    else:
        service = await admin.get("v1", "Service", name, ns)
        port = svc["spec"]["expose"]["service"].get("port", 8000)
        endpoints = (f"{service['spec']['clusterIP']}:{port}", "")
    status = nv.nimservice_status(svc, endpoints, STAMP)
    return await set_status(admin, svc, status)


def available(obj: Mapping[str, Any]) -> bool:
    """A Deployment with all replicas updated and available, a LeaderWorkerSet
    ``Available``, an InferenceService ``Ready``."""
    status = obj.get("status") or {}
    if obj["kind"] == "Deployment":
        want = obj["spec"].get("replicas", 1)
        return bool(status.get("availableReplicas") == want == status.get("updatedReplicas"))
    wanted = "Available" if obj["kind"] == "LeaderWorkerSet" else "Ready"
    return any(
        c["type"] == wanted and c["status"] == "True" for c in status.get("conditions") or []
    )


def workload_of(svc: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, name) of the workload NVIDIA's operator runs a NIMService as."""
    name = svc["metadata"]["name"]
    if svc["spec"].get("inferencePlatform") == "kserve":
        return "InferenceService", name
    if svc["spec"].get("multiNode"):
        return "LeaderWorkerSet", f"{name}-lws"
    return "Deployment", name


async def workload_ready(admin: Client, ns: str, kind: str, name: str) -> bool:
    return available(await admin.get(WORKLOAD_API[kind], kind, name, ns))


async def workloads_ready(admin: Client, snap: Snapshot) -> None:
    """Wait until every workload of ``snap`` is available again (a rollout would be done)."""
    for kind, name in snap.workloads:
        await wait_for(
            lambda k=kind, n=name: workload_ready(admin, snap.namespace, k, n), timeout=60
        )


async def nvidia_made(admin: Client, docs: list[Obj]) -> list[tuple[str, str]]:
    """Create what NVIDIA's operator leaves for ``docs``; the CRs' (kind, name)."""
    ns = docs[0]["metadata"]["namespace"]
    await apply_objects(admin, secrets(ns))
    crs: list[tuple[str, str]] = []
    caches: dict[str, Obj] = {}
    for doc in (d for d in docs if d["kind"] == "NIMCache"):
        cache = await create_cr(admin, "NIMCache", doc, nv.stored_nimcache_spec(doc["spec"]))
        cache = await set_status(admin, cache, nv.nimcache_status(cache, STAMP))
        await apply_objects(admin, nv.nimcache_children(cache))
        caches[cache["metadata"]["name"]] = cache
        crs.append(("NIMCache", cache["metadata"]["name"]))
    for doc in (d for d in docs if d["kind"] == "NIMService"):
        svc = await create_cr(admin, "NIMService", doc, nv.stored_nimservice_spec(doc["spec"]))
        await nvidia_nimservice(admin, svc, caches)
        crs.append(("NIMService", svc["metadata"]["name"]))
    for doc in (d for d in docs if d["kind"] == "NIMPipeline"):
        spec = nv.stored_nimpipeline_spec(doc["spec"])
        pipeline = await create_cr(admin, "NIMPipeline", doc, spec)
        states: dict[str, str] = {}
        for want in nv.pipeline_nimservices(pipeline):
            svc = await create_cr(admin, "NIMService", want, want["spec"])
            await nvidia_nimservice(admin, svc, caches)
            states[svc["metadata"]["name"]] = "Ready"
            crs.append(("NIMService", svc["metadata"]["name"]))
        await set_status(admin, pipeline, nv.nimpipeline_status(states))
        crs.append(("NIMPipeline", pipeline["metadata"]["name"]))
    return crs


# -- what a rollout looks like --------------------------------------------------------------


@dataclass
class Snapshot:
    workloads: dict[tuple[str, str], Obj]  # (kind, name) -> stored object
    replicasets: dict[str, set[str]]  # Deployment -> its ReplicaSets
    statefulsets: dict[str, Obj]  # name -> pod template (the LeaderWorkerSets')
    pods: dict[str, str]  # pod name -> uid
    children: dict[tuple[str, str], Obj]  # every object in the namespace NVIDIA's made
    namespace: str


CHILD_KINDS = (
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("v1", "PersistentVolumeClaim"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    *WORKLOADS,
)


async def snapshot(admin: Client, ns: str) -> Snapshot:
    workloads: dict[tuple[str, str], Obj] = {}
    for api_version, kind in WORKLOADS:
        for obj in (await admin.list(api_version, kind, ns))["items"]:
            workloads[(kind, obj["metadata"]["name"])] = obj
    replicasets: dict[str, set[str]] = {}
    for rs in (await admin.list("apps/v1", "ReplicaSet", ns))["items"]:
        for ref in rs["metadata"].get("ownerReferences") or []:
            replicasets.setdefault(ref["name"], set()).add(rs["metadata"]["name"])
    statefulsets = {
        s["metadata"]["name"]: s["spec"]["template"]
        for s in (await admin.list("apps/v1", "StatefulSet", ns))["items"]
    }
    pods = {
        p["metadata"]["name"]: p["metadata"]["uid"]
        for p in (await admin.list("v1", "Pod", ns))["items"]
    }
    children: dict[tuple[str, str], Obj] = {}
    for api_version, kind in CHILD_KINDS:
        for obj in (await admin.list(api_version, kind, ns))["items"]:
            children[(kind, obj["metadata"]["name"])] = obj
    return Snapshot(workloads, replicasets, statefulsets, pods, children, ns)


def pod_templates(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The pod templates of a workload (what rolls pods when it changes): a Deployment's,
    a LeaderWorkerSet's, an InferenceService's predictor without its scaling fields.

    ``metadata.creationTimestamp: null`` is dropped: Go writes it, a typed
    decode ignores it, so it never rolls anything.
    """
    spec = obj.get("spec") or {}
    if obj["kind"] == "Deployment":
        templates = {"template": spec.get("template")}
    elif obj["kind"] == "InferenceService":
        predictor = spec.get("predictor") or {}
        templates = {"predictor": {k: v for k, v in predictor.items() if k not in ISVC_SCALING}}
    else:
        lwt = spec.get("leaderWorkerTemplate") or {}
        templates = {
            "leaderTemplate": lwt.get("leaderTemplate"),
            "workerTemplate": lwt.get("workerTemplate"),
            "size": lwt.get("size"),
        }
    out = json.loads(json.dumps(templates))
    for t in out.values():
        if isinstance(t, dict) and isinstance(t.get("metadata"), dict):
            t["metadata"].pop("creationTimestamp", None)
    return dict(out)


def content(obj: Mapping[str, Any]) -> Obj:
    """An object without ``metadata`` and ``status``: what it asks for."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def leaf_diff(a: Any, b: Any, path: str = "") -> list[str]:
    """The paths where ``a`` and ``b`` differ, with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for k in sorted(set(a) | set(b), key=str):
            out += leaf_diff(a.get(k), b.get(k), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in leaf_diff(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} -> {b!r}"]


def rollouts(before: Snapshot, after: Snapshot) -> dict[str, list[str]]:
    """Each workload that rolled, with what changed in its pod template and what it did,
    and under ``"pods replaced"`` the pods that are not the ones that ran before."""
    rolled: dict[str, list[str]] = {}
    for key, old in before.workloads.items():
        new = after.workloads.get(key)
        name = f"{key[0]}/{key[1]}"
        if new is None:
            rolled[name] = ["deleted"]
            continue
        why = leaf_diff(pod_templates(old), pod_templates(new))
        if new["metadata"]["uid"] != old["metadata"]["uid"]:
            why.append("recreated")
        if key[0] == "Deployment":
            added = after.replicasets.get(key[1], set()) - before.replicasets.get(key[1], set())
            why += [f"new ReplicaSet {rs}" for rs in sorted(added)]
        else:
            for sts, template in before.statefulsets.items():
                if sts.startswith(key[1]) and after.statefulsets.get(sts) != template:
                    changed = leaf_diff(template, after.statefulsets.get(sts))
                    why.append(f"StatefulSet {sts} template changed: {changed}")
        if why:
            rolled[name] = why
    replaced = sorted(p for p, uid in before.pods.items() if after.pods.get(p) != uid)
    if replaced:
        rolled["pods replaced"] = replaced
    return rolled


# -- the test ---------------------------------------------------------------------------------


@dataclass
class Env:
    cluster: Any
    admin: Client
    tmp: Path


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("takeover")
    async with cluster_with_crds(tmp, profile=NODES) as (cluster, admin):
        await install_ecosystem(admin)
        await apply_objects(admin, [STORAGE_CLASS])
        yield Env(cluster, admin, tmp)


async def cr_state(admin: Client, kind: str, name: str, ns: str) -> Obj:
    return await admin.get(API, kind, name, ns)


@pytest.mark.parametrize("case", list(SAMPLES))
async def test_taking_over_nvidias_objects_rolls_no_nim(env: Env, case: str) -> None:
    ns = f"takeover-{case}"
    docs = sample_docs(case, ns)
    crs = await nvidia_made(env.admin, docs)
    before = await snapshot(env.admin, ns)
    assert before.workloads and before.pods, "NVIDIA's objects run before the take-over"

    kubeconfig = env.cluster.write_kubeconfig(
        env.tmp / f"{case}.kubeconfig", user="nimctl-operator"
    )
    operator = await start_operator(kubeconfig)
    try:

        async def pending() -> list[str]:
            """What is not yet taken over (empty: done)."""
            out: list[str] = []
            for kind, name in crs:
                obj = await cr_state(env.admin, kind, name, ns)
                has = nv.FINALIZERS[kind] in (obj["metadata"].get("finalizers") or [])
                if has != (kind in SHARED_FINALIZERS):
                    out.append(f"{kind}/{name} finalizers: {obj['metadata'].get('finalizers')}")
                state = (obj.get("status") or {}).get("state")
                if state != "Ready":
                    out.append(f"{kind}/{name} is {state}: {obj.get('status')}")
            for (kind, name), old in before.workloads.items():
                theirs = (old["metadata"].get("annotations") or {}).get(nv.LAST_APPLIED)
                if theirs is None:
                    continue  # made by KServe or the LeaderWorkerSet controller
                live = await env.admin.get(WORKLOAD_API[kind], kind, name, ns)
                ours = (live["metadata"].get("annotations") or {}).get(nv.LAST_APPLIED)
                if ours == theirs:
                    out.append(f"{kind}/{name} not written by nimctl yet")
            return out

        left: list[str] = []

        async def taken_over() -> bool:
            nonlocal left
            left = await pending()
            return not left

        try:
            await wait_for(taken_over, timeout=60)
        except TimeoutError:
            pytest.fail(f"{case}: not taken over within 60 s: {left}")
        await settle(operator, timeout=60)

        async def observed() -> bool:
            """The simulated controllers have seen the workloads' latest spec."""
            for kind, name in before.workloads:
                live = await env.admin.get(WORKLOAD_API[kind], kind, name, ns)
                seen = (live.get("status") or {}).get("observedGeneration", 0)
                if seen < live["metadata"].get("generation", 1):
                    return False
            return True

        await wait_for(observed, timeout=30)
        await workloads_ready(env.admin, before)
        after = await snapshot(env.admin, ns)
    finally:
        await operator.shutdown()

    rolled = rollouts(before, after)
    workloads = [k for k in rolled if k != "pods replaced"]
    assert rolled == {}, f"{case}: {len(workloads)} workload(s) rolled on take-over: {rolled}"
    for key, old in before.children.items():
        new = after.children.get(key)
        assert new is not None, f"{key} was deleted"
        assert new["metadata"]["uid"] == old["metadata"]["uid"], f"{key} was recreated"
        if not key[1].endswith(REWRITTEN_DATA):
            # nimctl's objects equal NVIDIA's but for metadata: spec, data, rules,
            # subjects (HPA ranges, Service ports, mounted hostfiles and SSH key ...)
            changed = leaf_diff(content(old), content(new))
            assert not changed, f"{case}: {key[0]}/{key[1]} changed: {changed}"
    for kind, name in crs:
        obj = await cr_state(env.admin, kind, name, ns)
        # NVIDIA's NIMService finalizer cleans nothing up: nimctl removes it. NIMCache
        # and NIMPipeline keep theirs, which nimctl uses under the same name.
        want = [nv.FINALIZERS[kind]] if kind in SHARED_FINALIZERS else []
        assert (obj["metadata"].get("finalizers") or []) == want, (kind, name)
