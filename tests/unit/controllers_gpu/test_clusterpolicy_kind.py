"""ClusterPolicyKind: the user ConfigMaps the driver mounts, and the singleton in gather."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from controllers.gpu.cache import DRIVER_COMPONENT, DRIVER_COMPONENT_LABEL
from controllers.gpu.clusterpolicy import ClusterPolicyKind
from controllers.gpu.config import GPUConfig
from nimctl_runtime.client.errors import NotFound
from platforms.capabilities import Capabilities
from platforms.contract import Blocked

SPEC_KEYS = (
    "daemonsets", "dcgm", "dcgmExporter", "devicePlugin", "driver", "gfd",
    "nodeStatusExporter", "operator", "toolkit",
)  # fmt: skip


class Reader:
    """Serves ``get``/``list`` from a dict keyed by (kind, name)."""

    def __init__(self, objs: dict[tuple[str, str], dict[str, Any]]) -> None:
        self.objs = objs
        self.gets: list[tuple[str, str]] = []

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any]:
        self.gets.append((kind, name))
        if (kind, name) not in self.objs:
            raise NotFound(404, "NotFound", f"{kind} {name} not found", {})
        return self.objs[(kind, name)]

    async def list(
        self, api_version: str, kind: str, namespace: str | None = None, **_: Any
    ) -> list[dict[str, Any]]:
        return [o for (k, _n), o in self.objs.items() if k == kind]


def policy(name: str, created: str, **driver: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {k: {} for k in SPEC_KEYS}
    spec["driver"] = driver
    return {
        "apiVersion": "nvidia.com/v1",
        "kind": "ClusterPolicy",
        "metadata": {"name": name, "uid": f"uid-{name}", "creationTimestamp": created},
        "spec": spec,
    }


def kind(reader: Reader) -> ClusterPolicyKind:
    return ClusterPolicyKind(
        config=GPUConfig.from_env({"OPERATOR_NAMESPACE": "gpu-operator"}),
        capabilities=Capabilities.nothing(),
        api_reader=reader,
    )


async def test_driver_config_maps_are_read_by_name() -> None:
    obj = policy(
        "cp",
        "2026-01-01T00:00:00Z",
        kernelModuleConfig={"name": "kmod"},
        repoConfig={"configMapName": "repos"},
    )
    reader = Reader(
        {
            ("ClusterPolicy", "cp"): obj,
            ("ConfigMap", "kmod"): {"data": {"nvidia.conf": "x"}, "binaryData": {"b.bin": ""}},
        }
    )
    k = kind(reader)
    facts = await k.gather(ClusterPolicy.model_validate(obj), obj, reader)
    assert dict(facts.cluster.config_map_keys) == {"kmod": ("b.bin", "nvidia.conf")}
    assert ("ConfigMap", "repos") in reader.gets, "a missing ConfigMap is looked up, then absent"


async def test_a_younger_policy_is_ignored() -> None:
    old = policy("old", "2026-01-01T00:00:00Z")
    young = policy("young", "2026-02-01T00:00:00Z")
    reader = Reader({("ClusterPolicy", "old"): old, ("ClusterPolicy", "young"): young})
    k = kind(reader)
    with pytest.raises(Blocked) as blocked:
        await k.gather(ClusterPolicy.model_validate(young), young, reader)
    assert blocked.value.readiness.state == "ignored"
    assert "ClusterPolicy old is the active one" in blocked.value.readiness.message
    facts = await k.gather(ClusterPolicy.model_validate(old), old, reader)
    assert facts.cluster.operator_namespace == "gpu-operator"


def test_driver_daemonsets_are_pruned_orphaning_their_pods_once_nvidiadrivers_own_them() -> None:
    k = kind(Reader({}))
    driver_ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": "nvidia-driver-daemonset",
            "labels": {DRIVER_COMPONENT_LABEL: DRIVER_COMPONENT},
        },
    }
    toolkit_ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "toolkit"}}
    handed_over = policy("cp", "2026-01-01T00:00:00Z", useNvidiaDriverCRD=True)
    own_driver = policy("cp", "2026-01-01T00:00:00Z")
    assert k.write_policy(handed_over, driver_ds).propagation == "Orphan"
    assert k.write_policy(handed_over, toolkit_ds).propagation is None
    assert k.write_policy(own_driver, driver_ds).propagation is None
    # ServiceAccounts are created once, and nothing is kept on prune
    sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x"}}
    assert k.write_policy(own_driver, sa).create_only
    assert not k.write_policy(own_driver, toolkit_ds).create_only
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "x"}}
    assert not k.write_policy(own_driver, pvc).keep_on_prune


def test_the_status_metric_says_no_policy_only_once_the_last_one_is_gone() -> None:
    from controllers.gpu import metrics
    from nimctl_runtime.metrics import REGISTRY

    def status() -> float | None:
        return REGISTRY.get_sample_value("gpu_operator_reconciliation_status")

    k = kind(Reader({}))
    for name in ("a", "b"):
        with contextlib.suppress(Exception):  # an incomplete spec still counts as known
            k.parse(policy(name, "2026-01-01T00:00:00Z"))
    metrics.reconciliation_status.set(metrics.STATUS_READY)
    k.forget("", "a")
    assert status() == metrics.STATUS_READY
    k.forget("", "b")
    assert status() == metrics.STATUS_NO_POLICY
