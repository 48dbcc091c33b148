"""localcluster's work per write and per event is bounded by what it finds, not by the cluster.

Counted, never timed (issues 28 and 30): a Service create decodes no other Service, the
simulator finds a pod's Services and a Service's pods through indexes, the garbage
collector decodes nothing for a live owned object's status write, and a ServiceAccount
token's signature is checked once. Each test also checks the answer stays the one a
full scan gives.
"""

from __future__ import annotations

from typing import Any

from localcluster.admission import BuiltinAdmission
from localcluster.gc import GarbageCollector
from localcluster.simulator.objects import ObjectLookup, fnv32a, template_hash
from localcluster.tokens import ISSUER, TokenIssuer
from localcluster.watchcache import StoredEvent
from tests.unit.localcluster.services import admit as _admit
from tests.unit.localcluster.services import empty_storage as _storage
from tests.unit.localcluster.services import service as _service

N = 200


def test_a_service_create_decodes_no_other_service() -> None:
    storage = _storage()
    builtin = BuiltinAdmission(storage)
    ips = []
    for i in range(N):
        svc = storage.create(_admit(builtin, _service(f"s{i}")))
        ips.append(svc["spec"]["clusterIP"])
    allocations = builtin._allocations
    assert allocations is not None
    # one decode per Service written (its own event), not one per Service per create
    assert allocations.decoded == N
    assert len(set(ips)) == N
    assert ips[:2] == ["10.96.0.10", "10.96.0.11"]


def test_addresses_and_node_ports_are_freed_and_reused_as_before() -> None:
    storage = _storage()
    builtin = BuiltinAdmission(storage)
    a = storage.create(_admit(builtin, _service("a", svc_type="NodePort")))
    b = storage.create(_admit(builtin, _service("b", svc_type="NodePort")))
    assert (a["spec"]["clusterIP"], b["spec"]["clusterIP"]) == ("10.96.0.10", "10.96.0.11")
    assert [a["spec"]["ports"][0]["nodePort"], b["spec"]["ports"][0]["nodePort"]] == [
        30000,
        30001,
    ]
    storage.delete("v1", "Service", "a", "default")
    c = storage.create(_admit(builtin, _service("c", svc_type="NodePort")))
    assert c["spec"]["clusterIP"] == "10.96.0.10"  # the lowest free address again
    assert c["spec"]["ports"][0]["nodePort"] == 30000
    # an address given by the user is held too
    d = storage.create(_admit(builtin, _service("d", clusterIP="10.96.0.12")))
    e = storage.create(_admit(builtin, _service("e")))
    assert (d["spec"]["clusterIP"], e["spec"]["clusterIP"]) == ("10.96.0.12", "10.96.0.13")
    # two ports of one Service get two node ports
    two = _service("two", svc_type="NodePort")
    two["spec"]["ports"] = [{"name": "a", "port": 80}, {"name": "b", "port": 81}]
    f = storage.create(_admit(builtin, two))
    assert [p["nodePort"] for p in f["spec"]["ports"]] == [30002, 30003]


def _pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "nim", "labels": labels}}


def _selector_service(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "Service",
        "metadata": {"name": name, "namespace": "nim"},
        "spec": {"selector": selector},
    }


def test_pods_of_a_service_and_services_of_a_pod_visit_only_matches() -> None:
    view = ObjectLookup()
    for i in range(N):
        view.put(_pod(f"p{i}", {"app": f"a{i}", "tier": "llm"}))
        view.put(_selector_service(f"s{i}", {"app": f"a{i}"}))
    view.put(_selector_service("all-llm", {"tier": "llm"}))
    view.put(_selector_service("headless", {}))
    view.visited = 0
    assert [p["metadata"]["name"] for p in view.labelled("Pod", "nim", {"app": "a7"})] == ["p7"]
    assert view.visited == 1
    view.visited = 0
    found = view.selecting("Service", "nim", {"app": "a7", "tier": "llm"})
    assert [s["metadata"]["name"] for s in found] == ["s7", "all-llm"]  # in list order
    assert view.visited == 2
    # the same answers a scan of every object gives
    scan = [
        s
        for s in view.list("Service", "nim")
        if s["spec"]["selector"]
        and all({"app": "a7", "tier": "llm"}.get(k) == v for k, v in s["spec"]["selector"].items())
    ]
    assert found == scan
    assert view.selecting("Service", "other", {"app": "a7"}) == []


def test_label_and_selector_changes_move_objects_in_the_indexes() -> None:
    view = ObjectLookup()
    view.put(_pod("p", {"app": "old"}))
    view.put(_selector_service("s", {"app": "old"}))
    view.put(_pod("p", {"app": "new"}))
    view.put(_selector_service("s", {"app": "new", "extra": "x"}))
    assert view.labelled("Pod", "nim", {"app": "old"}) == []
    assert [p["metadata"]["name"] for p in view.labelled("Pod", "nim", {"app": "new"})] == ["p"]
    assert view.selecting("Service", "nim", {"app": "old"}) == []
    assert view.selecting("Service", "nim", {"app": "new"}) == []  # extra=x missing
    assert len(view.selecting("Service", "nim", {"app": "new", "extra": "x"})) == 1
    view.remove(_pod("p", {}))
    view.remove(_selector_service("s", {}))
    assert view.labelled("Pod", "nim", {"app": "new"}) == []
    assert view.selecting("Service", "nim", {"app": "new", "extra": "x"}) == []
    assert view.list("Pod", "nim") == [] and view.list("Service") == []


def _owned(name: str, owner_uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": "default",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner_uid}
            ],
        },
        "data": {"v": "0"},
    }


def test_gc_decodes_nothing_for_a_live_owned_objects_writes() -> None:
    storage = _storage()
    events: list[StoredEvent] = []
    gc = GarbageCollector(storage)
    storage.subscribe(events.append)
    owner = storage.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "owner", "namespace": "default"},
        }
    )
    for i in range(N):
        storage.create(_owned(f"d{i}", owner["metadata"]["uid"]))
    for i in range(N):
        obj = storage.get("v1", "ConfigMap", f"d{i}", "default")
        obj["data"] = {"v": "1"}
        storage.update(obj)
    for ev in events:
        gc.process(ev)
    assert gc.decoded == 0
    # an owner gone: its dependents are still collected
    events.clear()
    storage.delete("v1", "ConfigMap", "owner", "default")
    for ev in events:
        gc.process(ev)
    assert gc.decoded == N
    assert storage.list("v1", "ConfigMap", "default") == []  # every dependent collected


def test_a_token_signature_is_checked_once_and_expiry_still_every_time() -> None:
    now = [1_000_000.0]
    issuer = TokenIssuer(clock=lambda: now[0])
    token = issuer.sign(
        {
            "aud": [ISSUER],
            "exp": 1_000_600,
            "iat": 1_000_000,
            "nbf": 1_000_000,
            "iss": ISSUER,
            "sub": "system:serviceaccount:nim:robot",
            "kubernetes.io": {
                "namespace": "nim",
                "serviceaccount": {"name": "robot", "uid": "sa-1"},
            },
        }
    )
    account = {"metadata": {"name": "robot", "namespace": "nim", "uid": "sa-1"}}
    accounts: dict[str, Any] = {"robot": account}

    def lookup(_kind: str, _ns: str, name: str) -> Any:
        return accounts.get(name)

    for _ in range(N):
        assert issuer.authenticate(token, lookup) is not None
    assert issuer.verifications == 1
    accounts.clear()  # the ServiceAccount deleted: refused at once
    assert issuer.authenticate(token, lookup) is None
    accounts["robot"] = account
    now[0] += 601  # expired: refused though its signature is known
    assert issuer.authenticate(token, lookup) is None
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    assert issuer.authenticate(forged, lookup) is None


def test_template_hash_is_fnv32a_of_the_canonical_template() -> None:
    template = {"spec": {"containers": [{"name": "c", "image": "nim:1"}]}, "metadata": {}}
    text = b'{"metadata":{},"spec":{"containers":[{"image":"nim:1","name":"c"}]}}'
    for collisions in (0, 0, 3, 3):
        data = text + (str(collisions).encode() if collisions else b"")
        want = "".join("bcdfghjklmnpqrstvwxz2456789"[int(ch) % 27] for ch in str(fnv32a(data)))
        assert template_hash(template, collisions) == want
