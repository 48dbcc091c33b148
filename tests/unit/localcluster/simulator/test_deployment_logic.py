"""Deployment rollout arithmetic: maxSurge and maxUnavailable bound every step."""

from __future__ import annotations

import copy
from typing import Any

from localcluster.simulator.deployment import reconcile_deployment
from localcluster.simulator.objects import (
    Context,
    Create,
    ObjectLookup,
    Update,
    template_hash,
)


def make_deployment(image: str, surge: Any, unavailable: Any, replicas: int = 4) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": 2},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable},
            },
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": image}]},
            },
        },
    }


def replicaset(
    d: dict[str, Any], image: str, replicas: int, available: int, revision: int
) -> dict[str, Any]:
    template = copy.deepcopy(d["spec"]["template"])
    template["spec"]["containers"][0]["image"] = image
    h = template_hash(template)
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": f"web-{h}",
            "namespace": "ns",
            "uid": f"rs-{h}",
            "labels": {"app": "web", "pod-template-hash": h},
            "annotations": {"deployment.kubernetes.io/revision": str(revision)},
            "ownerReferences": [
                {"uid": "d-uid", "controller": True, "kind": "Deployment", "name": "web"}
            ],
        },
        "spec": {"replicas": replicas, "template": template},
        "status": {
            "replicas": replicas,
            "readyReplicas": available,
            "availableReplicas": available,
        },
    }


def context(*objs: dict[str, Any]) -> Context:
    view = ObjectLookup()
    for o in objs:
        view.put(o)
    return Context(view=view, now=0.0, stamp=lambda: "2026-01-01T00:00:00Z", sim_of=lambda _s: 0.0)


def scaled(actions: list[Any]) -> dict[str, int]:
    return {
        a.obj["metadata"]["name"]: a.obj["spec"]["replicas"]
        for a in actions
        if isinstance(a, Update) and a.obj["kind"] == "ReplicaSet"
    }


def test_max_surge_bounds_the_new_replicaset_and_max_unavailable_zero_keeps_old_pods() -> None:
    d = make_deployment("v2", 1, 0)
    old = replicaset(d, "v1", 4, 4, 1)
    actions = reconcile_deployment(d, context(d, old))
    created = [a.obj for a in actions if isinstance(a, Create)]
    assert (
        len(created) == 1 and created[0]["spec"]["replicas"] == 1
    )  # 4 + maxSurge 1 = 5 pods at most
    assert created[0]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    assert scaled(actions) == {}  # nothing old goes before something new is available


def test_old_pods_go_only_as_new_ones_become_available() -> None:
    d = make_deployment("v2", 1, 0)
    old = replicaset(d, "v1", 4, 4, 1)
    new = replicaset(d, "v2", 1, 0, 2)
    assert scaled(reconcile_deployment(d, context(d, old, new))) == {}
    new_ready = replicaset(d, "v2", 1, 1, 2)
    assert scaled(reconcile_deployment(d, context(d, old, new_ready))) == {
        old["metadata"]["name"]: 3
    }


def test_max_unavailable_allows_scaling_old_down_first() -> None:
    d = make_deployment("v2", 0, 2)
    old = replicaset(d, "v1", 4, 4, 1)
    new = replicaset(d, "v2", 0, 0, 2)
    changes = scaled(reconcile_deployment(d, context(d, old, new)))
    assert changes == {old["metadata"]["name"]: 2}
