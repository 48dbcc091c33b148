"""The work a NIMService event costs, counted: an event whose generation did not change
re-validates nothing, and a stored object never runs the CRD's CEL rules again.

What a user sees: the operator's CPU per NIMService (issue 30). Validating a
NIMService is the costliest step of a reconcile pass (its CEL rules most of all);
the API server already checked those rules when the object was written. These
tests count calls, never time.
"""

from __future__ import annotations

from typing import Any

import pytest

import api.base
import controllers.nimservice
from api.apps.v1alpha1.nimservice import NIMService
from nimctl_runtime.reconcile import Request
from platforms.parsing import InvalidResource, parse
from tests.unit.controllers.fakes import FakeAPI
from tests.unit.controllers.test_nimservice_reconciler import make, nimcache, nimservice

API = "apps.nvidia.com/v1alpha1"
REQ = Request("default", "llm")


class Counts:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.validations = 0
        self.cel = 0
        real_parse = controllers.nimservice.parse
        real_evaluate = api.base._evaluate

        def counting_parse(model: Any, obj: Any, **kw: Any) -> Any:
            if model is NIMService:
                self.validations += 1
            return real_parse(model, obj, **kw)

        def counting_evaluate(*args: Any) -> bool:
            self.cel += 1
            return real_evaluate(*args)

        monkeypatch.setattr(controllers.nimservice, "parse", counting_parse)
        monkeypatch.setattr(api.base, "_evaluate", counting_evaluate)


def _live(fake: FakeAPI) -> dict[str, Any]:
    obj = fake.obj(API, "NIMService", "llm")
    assert obj is not None
    return obj


async def test_an_event_whose_generation_did_not_change_revalidates_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = Counts(monkeypatch)
    fake = FakeAPI()
    fake.put(nimcache())
    fake.put(nimservice())
    r, _ = make(fake)

    await r.reconcile(REQ)
    assert counts.validations == 1
    assert "Deployment" in {kind for (_, kind, _, _) in fake.objects}

    # Status, labels and annotations change (new resourceVersions), the generation does not.
    for i in range(5):
        live = _live(fake)
        live["metadata"].setdefault("annotations", {})["example.com/touch"] = str(i)
        live["metadata"]["resourceVersion"] = str(1000 + i)
        await r.reconcile(REQ)
    assert counts.validations == 1, "a pass over an unchanged spec validated it again"

    # A spec edit (the API server bumps the generation) is validated once.
    live = _live(fake)
    live["spec"]["replicas"] = 2
    live["metadata"]["generation"] = 2
    await r.reconcile(REQ)
    await r.reconcile(REQ)
    assert counts.validations == 2

    # Objects read back from the API server never evaluate CEL: the server did on write.
    assert counts.cel == 0


def test_a_manifest_not_from_the_api_server_is_still_checked_against_cel(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``nimctl render`` and the webhook parse what the user wrote: the CEL rules apply."""
    counts = Counts(monkeypatch)
    svc = nimservice()
    parse(NIMService, svc)
    assert counts.cel > 0
    stored_before = counts.cel
    parse(NIMService, svc, stored=True)
    assert counts.cel == stored_before


def test_stored_parse_still_checks_the_schema() -> None:
    """Skipping CEL keeps types, enums and bounds: a bad stored spec is still reported."""
    with pytest.raises(InvalidResource, match=r"spec\.expose\.service\.port"):
        parse(NIMService, nimservice(expose={"service": {"port": 70000}}), stored=True)


def _count_schema_walks(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the jsonschema walks of embedded Kubernetes core types (EnvVar, Probe, ...)."""
    import jsonschema  # type: ignore[import-untyped]

    walks = [0]
    real = jsonschema.Draft202012Validator.iter_errors

    def counting(self: Any, *args: Any, **kw: Any) -> Any:
        walks[0] += 1
        return real(self, *args, **kw)

    monkeypatch.setattr(jsonschema.Draft202012Validator, "iter_errors", counting)
    return walks


def test_a_stored_spec_does_not_walk_the_core_types_schemas(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The API server enforced the CRD's structural schema (the same Kubernetes
    definitions) on write: parsing a stored NIMService walks none of them, while a
    manifest from a file walks each embedded core type."""
    walks = _count_schema_walks(monkeypatch)
    svc = nimservice(env=[{"name": "A", "value": "1"}], resources={"limits": {"cpu": "1"}})
    parse(NIMService, svc)
    assert walks[0] >= 2, "a manifest's env and resources were not checked"
    walks[0] = 0
    parsed = parse(NIMService, svc, stored=True)
    assert walks[0] == 0
    assert parsed.spec.env == [{"name": "A", "value": "1"}]
    # the model holds its own copy: editing the input changes nothing in it
    svc["spec"]["env"][0]["value"] = "2"
    assert parsed.spec.env == [{"name": "A", "value": "1"}]


def test_a_stored_core_type_of_the_wrong_json_type_is_still_reported() -> None:
    """Only a value of the definition's JSON type skips the walk: anything else is
    reported with its path, as before."""
    with pytest.raises(InvalidResource, match=r"spec\.env"):
        parse(NIMService, nimservice(env=["not-an-env-var"]), stored=True)


async def test_a_settled_nimservice_keeps_no_copy_of_its_status() -> None:
    """The status memo (what this process wrote, for a cache that lags behind it) is
    dropped once the cache shows a newer version: it can never apply again, and a
    thousand settled NIMServices would each hold a copy of their status."""
    fake = FakeAPI()
    fake.put(nimcache())
    fake.put(nimservice())
    r, _ = make(fake)

    await r.reconcile(REQ)
    status_writes = sum(1 for verb, kind, _ in fake.writes if verb == "patch/status")
    assert status_writes >= 1 and len(r._status) == 1  # written; the cache may lag behind it
    await r.reconcile(REQ)  # the cache shows the written version now
    assert len(r._status) == 0
    assert sum(1 for verb, kind, _ in fake.writes if verb == "patch/status") == status_writes


def test_the_parsed_models_kept_are_bounded_and_a_model_in_use_is_not_parsed_again() -> None:
    """The memo keeps the most recently used models only (a NIMService model is ~9 KB;
    a stored parse ~16 us): 1,000 settled NIMServices do not hold 9 MB of models. A
    model used again within the bound is not parsed again; one evicted is parsed once."""
    from controllers.nimservice_parse import ParseMemo, by_generation

    memo: ParseMemo[str] = ParseMemo(lambda o: o["metadata"]["name"], by_generation, limit=3)

    def obj(name: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "ns", "uid": name, "generation": 1}}

    for name in ("a", "b", "c"):
        memo.get(obj(name))
    memo.get(obj("a"))  # used again: now the most recent
    assert memo.parses == 3
    memo.get(obj("d"))  # evicts b, the least recently used
    assert len(memo) == 3 and memo.parses == 4
    for name in ("a", "c", "d"):
        memo.get(obj(name))
    assert memo.parses == 4, "a model within the bound was parsed again"
    memo.get(obj("b"))
    assert memo.parses == 5 and len(memo) == 3


class ReadCountingAPI(FakeAPI):
    """FakeAPI counting list reads by kind, with the cache's shared whole-kind read."""

    def __init__(self) -> None:
        super().__init__()
        self.lists: dict[str, int] = {}
        self.gets: dict[str, int] = {}
        self.shared: dict[str, int] = {}

    async def list(self, api_version: str, kind: str, namespace: str | None = None, **kw: Any):  # type: ignore[no-untyped-def]
        self.lists[kind] = self.lists.get(kind, 0) + 1
        return await super().list(api_version, kind, namespace, **kw)

    async def get(self, api_version: str, kind: str, name: str, namespace: str | None = None):  # type: ignore[no-untyped-def]
        self.gets[kind] = self.gets.get(kind, 0) + 1
        return await super().get(api_version, kind, name, namespace)

    async def list_shared(self, api_version: str, kind: str) -> tuple[dict[str, Any], ...]:
        self.shared[kind] = self.shared.get(kind, 0) + 1
        return tuple(await super().list(api_version, kind))


GPU_MESSAGE = (
    "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are "
    "available: 2 No preemption victims found for incoming pod."
)


def _waiting_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "llm-5d9f7-abcde",
            "namespace": "default",
            "uid": "pod-uid",
            "labels": {"app": "llm"},
        },
        "spec": {"containers": [{"name": "llm"}]},
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": "Unschedulable",
                    "message": GPU_MESSAGE,
                }
            ],
        },
    }


def _gpu_node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"nvidia.com/gpu.present": "true"}},
        "status": {"allocatable": {"nvidia.com/gpu": "1"}, "capacity": {"nvidia.com/gpu": "1"}},
    }


async def test_a_pass_over_a_ready_nimservice_reads_no_pods_events_or_nodes() -> None:
    """Pods, their Warning Events and the nodes only name what blocks a service that is
    not ready; a Ready service's pass (every Deployment status event of a settled
    NIMService) reads none of them."""
    from tests.unit.controllers.test_nimservice_reconciler import roll_out

    fake = ReadCountingAPI()
    fake.put(nimcache())
    fake.put(nimservice())
    r, _ = make(fake)

    await r.reconcile(REQ)  # creates; not ready yet: its pods are read for a blocker
    assert fake.lists.get("Pod", 0) > 0
    roll_out(fake)
    fake.lists.clear()
    await r.reconcile(REQ)
    await r.reconcile(REQ)
    assert _live(fake)["status"]["state"] == "Ready"
    assert fake.lists.get("Pod", 0) == 0
    assert fake.lists.get("Event", 0) == 0
    assert fake.lists.get("Node", 0) == 0 and not fake.shared


async def test_a_pod_waiting_for_a_gpu_reads_the_shared_nodes_not_a_copy_per_pass() -> None:
    """The nodes that name why a pod waits for a GPU come from the cache's shared
    snapshot (decoded once per change of the Nodes), not a fresh list per pass."""
    fake = ReadCountingAPI()
    fake.put(nimcache())
    fake.put(nimservice())
    fake.put(_gpu_node("gpu-1"))
    fake.put(_gpu_node("gpu-2"))
    r, _ = make(fake)
    await r.reconcile(REQ)
    fake.put(_waiting_pod())
    fake.lists.clear()
    for _ in range(3):
        await r.reconcile(REQ)
    status = _live(fake)["status"]
    assert status["state"] == "NotReady"
    assert any(c.get("reason") == "InsufficientGPU" for c in status["conditions"]), status
    assert fake.shared == {"Node": 3}
    assert fake.lists.get("Node", 0) == 0


async def test_a_pass_reads_each_owned_object_once() -> None:
    """The objects a NIMService owns are read once per pass (by its owner index), not
    once more each to compare it with its desired object."""
    fake = ReadCountingAPI()
    fake.put(nimcache())
    fake.put(nimservice())
    r, _ = make(fake)
    await r.reconcile(REQ)
    fake.gets.clear()
    await r.reconcile(REQ)
    owned = {"ServiceAccount", "Role", "RoleBinding", "Service", "Deployment"}
    assert not owned & set(fake.gets), fake.gets


class RenderCounts:
    """Renders of the NIMService contract, and compressions/decompressions of render memos."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, reconciler: Any) -> None:
        import zlib

        import controllers.render_memo

        self.renders = 0
        self.zlib = 0
        contract = reconciler.kind.contract
        real_render = contract.render

        def counting_render(*args: Any, **kw: Any) -> Any:
            self.renders += 1
            return real_render(*args, **kw)

        def counting(fn: Any) -> Any:
            def wrapped(*args: Any, **kw: Any) -> Any:
                self.zlib += 1
                return fn(*args, **kw)

            return wrapped

        monkeypatch.setattr(contract, "render", counting_render)
        monkeypatch.setattr(controllers.render_memo.zlib, "compress", counting(zlib.compress))
        monkeypatch.setattr(controllers.render_memo.zlib, "decompress", counting(zlib.decompress))


async def test_a_pass_over_an_unchanged_render_encodes_and_renders_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The render memo keeps each object's hash: the first pass writes it without encoding
    or compressing the render, a later pass over unchanged objects neither renders nor
    decompresses, and a drifted object is rendered again and rewritten."""
    fake = FakeAPI()
    fake.put(nimcache())
    fake.put(nimservice())
    r, _ = make(fake)
    counts = RenderCounts(monkeypatch, r)

    await r.reconcile(REQ)
    assert counts.renders == 1 and counts.zlib == 0
    created = {kind for (verb, kind, _) in fake.writes if verb == "create"}
    assert {"ServiceAccount", "Role", "RoleBinding", "Service", "Deployment"} <= created

    for i in range(3):
        live = _live(fake)
        live["metadata"]["resourceVersion"] = str(2000 + i)
        await r.reconcile(REQ)
    assert counts.renders == 1, "a pass over an unchanged NIMService rendered it again"
    assert counts.zlib == 0

    writes = len(fake.writes)
    dep = fake.obj("apps/v1", "Deployment", "llm")
    assert dep is not None
    dep["spec"]["replicas"] = 5  # someone scaled it by hand
    await r.reconcile(REQ)
    assert counts.renders == 2
    assert ("update", "Deployment", "llm") in fake.writes[writes:]
    fixed = fake.obj("apps/v1", "Deployment", "llm")
    assert fixed is not None and fixed["spec"]["replicas"] == 1
