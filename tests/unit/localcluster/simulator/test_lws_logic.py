"""The LeaderWorkerSet controller copies templates as a typed controller does.

A Go client writes ``metadata.creationTimestamp: null`` into a
LeaderWorkerSet's pod templates and a Python client does not; the upstream
controller decodes both into the same typed template, so the StatefulSets it
owns never change (nor restart their pods) when one client's LeaderWorkerSet
is rewritten by the other with the same template.
"""

from __future__ import annotations

import copy
from typing import Any

from localcluster.simulator.lws import reconcile_leaderworkerset
from localcluster.simulator.objects import Context, Create, ObjectLookup, Update

TEMPLATE: dict[str, Any] = {
    "metadata": {"labels": {"app": "llm"}},
    "spec": {"containers": [{"name": "llm", "image": "vllm:1"}]},
}


def lws(template: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "llm", "namespace": "ns", "uid": "lws-uid", "generation": 1},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "leaderTemplate": template}},
    }


def context(*objs: dict[str, Any]) -> Context:
    view = ObjectLookup()
    for o in objs:
        view.put(o)
    return Context(view=view, now=0.0, stamp=lambda: "2026-01-01T00:00:00Z", sim_of=lambda _s: 0.0)


def test_a_template_with_or_without_a_null_creation_timestamp_makes_the_same_statefulset() -> None:
    go_written = copy.deepcopy(TEMPLATE)
    go_written["metadata"]["creationTimestamp"] = None
    (created,) = [
        a.obj
        for a in reconcile_leaderworkerset(lws(go_written), context())
        if isinstance(a, Create)
    ]
    assert created["spec"]["template"]["metadata"]["creationTimestamp"] is None
    rewritten = lws(TEMPLATE)
    actions = reconcile_leaderworkerset(rewritten, context(rewritten, created))
    assert not [a for a in actions if isinstance(a, Update) and a.obj["kind"] == "StatefulSet"]
