"""Multi-node NIMServices through the reconciler: the MPI objects are created once, never rewritten.

NVIDIA's operator creates ``<name>-mpi-config``, ``<name>-mpi-start-script``
and Secret ``<name>-ssh-pk`` once (nim-operator.md §2.3 step 14a, §2.9). Both
pod templates mount the Secret, so without it every group pod would wait for
its volume forever.
"""

from __future__ import annotations

import base64
import copy
from typing import Any

from cryptography.hazmat.primitives.serialization import load_pem_private_key

from controllers.nimservice import cache_secrets_without_values
from nimctl_runtime.cache.cache import Cache
from platforms.standalone.context import Capabilities
from tests.unit.controllers.fakes import FakeAPI
from tests.unit.controllers.test_nimservice_reconciler import (
    API,
    REQ,
    make,
    nimcache,
    nimservice,
)

MPI = {"parallelism": {"pipeline": 2, "tensor": 4}, "mpi": {"mpiStartTimeout": 300}}
RAY = {"parallelism": {"pipeline": 2, "tensor": 4}, "ray": {"rayPort": 6379}}
MPI_OBJECTS = [
    ("ConfigMap", "llm-mpi-config"),
    ("ConfigMap", "llm-mpi-start-script"),
    ("Secret", "llm-ssh-pk"),
]


def _writes_to(api: FakeAPI, kind: str, name: str) -> list[str]:
    return [verb for verb, k, n in api.writes if k == kind and n == name]


def _edit(api: FakeAPI, **spec: Any) -> None:
    obj = api.obj(API, "NIMService", "llm")
    assert obj is not None
    obj["spec"].update(copy.deepcopy(spec))
    obj["metadata"]["generation"] += 1


async def test_mpi_objects_are_created_once_with_a_usable_key() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice(multiNode=MPI))
    r, _ = make(api, Capabilities.everything())
    await r.reconcile(REQ)
    for kind, name in MPI_OBJECTS:
        assert _writes_to(api, kind, name) == ["create"], (kind, name)
    secret = api.obj("v1", "Secret", "llm-ssh-pk")
    assert secret is not None
    pem = base64.b64decode(secret["data"]["private.key"])
    assert load_pem_private_key(pem, password=None).key_size == 2048  # type: ignore[union-attr]
    lws = api.obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "llm-lws")
    assert lws is not None
    template = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    ssh_pk = next(v for v in template["volumes"] if v["name"] == "ssh-pk")
    assert ssh_pk["secret"]["secretName"] == "llm-ssh-pk"

    writes = len(api.writes)
    await r.reconcile(REQ)
    assert api.writes[writes:] == [], "a second reconcile writes nothing"

    # A spec edit that leaves their content alone does not rewrite them.
    _edit(api, image={"repository": "nvcr.io/nim/meta/llama", "tag": "2"})
    writes = len(api.writes)
    await r.reconcile(REQ)
    rewritten = {(k, n) for v, k, n in api.writes[writes:] if v == "update"}
    assert ("LeaderWorkerSet", "llm-lws") in rewritten
    assert not rewritten & set(MPI_OBJECTS)
    again = api.obj("v1", "Secret", "llm-ssh-pk")
    assert again is not None and again["data"] == secret["data"], "the key is never replaced"


async def test_a_deleted_key_secret_is_created_again() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice(multiNode=MPI))
    r, _ = make(api, Capabilities.everything())
    await r.reconcile(REQ)
    await api.delete("v1", "Secret", "llm-ssh-pk", "default")
    await r.reconcile(REQ)
    assert _writes_to(api, "Secret", "llm-ssh-pk") == ["create", "delete", "create"]
    secret = api.obj("v1", "Secret", "llm-ssh-pk")
    assert secret is not None and secret["data"]["private.key"]


async def test_ray_mode_creates_no_mpi_objects() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice(multiNode=RAY))
    r, _ = make(api, Capabilities.everything())
    await r.reconcile(REQ)
    for kind, name in MPI_OBJECTS:
        assert api.obj("v1", kind, name) is None
    assert api.obj("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "llm-lws") is not None


def test_the_cache_holds_secrets_without_their_values() -> None:
    cache = Cache(client=None)  # type: ignore[arg-type]
    cache_secrets_without_values(cache)
    transform = cache.by_object[("v1", "Secret")].transform
    assert transform is not None
    cached = transform(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "llm-ssh-pk", "namespace": "default"},
            "data": {"private.key": "c2VjcmV0"},
        }
    )
    assert cached["data"] == {"private.key": ""}


async def test_dra_without_resource_api_fails_as_nvidia_says() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice(draResources=[{"resourceClaimTemplateName": "single-gpu"}]))
    r, _ = make(api, Capabilities.nothing())
    await r.reconcile(REQ)
    obj = api.obj(API, "NIMService", "llm")
    assert obj is not None
    st = obj["status"]
    failed = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert (st["state"], failed["reason"]) == ("Failed", "DRAResourcesUnsupported")
    assert "v1.34.0" in failed["message"]
    assert api.obj("apps/v1", "Deployment", "llm") is None


async def test_multinode_without_lws_waits_naming_the_crd() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice(multiNode=RAY))
    r, _ = make(api, Capabilities.nothing())
    result = await r.reconcile(REQ)
    obj = api.obj(API, "NIMService", "llm")
    assert obj is not None
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    assert obj["status"]["state"] == "NotReady"
    assert "LeaderWorkerSet API (leaderworkerset.x-k8s.io/v1)" in ready["message"]
    assert result.requeue_after is None, "the CRD watch wakes it, no polling"
