"""Builder: the watches it sets up and the mistakes it refuses."""

from __future__ import annotations

from typing import Any

import pytest

from nimctl_runtime.builder import Builder
from nimctl_runtime.handler import (
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
)
from nimctl_runtime.manager import ManagerOptions
from nimctl_runtime.predicate import GenerationChangedPredicate, LabelSelectorPredicate
from nimctl_runtime.reconcile import Request, Result

from .fakes import FakeCache


class FakeMapper:
    async def is_namespaced(self, api_version: str, kind: str) -> bool:
        return True


class FakeClient:
    mapper = FakeMapper()


class FakeManager:
    def __init__(self) -> None:
        self.client = FakeClient()
        self.cache = FakeCache()
        self.options = ManagerOptions(cache_sync_timeout=7)
        self.added: list[Any] = []

    def has_controller(self, name: str) -> bool:
        return any(getattr(r, "name", None) == name for r in self.added)

    def add(self, runnable: Any) -> None:
        self.added.append(runnable)


class Noop:
    async def reconcile(self, request: Request) -> Result:
        return Result()


def test_builder_wires_for_owns_and_watches() -> None:
    mgr = FakeManager()
    gen = GenerationChangedPredicate()
    only_managed = LabelSelectorPredicate("app.kubernetes.io/managed-by=k8s-nim-operator")
    ctrl = (
        Builder(mgr)  # type: ignore[arg-type]
        .for_("apps.nvidia.com/v1alpha1", "NIMService", predicates=[gen])
        .owns("apps/v1", "Deployment")
        .owns("v1", "Service", match_every_owner=True)
        .watches("apps.nvidia.com/v1alpha1", "NIMCache", lambda o: [Request("ns", "x")])
        .with_event_filter(only_managed)
        .with_options(max_concurrent_reconciles=3, reconcile_timeout=30)
        .complete(Noop())
    )
    assert mgr.added == [ctrl]
    assert ctrl.name == "nimservice"
    assert ctrl.max_concurrent_reconciles == 3 and ctrl.reconcile_timeout == 30
    assert ctrl.cache_sync_timeout == 7, "defaults to the manager's cache sync timeout"
    kinds = [(w.kind, type(w.handler)) for w in ctrl.watches]
    assert kinds == [
        ("NIMService", EnqueueRequestForObject),
        ("Deployment", EnqueueRequestForOwner),
        ("Service", EnqueueRequestForOwner),
        ("NIMCache", EnqueueRequestsFromMapFunc),
    ]
    assert list(ctrl.watches[0].predicates) == [gen, only_managed]
    deployment_owner = ctrl.watches[1].handler
    service_owner = ctrl.watches[2].handler
    assert isinstance(deployment_owner, EnqueueRequestForOwner)
    assert isinstance(service_owner, EnqueueRequestForOwner)
    assert deployment_owner.only_controller and not service_owner.only_controller
    assert deployment_owner.owner_kind == "NIMService"
    assert deployment_owner.owner_group == "apps.nvidia.com"


def test_builder_refuses_missing_for_and_duplicate_names() -> None:
    mgr = FakeManager()
    with pytest.raises(ValueError, match="must call for_"):
        Builder(mgr).named("x").complete(Noop())  # type: ignore[arg-type]
    Builder(mgr).named("dup").for_("v1", "ConfigMap").complete(Noop())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="already used"):
        Builder(mgr).named("dup").for_("v1", "Secret").complete(Noop())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="only be called once"):
        Builder(mgr).for_("v1", "A").for_("v1", "B")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="owns"):
        Builder(mgr).named("o").owns("v1", "Pod").watches(  # type: ignore[arg-type]
            "v1", "Node", lambda o: []
        ).complete(Noop())


def test_a_named_controller_of_watches_only_on_a_cache_of_its_own() -> None:
    # one request for the whole cluster (the driver upgrade), on the GPU controllers' cache
    mgr = FakeManager()
    own = FakeCache()
    ctrl = (
        Builder(mgr)  # type: ignore[arg-type]
        .named("singleton")
        .with_cache(own)  # type: ignore[arg-type]
        .watches("v1", "Node", lambda o: [Request("", "cluster")])
        .watches("apps/v1", "DaemonSet", lambda o: [Request("", "cluster")])
        .complete(Noop())
    )
    assert mgr.added == [ctrl]
    assert ctrl.cache is own and ctrl.cache is not mgr.cache
    assert [(w.kind, type(w.handler)) for w in ctrl.watches] == [
        ("Node", EnqueueRequestsFromMapFunc),
        ("DaemonSet", EnqueueRequestsFromMapFunc),
    ]
