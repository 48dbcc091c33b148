"""ComputeDomain IMEX daemons as pure logic: only with the driver's controller up, per domain node."""

from __future__ import annotations

from localcluster.simulator import computedomain, dra
from localcluster.simulator.computedomain_daemon import DOMAIN_LABEL
from localcluster.simulator.objects import Context, Create, ObjectLookup, Update, UpdateStatus
from nimctl_runtime.meta import Obj

DRIVER_NS = "gpu-operator"


def ctx(view: ObjectLookup) -> Context:
    return Context(view=view, now=0.0, stamp=lambda: "2026-01-01T00:00:00Z", sim_of=lambda _: 0.0)


def node(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": {}},
        "status": {"capacity": {"cpu": "8", "nvidia.com/gpu": "1"}},
    }


def controller(ready: int) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "nvidia-dra-driver-controller", "namespace": DRIVER_NS, "uid": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "compute-domain", "image": "drv:1"}]}}},
        "status": {"readyReplicas": ready},
    }


def domain() -> Obj:
    return {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "imex", "namespace": "ns", "uid": "cd-uid-0123456789"},
        "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "imex-ch"}}},
    }


def channel_claim_on(node_name: str) -> Obj:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {
            "name": "w-ch",
            "namespace": "ns",
            "uid": "claim",
            "labels": {DOMAIN_LABEL: "cd-uid-0123456789"},
        },
        "status": {
            "allocation": {
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "values": [node_name]}]}
                    ]
                }
            }
        },
    }


def view_with(*objs: Obj) -> ObjectLookup:
    view = ObjectLookup()
    for cls in dra.device_classes():
        view.put(cls)
    for obj in objs:
        view.put(obj)
    return view


def daemon_pod(node_name: str, ready: bool) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "imex-d-x",
            "namespace": DRIVER_NS,
            "uid": "dp",
            "labels": {DOMAIN_LABEL: "cd-uid-0123456789"},
        },
        "spec": {"nodeName": node_name},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_without_a_ready_controller_no_daemons_and_joined_nodes_are_ready() -> None:
    for view in (
        view_with(node("gpu-a"), channel_claim_on("gpu-a")),
        view_with(node("gpu-a"), channel_claim_on("gpu-a"), controller(ready=0)),
    ):
        actions = computedomain.reconcile_computedomain(domain(), ctx(view))
        assert not [a for a in actions if isinstance(a, Update)]
        assert [a.obj["kind"] for a in actions if isinstance(a, Create)] == [
            "ResourceClaimTemplate"
        ]
        (status,) = [a.obj["status"] for a in actions if isinstance(a, UpdateStatus)]
        assert status["status"] == "Ready"
        assert status["nodes"][0]["status"] == "Ready"


def test_controller_up_creates_the_daemonset_labels_the_node_and_waits_for_the_daemon() -> None:
    cd = domain()
    view = view_with(node("gpu-a"), node("gpu-b"), channel_claim_on("gpu-a"), controller(ready=1))
    actions = computedomain.reconcile_computedomain(cd, ctx(view))
    created = {a.obj["kind"]: a.obj for a in actions if isinstance(a, Create)}
    daemon_rct = [
        a.obj
        for a in actions
        if isinstance(a, Create) and a.obj["metadata"]["namespace"] == DRIVER_NS
    ]
    assert [o["kind"] for o in daemon_rct] == ["ResourceClaimTemplate", "DaemonSet"]
    ds = created["DaemonSet"]
    assert ds["metadata"]["namespace"] == DRIVER_NS
    assert ds["metadata"]["ownerReferences"][0]["uid"] == "cd-uid-0123456789"
    pod_spec = ds["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {DOMAIN_LABEL: "cd-uid-0123456789"}
    assert pod_spec["serviceAccountName"] == "compute-domain-daemon-service-account"
    assert pod_spec["containers"][0]["image"] == "drv:1"
    (claim,) = pod_spec["resourceClaims"]
    rct = daemon_rct[0]
    assert claim["resourceClaimTemplateName"] == rct["metadata"]["name"]
    request = rct["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["deviceClassName"] == "compute-domain-daemon.nvidia.com"
    # Only the node holding the channel is labelled.
    (label,) = [a.obj for a in actions if isinstance(a, Update)]
    assert label["metadata"]["name"] == "gpu-a"
    assert label["metadata"]["labels"][DOMAIN_LABEL] == "cd-uid-0123456789"
    (status,) = [a.obj["status"] for a in actions if isinstance(a, UpdateStatus)]
    assert status["status"] == "NotReady"
    assert status["nodes"][0]["status"] == "NotReady"

    # Daemon pod there but not Ready: still NotReady; once Ready: the node and the domain are.
    for o in (*[a.obj for a in actions if isinstance(a, Create)], label):
        view.put(o)
    view.put(daemon_pod("gpu-a", ready=False))
    cd["status"] = status
    assert computedomain.reconcile_computedomain(cd, ctx(view)) == []
    view.put(daemon_pod("gpu-a", ready=True))
    (update,) = computedomain.reconcile_computedomain(cd, ctx(view))
    assert isinstance(update, UpdateStatus)
    assert update.obj["status"]["status"] == "Ready"
    assert update.obj["status"]["nodes"][0]["status"] == "Ready"


def test_a_node_the_channel_left_loses_the_label() -> None:
    labelled = node("gpu-b")
    labelled["metadata"]["labels"] = {DOMAIN_LABEL: "cd-uid-0123456789"}
    other = node("gpu-c")
    other["metadata"]["labels"] = {DOMAIN_LABEL: "someone-else"}
    view = view_with(node("gpu-a"), labelled, other, channel_claim_on("gpu-a"), controller(1))
    actions = computedomain.reconcile_computedomain(domain(), ctx(view))
    updates = {a.obj["metadata"]["name"]: a.obj for a in actions if isinstance(a, Update)}
    assert set(updates) == {"gpu-a", "gpu-b"}
    assert DOMAIN_LABEL not in updates["gpu-b"]["metadata"]["labels"]
