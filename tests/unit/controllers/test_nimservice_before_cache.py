"""What a NIMService creates while its NIMCache is still getting ready (NVIDIA's order).

NVIDIA's operator creates the ServiceAccount, Role, RoleBinding, Service,
Ingress, routes, HPA and EPP objects before it resolves the model store; the
Deployment (or LeaderWorkerSet) waits for the NIMCache. A cache that stops
being usable later never takes the running Deployment away.
"""

from __future__ import annotations

from platforms.standalone.context import Capabilities
from tests.unit.controllers.fakes import FakeAPI
from tests.unit.controllers.test_nimservice_reconciler import (
    API,
    REQ,
    make,
    nimcache,
    nimservice,
    status,
)

EARLY = ["HorizontalPodAutoscaler", "Role", "RoleBinding", "Service", "ServiceAccount"]
SCALE = {"enabled": True, "hpa": {"minReplicas": 1, "maxReplicas": 3}}


def _scaled() -> dict[str, object]:
    svc = nimservice(scale=SCALE)
    del svc["spec"]["replicas"]
    return svc


async def test_objects_that_do_not_need_the_cache_come_first() -> None:
    api = FakeAPI()
    api.put(nimcache("InProgress"))
    api.put(_scaled())
    r, _ = make(api, Capabilities.everything())
    await r.reconcile(REQ)
    created = sorted(k for v, k, _ in api.writes if v == "create")
    assert created == EARLY, "no Deployment before the NIMCache is Ready"
    st = status(api)
    ready = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert (st["state"], ready["reason"]) == ("NotReady", "NIMCacheNotReady")
    writes = len(api.writes)
    await r.reconcile(REQ)
    assert api.writes[writes:] == [], "a second reconcile writes nothing"

    api.set_status(API, "NIMCache", "cache", nimcache()["status"])
    writes = len(api.writes)
    await r.reconcile(REQ)
    later = [(v, k) for v, k, _ in api.writes[writes:] if not v.startswith("patch")]
    assert later == [("create", "Deployment")], "the early objects are not rewritten"


async def test_a_cache_that_fails_later_leaves_the_deployment_alone() -> None:
    api = FakeAPI()
    api.put(nimcache())
    api.put(nimservice())
    r, _ = make(api, Capabilities.everything())
    await r.reconcile(REQ)
    assert api.obj("apps/v1", "Deployment", "llm") is not None
    api.set_status(API, "NIMCache", "cache", {"state": "Failed"})
    await r.reconcile(REQ)
    assert status(api)["state"] == "Failed"
    assert api.obj("apps/v1", "Deployment", "llm") is not None, "nothing is pruned while blocked"
    assert not [w for w in api.writes if w[0] == "delete"]


async def test_a_missing_cache_still_gets_rbac_and_service() -> None:
    api = FakeAPI()
    api.put(nimservice())
    r, _ = make(api, Capabilities.everything())
    await r.reconcile(REQ)
    assert status(api)["state"] == "Failed"
    created = sorted(k for v, k, _ in api.writes if v == "create")
    assert created == ["Role", "RoleBinding", "Service", "ServiceAccount"]


async def test_kserve_makes_only_its_rbac_before_the_cache() -> None:
    api = FakeAPI()
    api.put(nimcache("InProgress"))
    api.put(nimservice(inferencePlatform="kserve"))
    r, _ = make(api, Capabilities.everything())
    await r.reconcile(REQ)
    created = sorted(k for v, k, _ in api.writes if v == "create")
    assert created == ["Role", "RoleBinding", "ServiceAccount"]
