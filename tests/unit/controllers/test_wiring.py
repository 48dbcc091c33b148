"""The primary kind's watch: our own status and metadata writes do not wake it again."""

from __future__ import annotations

import copy
from typing import Any

from controllers.wiring import spec_change_predicate
from nimctl_runtime.handler import UpdateEvent


def nimservice() -> dict[str, Any]:
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": "llm", "namespace": "ns", "generation": 1, "resourceVersion": "1"},
        "spec": {"replicas": 1},
        "status": {"state": "NotReady"},
    }


def passes(old: dict[str, Any], new: dict[str, Any]) -> bool:
    return spec_change_predicate().update(UpdateEvent(old, new))


def test_a_status_write_does_not_trigger_a_reconcile() -> None:
    old = nimservice()
    new = copy.deepcopy(old)
    new["status"] = {"state": "Ready"}
    new["metadata"]["resourceVersion"] = "2"
    assert not passes(old, new)


def test_a_finalizer_or_label_write_does_not_trigger_a_reconcile() -> None:
    old = nimservice()
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = []
    new["metadata"]["labels"] = {"x": "y"}
    assert not passes(old, new)


def test_a_spec_change_or_the_start_of_deletion_does() -> None:
    old = nimservice()
    edited = copy.deepcopy(old)
    edited["spec"]["replicas"] = 2
    assert passes(old, edited)
    deleting = copy.deepcopy(old)
    deleting["metadata"]["deletionTimestamp"] = "2026-11-24T00:00:00Z"
    assert passes(old, deleting)
