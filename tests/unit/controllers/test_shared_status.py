"""A status another controller writes part of (``Kind.shared_status``): the
ClusterPolicy's ``DriverUpgrade`` condition belongs to the driver upgrade
controller. Written from a stale cached copy, a plain merge patch would put back
the old condition list and erase it; with ``shared_status`` the write carries the
resourceVersion it was computed from, gets 409, and is redone from fresh data."""

from __future__ import annotations

import copy
from typing import Any

from controllers.reconciler import Kind, KindReconciler
from nimctl_runtime.client.errors import Conflict
from nimctl_runtime.meta import Obj, find_condition, set_condition
from nimctl_runtime.reconcile import Request
from platforms.capabilities import Capabilities
from platforms.contract import GVK, Observed, Readiness
from tests.unit.controllers.fakes import FakeAPI, FakeRecorder

API, KIND = "example.com/v1", "Policy"


class _Contract:
    api_version, kind = API, KIND

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        return ()

    def render(self, cr: Obj, facts: None) -> list[Obj]:
        return []

    def readiness(self, cr: Obj, facts: None, observed: Observed) -> Readiness:
        return Readiness(state="ready", reason="Reconciled", ready=True)


class _PolicyKind(Kind[Obj, None]):
    """Keeps every condition it finds and sets its own ``Ready`` (as ClusterPolicy does)."""

    api_version, kind, recorder_name = API, KIND, "test"

    def __init__(self, shared: bool) -> None:
        self.contract = _Contract()
        self.shared_status = shared

    def parse(self, obj: Obj) -> Obj:
        return obj

    async def gather(self, cr: Obj, obj: Obj, reader: Any) -> None:
        return None

    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        conditions = set_condition(
            list(old.get("conditions") or []), "Ready", "True", readiness.reason, ""
        )
        return {"state": readiness.state, "conditions": conditions}


class _StrictAPI(FakeAPI):
    """A merge patch naming a resourceVersion is refused unless it is the live one."""

    async def patch(self, api_version: str, kind: str, name: str, body: Any, **kw: Any) -> Obj:
        meta = body.get("metadata") if isinstance(body, dict) else None
        wanted = (meta or {}).get("resourceVersion")
        live = self.objects[(api_version, kind, "", name)]
        if wanted is not None and wanted != live["metadata"]["resourceVersion"]:
            self.writes.append(("conflict", kind, name))
            raise Conflict(409, "Conflict", "the object has been modified")
        return await super().patch(api_version, kind, name, body, **kw)


class _Cache:
    """Serves a fixed (possibly stale) copy, as an informer that has not caught up."""

    def __init__(self, obj: Obj) -> None:
        self.obj = obj

    async def get(self, api_version: str, kind: str, name: str, namespace: Any = None) -> Obj:
        return copy.deepcopy(self.obj)

    async def list(self, *args: Any, **kwargs: Any) -> list[Obj]:
        return []


def _setup(shared: bool) -> tuple[KindReconciler[Obj, None], _StrictAPI, _Cache]:
    api = _StrictAPI()
    seeded = api.put({"apiVersion": API, "kind": KIND, "metadata": {"name": "p", "namespace": ""}})
    stale = copy.deepcopy(seeded)
    # The upgrade controller writes its condition; the cache has not seen it yet.
    live = api.objects[(API, KIND, "", "p")]
    live["status"] = {"conditions": set_condition([], "DriverUpgrade", "True", "Upgrading", "")}
    api._bump(live)
    cache = _Cache(stale)
    r: KindReconciler[Obj, None] = KindReconciler(
        kind=_PolicyKind(shared), cache=cache, client=api, api_reader=api, recorder=FakeRecorder()
    )
    return r, api, cache


def _live_conditions(api: FakeAPI) -> list[Obj]:
    return list(api.objects[(API, KIND, "", "p")].get("status", {}).get("conditions") or [])


async def test_a_stale_copy_does_not_erase_the_other_writers_condition() -> None:
    r, api, cache = _setup(shared=True)
    result = await r.reconcile(Request(namespace="", name="p"))
    assert result.requeue, "a conflict asks for another pass"
    assert ("conflict", KIND, "p") in api.writes
    assert find_condition(_live_conditions(api), "DriverUpgrade") is not None

    cache.obj = copy.deepcopy(api.objects[(API, KIND, "", "p")])  # the cache catches up
    await r.reconcile(Request(namespace="", name="p"))
    conditions = _live_conditions(api)
    assert find_condition(conditions, "DriverUpgrade") is not None
    assert find_condition(conditions, "Ready") is not None


async def test_without_shared_status_the_stale_write_wins() -> None:
    """What the flag prevents: last write wins and the other condition is gone."""
    r, api, _ = _setup(shared=False)
    await r.reconcile(Request(namespace="", name="p"))
    conditions = _live_conditions(api)
    assert find_condition(conditions, "Ready") is not None
    assert find_condition(conditions, "DriverUpgrade") is None


async def test_a_stale_finalizer_release_is_retried_quietly() -> None:
    """Releasing our finalizer from a stale copy (the namespace controller deletes
    around us) gets 409: the pass asks to be retried instead of failing with an error."""
    api = _StrictAPI()
    seeded = api.put(
        {
            "apiVersion": API,
            "kind": KIND,
            "metadata": {
                "name": "p",
                "namespace": "",
                "finalizers": ["example.com/cleanup"],
                "deletionTimestamp": "2026-01-01T00:00:00Z",
            },
        }
    )
    stale = copy.deepcopy(seeded)
    api._bump(api.objects[(API, KIND, "", "p")])  # someone else wrote since
    kind = _PolicyKind(shared=False)
    kind.finalizer = "example.com/cleanup"
    cache = _Cache(stale)
    r: KindReconciler[Obj, None] = KindReconciler(
        kind=kind, cache=cache, client=api, api_reader=api, recorder=FakeRecorder()
    )
    result = await r.reconcile(Request(namespace="", name="p"))
    assert result.requeue
    assert api.objects[(API, KIND, "", "p")]["metadata"]["finalizers"] == ["example.com/cleanup"]

    cache.obj = copy.deepcopy(api.objects[(API, KIND, "", "p")])
    result = await r.reconcile(Request(namespace="", name="p"))
    assert not result.requeue
    assert api.objects[(API, KIND, "", "p")]["metadata"]["finalizers"] == []
