"""The simulated DRA driver and claim plumbing as pure logic: slices, claims, allocation."""

from __future__ import annotations

import pytest

from localcluster.simulator import computedomain, dra
from localcluster.simulator.objects import (
    Context,
    Create,
    Delete,
    ObjectLookup,
    UpdateStatus,
)
from nimctl_runtime.meta import Obj

H100 = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'
NEW_DRIVER = 'device.attributes["gpu.nvidia.com"].driverVersion.compareTo(semver("550.0.0")) >= 0'
BIG_MEMORY = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
HUGE_MEMORY = 'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("100Gi")) >= 0'
HOPPER = "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"


def node(name: str, gpus: int, product: str | None = None) -> Obj:
    labels = {"nvidia.com/gpu.product": product} if product else {}
    capacity = {"cpu": "8"} | ({"nvidia.com/gpu": str(gpus)} if gpus else {})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "uid": f"uid-{name}", "labels": labels},
        "status": {"capacity": capacity},
    }


def ctx(view: ObjectLookup) -> Context:
    return Context(view=view, now=0.0, stamp=lambda: "2026-01-01T00:00:00Z", sim_of=lambda _: 0.0)


def cluster(*nodes: Obj) -> ObjectLookup:
    view = ObjectLookup()
    for cls in dra.device_classes():
        view.put(cls)
    for n in nodes:
        view.put(n)
        for rs in dra.resource_slices(n):
            view.put(rs)
    return view


def pod(name: str = "llm-abc", claims: list[Obj] | None = None) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {"resourceClaims": claims or [], "containers": [{"name": "c", "image": "i"}]},
    }


def template(name: str, *selectors: str, count: int = 1) -> Obj:
    exactly: Obj = {"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount"}
    exactly["count"] = count
    if selectors:
        exactly["selectors"] = [{"cel": {"expression": e}} for e in selectors]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {
            "metadata": {"labels": {"app": "llm"}},
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": exactly}]}},
        },
    }


def test_slices_per_gpu_node() -> None:
    assert dra.resource_slices(node("cpu-0", 0)) == []
    gpu, imex = dra.resource_slices(node("gpu-0", 2, "NVIDIA-A100-SXM4-40GB"))
    assert gpu["metadata"]["name"] == "gpu-0-gpu.nvidia.com"
    assert gpu["spec"]["nodeName"] == "gpu-0" and gpu["spec"]["driver"] == "gpu.nvidia.com"
    devices = gpu["spec"]["devices"]
    assert [d["name"] for d in devices] == ["gpu-0", "gpu-1"]
    assert devices[0]["attributes"]["productName"] == {"string": "NVIDIA A100 SXM4 40GB"}
    assert devices[0]["attributes"]["architecture"] == {"string": "Ampere"}
    assert devices[0]["capacity"]["memory"] == {"value": "40Gi"}
    assert imex["spec"]["driver"] == "compute-domain.nvidia.com"
    view = ObjectLookup()
    n = node("gpu-0", 1)
    actions = dra.reconcile_node_slices(n, ctx(view))
    assert [a.obj["metadata"]["name"] for a in actions if isinstance(a, Create)] == [
        "gpu.nvidia.com",
        "compute-domain-default-channel.nvidia.com",
        "compute-domain-daemon.nvidia.com",
        "gpu-0-gpu.nvidia.com",
        "gpu-0-compute-domain.nvidia.com",
    ]
    for a in actions:
        assert isinstance(a, Create)
        view.put(a.obj)
    assert dra.reconcile_node_slices(n, ctx(view)) == []


@pytest.mark.parametrize(
    ("expression", "matches"),
    [(H100, True), (NEW_DRIVER, True), (BIG_MEMORY, True), (HUGE_MEMORY, False), (HOPPER, True),
     ("device.attributes['gpu.nvidia.com'].nope == 1", False), ("not CEL (", False)],
)  # fmt: skip
def test_selectors(expression: str, matches: bool) -> None:
    (gpu, _) = dra.resource_slices(node("gpu-0", 1))
    assert dra.selector_matches(expression, "gpu.nvidia.com", gpu["spec"]["devices"][0]) is matches


def test_generated_claim_names() -> None:
    assert dra.generate_claim_name("llm-7d9f-x2x", "claim-a") == "llm-7d9f-x2x-claim-a-"
    long = dra.generate_claim_name("p" * 60, "c" * 30)
    assert len(long) <= dra.MAX_GENERATE_NAME + 1 and long.endswith("-")
    assert "c" in long, "the pod claim name is kept in part"


def test_claim_from_template_then_allocation_on_a_node_that_fits() -> None:
    view = cluster(node("gpu-a", 1, "NVIDIA-L4"), node("gpu-b", 2))
    view.put(template("h100", H100, count=2))
    p = pod(claims=[{"name": "gpu", "resourceClaimTemplateName": "h100"}])
    actions, claims, problem = dra.pod_claims(p, view)
    (create,) = actions
    assert isinstance(create, Create) and not claims and "waiting" in problem
    claim = create.obj
    assert claim["metadata"]["generateName"] == "llm-abc-gpu-"
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/pod-claim-name": "gpu"}
    assert claim["metadata"]["labels"] == {"app": "llm"}
    assert claim["metadata"]["ownerReferences"][0]["uid"] == "uid-llm-abc"
    claim["metadata"]["name"] = "llm-abc-gpu-x7k2p"
    view.put(claim)

    actions, claims, problem = dra.pod_claims(p, view)
    assert problem == "" and list(claims) == ["gpu"]
    (status,) = actions
    assert isinstance(status, UpdateStatus)
    assert status.obj["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": "llm-abc-gpu-x7k2p"}
    ]
    assert dra.feasible_nodes(claims, ["gpu-a", "gpu-b"], view) == ["gpu-b"]
    (allocated,) = dra.allocate(p, "gpu-b", claims, view)
    assert isinstance(allocated, UpdateStatus)
    st = allocated.obj["status"]
    assert [r["device"] for r in st["allocation"]["devices"]["results"]] == ["gpu-0", "gpu-1"]
    assert st["reservedFor"] == [{"resource": "pods", "name": "llm-abc", "uid": "uid-llm-abc"}]
    view.put(allocated.obj)

    # The node's two GPUs are taken: a second pod wanting two finds no node.
    other = pod("llm-def", claims=[{"name": "gpu", "resourceClaimTemplateName": "h100"}])
    second = {**claim, "metadata": {**claim["metadata"], "name": "llm-def-gpu-aaaaa"}}
    second["metadata"]["ownerReferences"] = [{"uid": "uid-llm-def", "controller": True}]
    view.put(second)
    _, claims2, _ = dra.pod_claims(other, view)
    assert dra.feasible_nodes(claims2, ["gpu-a", "gpu-b"], view) == []

    # The first pod goes: its reservation and the allocation go too.
    (freed,) = dra.reconcile_resourceclaim(allocated.obj, ctx(view))
    assert isinstance(freed, UpdateStatus)
    assert "allocation" not in freed.obj["status"] and "reservedFor" not in freed.obj["status"]


def test_a_missing_named_claim_or_template_is_the_problem() -> None:
    view = cluster(node("gpu-a", 1))
    p = pod(claims=[{"name": "a", "resourceClaimName": "shared"},
                    {"name": "b", "resourceClaimTemplateName": "absent"}])  # fmt: skip
    actions, claims, problem = dra.pod_claims(p, view)
    assert actions == [] and claims == {}
    assert problem == (
        'resourceclaim "shared" not found; resourceclaimtemplate "absent" not found'
    )


def test_compute_domain_template_then_nodes_join() -> None:
    domain = {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {"name": "imex", "namespace": "ns", "uid": "cd-uid"},
        "spec": {"numNodes": 2, "channel": {"resourceClaimTemplate": {"name": "imex-ch"}}},
    }
    view = cluster(node("gpu-a", 1), node("gpu-b", 1))
    actions = computedomain.reconcile_computedomain(domain, ctx(view))
    template = next(a.obj for a in actions if isinstance(a, Create))
    assert template["metadata"]["name"] == "imex-ch"
    request = template["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["deviceClassName"] == "compute-domain-default-channel.nvidia.com"
    status = next(a.obj for a in actions if isinstance(a, UpdateStatus))["status"]
    assert status == {"status": "NotReady"}
    view.put(template)

    # Each pod's channel claim lands on its own node (one channel per node).
    for pod_name in ("leader", "worker"):
        p = pod(pod_name, claims=[{"name": "ch", "resourceClaimTemplateName": "imex-ch"}])
        (create,) = dra.pod_claims(p, view)[0]
        assert isinstance(create, Create)
        made = {**create.obj, "metadata": {**create.obj["metadata"], "name": f"{pod_name}-ch"}}
        view.put(made)
        _, claims, _ = dra.pod_claims(p, view)
        (where,) = dra.feasible_nodes(claims, ["gpu-a", "gpu-b"], view)[:1]
        (allocated,) = dra.allocate(p, where, claims, view)
        assert isinstance(allocated, UpdateStatus)
        view.put(allocated.obj)
    domain["status"] = status
    (update,) = computedomain.reconcile_computedomain(domain, ctx(view))
    assert isinstance(update, UpdateStatus)
    st = update.obj["status"]
    assert st["status"] == "Ready"
    assert [n["name"] for n in st["nodes"]] == ["gpu-a", "gpu-b"]


def _claim(name: str, *, admin: bool, mode: str = "All") -> Obj:
    exactly: Obj = {"deviceClassName": "gpu.nvidia.com", "allocationMode": mode}
    if admin:
        exactly["adminAccess"] = True
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
    }


def test_admin_access_sees_every_device_and_takes_none() -> None:
    view = cluster(node("gpu-a", 2))
    p = pod("dcgm")
    (admin,) = dra.allocate(p, "gpu-a", {"gpus": _claim("admin", admin=True)}, view)
    results = admin.obj["status"]["allocation"]["devices"]["results"]
    assert [(r["device"], r.get("adminAccess")) for r in results] == [("gpu-0", True),
                                                                      ("gpu-1", True)]  # fmt: skip
    view.put(admin.obj)
    # A workload still gets both GPUs; an admin claim still sees them once taken.
    workload = {"gpus": _claim("work", admin=False)}
    assert dra.feasible_nodes(workload, ["gpu-a"], view) == ["gpu-a"]
    (taken,) = dra.allocate(pod("llm"), "gpu-a", workload, view)
    view.put(taken.obj)
    again = {"gpus": _claim("admin-2", admin=True)}
    assert dra.feasible_nodes(again, ["gpu-a"], view) == ["gpu-a"]


def test_slices_follow_the_dra_kubelet_plugin_on_a_node_without_the_device_plugin() -> None:
    bare = node("gpu-a", 0)
    bare["metadata"]["annotations"] = {"localcluster.nimctl.io/gpus": "4"}
    view = ObjectLookup()
    assert dra.reconcile_node_slices(bare, ctx(view)) == []
    running = {**bare, "metadata": {**bare["metadata"], "annotations": {
        **bare["metadata"]["annotations"], dra.DRA_PLUGIN_ANNOTATION: "true"}}}  # fmt: skip
    created = [a.obj for a in dra.reconcile_node_slices(running, ctx(view)) if isinstance(a, Create)]
    gpu = next(o for o in created if o["metadata"]["name"] == "gpu-a-gpu.nvidia.com")
    assert len(gpu["spec"]["devices"]) == 4
    for obj in created:
        view.put(obj)
    gone = {**bare, "metadata": {**bare["metadata"], "annotations": {
        **bare["metadata"]["annotations"], dra.DRA_PLUGIN_ANNOTATION: "false"}}}  # fmt: skip
    deleted = {a.name for a in dra.reconcile_node_slices(gone, ctx(view)) if isinstance(a, Delete)}
    assert deleted == {"gpu-a-gpu.nvidia.com", "gpu-a-compute-domain.nvidia.com"}
