"""Required pod affinity and anti-affinity in localcluster's scheduler, as kube-scheduler decides.

What a user sees: a pod that may not run beside another stays Pending with
kube-scheduler's FailedScheduling message, and a pod that must run beside
another lands in that pod's topology domain.
"""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.simulator.interpod import prefilter, required_terms
from localcluster.simulator.scheduling import ScheduleResult, schedule
from nimctl_runtime.meta import Obj

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
COMPONENT = "app.kubernetes.io/component"


def node(name: str, zone: str = "a", **labels: str) -> Obj:
    return {
        "metadata": {"name": name, "labels": {HOST: name, ZONE: zone, **labels}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


NODES = [node("n0", "a"), node("n1", "a"), node("n2", "b")]


def pod(name: str, namespace: str = "default", labels: dict[str, str] | None = None,
        on: str | None = None, phase: str = "Running", **affinity: Any) -> Obj:  # fmt: skip
    spec: Obj = {"containers": [{"name": "c", "image": "x"}]}
    if affinity:
        spec["affinity"] = affinity
    if on:
        spec["nodeName"] = on
    return {
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": spec,
        "status": {"phase": phase},
    }


def term(key: str = HOST, **selector: Any) -> Obj:
    return {"labelSelector": selector or {"matchLabels": {"app": "web"}}, "topologyKey": key}


def anti(*terms: Obj) -> Obj:
    return {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}


def place(incoming: Obj, existing: list[Obj], nodes: list[Obj] = NODES,
          namespaces: dict[str, dict[str, str]] | None = None) -> ScheduleResult:  # fmt: skip
    by_name = {n["metadata"]["name"]: n for n in nodes}
    bound = [(p, by_name[p["spec"]["nodeName"]]) for p in existing]
    with_anti = [(p, n, required_terms(p, "podAntiAffinity")) for p, n in bound]
    state = prefilter(incoming, bound, with_anti, namespaces)
    return schedule(incoming, nodes, {}, inter_pod=state)


def test_a_driver_pod_stays_pending_beside_the_old_driver_pod() -> None:
    driver_anti = anti(
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": COMPONENT, "operator": "In", "values": ["nvidia-driver"]}
                ]
            },
            "topologyKey": HOST,
        }
    )
    labels = {COMPONENT: "nvidia-driver"}
    old = pod("old", "gpu-operator", labels, on="n1", podAntiAffinity=driver_anti)
    # The new DaemonSet pod is pinned to n1, as the DaemonSet controller pins it.
    pinned = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
            ]
        }
    }
    new = pod("new", "gpu-operator", labels, podAntiAffinity=driver_anti, nodeAffinity=pinned)
    result = place(new, [old])
    assert result.node_name is None
    assert result.message == (
        "0/3 nodes are available: 1 node(s) didn't match pod anti-affinity rules, "
        "2 node(s) didn't match Pod's node affinity/selector. preemption: 0/3 nodes are "
        "available: 1 No preemption victims found for incoming pod, 2 Preemption is not "
        "helpful for scheduling."
    )
    # Once the old pod is gone, it schedules; a finished old pod no longer counts either.
    assert place(new, []).node_name == "n1"
    finished = pod("old", "gpu-operator", labels, on="n1", phase="Failed",
                   podAntiAffinity=driver_anti)  # fmt: skip
    assert place(new, [finished]).node_name == "n1"


def test_anti_affinity_on_every_node_gives_the_documented_message() -> None:
    web = [pod(f"w{i}", labels={"app": "web"}, on=f"n{i}") for i in range(3)]
    result = place(pod("x", podAntiAffinity=anti(term())), web)
    assert result.message == (
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. preemption: "
        "0/3 nodes are available: 3 No preemption victims found for incoming pod."
    )


def test_an_existing_pods_anti_affinity_keeps_a_matching_pod_away() -> None:
    # The incoming pod has no affinity of its own: the bound pods' terms decide.
    guards = [pod(f"g{i}", labels={"app": "guard"}, on=f"n{i}", podAntiAffinity=anti(term()))
              for i in range(2)]  # fmt: skip
    assert place(pod("web", labels={"app": "web"}), guards).node_name == "n2"
    guards.append(pod("g2", labels={"app": "guard"}, on="n2", podAntiAffinity=anti(term())))
    result = place(pod("web", labels={"app": "web"}), guards)
    assert result.message.startswith(
        "0/3 nodes are available: 3 node(s) didn't satisfy existing pods anti-affinity rules."
    )
    # A pod the terms do not select is not kept away.
    assert place(pod("db", labels={"app": "db"}), guards).node_name is not None


def test_zone_topology_keeps_the_whole_zone_away() -> None:
    existing = [pod("w", labels={"app": "web"}, on="n0")]
    assert place(pod("x", podAntiAffinity=anti(term(ZONE))), existing).node_name == "n2"


def test_affinity_lands_in_the_domain_of_the_pod_it_needs() -> None:
    cache = pod("cache", labels={"app": "web"}, on="n2")
    wants = {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOST)]}
    assert place(pod("x", podAffinity=wants), [cache]).node_name == "n2"
    zone = {"requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE)]}
    assert place(pod("x", podAffinity=zone), [pod("c", labels={"app": "web"}, on="n0")]
                 ).node_name in ("n0", "n1")  # fmt: skip


def test_affinity_with_no_matching_pod_is_unresolvable() -> None:
    wants = {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOST)]}
    result = place(pod("x", labels={"app": "db"}, podAffinity=wants), [])
    assert result.message == (
        "0/3 nodes are available: 3 node(s) didn't match pod affinity rules. preemption: "
        "0/3 nodes are available: 3 Preemption is not helpful for scheduling."
    )


def test_the_first_pod_of_a_self_affine_group_may_go_anywhere() -> None:
    wants = {"requiredDuringSchedulingIgnoredDuringExecution": [term(HOST)]}
    first = pod("w0", labels={"app": "web"}, podAffinity=wants)
    assert place(first, []).node_name is not None
    # A node without the topology label never fits a pod with affinity.
    bare = [{**NODES[0], "metadata": {"name": "bare", "labels": {}}}]
    assert place(first, [], nodes=bare).node_name is None


@pytest.mark.parametrize(
    ("term_namespaces", "other_namespace", "blocked"),
    [
        ({}, "default", True),  # no namespaces: the pod's own
        ({}, "other", False),
        ({"namespaces": ["other"]}, "other", True),
        ({"namespaces": ["other"]}, "default", False),
        ({"namespaceSelector": {}}, "other", True),  # {}: every namespace
        ({"namespaceSelector": {"matchLabels": {"team": "ml"}}}, "other", True),
        ({"namespaceSelector": {"matchLabels": {"team": "ml"}}}, "default", False),
    ],
)
def test_namespaces_and_namespace_selector(
    term_namespaces: Obj, other_namespace: str, blocked: bool
) -> None:
    one = [node("n0")]
    existing = [pod("w", other_namespace, {"app": "web"}, on="n0")]
    incoming = pod("x", podAntiAffinity=anti({**term(), **term_namespaces}))
    namespaces = {"default": {}, "other": {"team": "ml"}}
    result = place(incoming, existing, nodes=one, namespaces=namespaces)
    assert (result.node_name is None) is blocked


def test_match_label_keys_narrow_the_selector_to_the_pods_own_value() -> None:
    # One replica per node per revision: pods of another revision do not count.
    t = {**term(), "matchLabelKeys": ["rev"]}
    existing = [pod("old", labels={"app": "web", "rev": "1"}, on="n0")]
    incoming = pod("new", labels={"app": "web", "rev": "2"}, podAntiAffinity=anti(t))
    assert place(incoming, existing, nodes=[node("n0")]).node_name == "n0"
    same = pod("new", labels={"app": "web", "rev": "1"}, podAntiAffinity=anti(t))
    assert place(same, existing, nodes=[node("n0")]).node_name is None


def test_a_missing_label_selector_selects_no_pod() -> None:
    t = {"topologyKey": HOST}
    existing = [pod("w", labels={"app": "web"}, on="n0")]
    assert place(pod("x", podAntiAffinity=anti(t)), existing, nodes=[node("n0")]).node_name == "n0"


def test_preemption_policy_never_says_it_is_not_eligible() -> None:
    web = [pod("w", labels={"app": "web"}, on="n0")]
    incoming = pod("x", podAntiAffinity=anti(term()))
    incoming["spec"]["preemptionPolicy"] = "Never"
    result = place(incoming, web, nodes=[node("n0")])
    assert result.message.endswith("preemption: not eligible due to preemptionPolicy=Never.")
