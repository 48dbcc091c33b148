"""ClusterPolicy (nvidia.com/v1) and NVIDIADriver (nvidia.com/v1alpha1): the docs
examples parse and survive a round trip, the CRD defaults and shape are NVIDIA's,
the immutable NVIDIADriver fields refuse a change, and every CEL rule, bound,
enum, pattern and required field rejects a manifest that breaks it."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from api.base import validate_transition
from api.nvidia.v1 import ClusterPolicy
from api.nvidia.v1alpha1 import NVIDIADriver
from api.nvidia.v1alpha1.nvidiadriver import (
    DRIVER_TYPE_IMMUTABLE_MESSAGE,
    USE_PRECOMPILED_IMMUTABLE_MESSAGE,
)
from api.serialize import LoadError, dump, dump_yaml, kind_registry, load, load_all, to_plain
from tests.unit.api.negative_cases import set_path
from tests.unit.api_gpu.cases import BASES, CASES, Case

EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "docs" / "examples"
EXAMPLES = sorted(
    p for p in EXAMPLES_DIR.glob("*.yaml") if p.name.startswith(("clusterpolicy", "nvidiadriver"))
)


def _docs(path: Path) -> list[dict[str, Any]]:
    yaml = YAML(typ="safe", pure=True)
    return [to_plain(d) for d in yaml.load_all(path.read_text()) if d is not None]


def _edit(kind: str, edits: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(BASES[kind])
    for path, value in edits.items():
        set_path(obj, path, value)
    return obj


def test_the_gpu_scenarios_are_all_there() -> None:
    names = {p.name for p in EXAMPLES}
    assert {"clusterpolicy-defaults.yaml", "clusterpolicy-sandbox.yaml",
            "nvidiadriver.yaml"} <= names
    sandbox = load((EXAMPLES_DIR / "clusterpolicy-sandbox.yaml").read_text())
    assert isinstance(sandbox, ClusterPolicy)
    assert sandbox.spec.sandbox_workloads.enabled is True


def test_the_gpu_kinds_are_served_cluster_scoped() -> None:
    assert kind_registry[("nvidia.com/v1", "ClusterPolicy")] is ClusterPolicy
    assert kind_registry[("nvidia.com/v1alpha1", "NVIDIADriver")] is NVIDIADriver
    assert ClusterPolicy.kind_info.scope == NVIDIADriver.kind_info.scope == "Cluster"
    assert NVIDIADriver.kind_info.short_names == ("nvd", "nvdriver", "nvdrivers")


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_parses_and_round_trips_unchanged(path: Path) -> None:
    originals = _docs(path)
    models = load_all(path.read_text())
    assert [type(m).kind_info.kind for m in models] == [d["kind"] for d in originals]
    assert [dump(m) for m in models] == originals
    again = load_all(dump_yaml(models))
    assert [dump(m) for m in again] == originals


def test_clusterpolicy_defaults_are_nvidias() -> None:
    cp = load(_edit("ClusterPolicy", {
        "spec.devicePlugin.mps": {}, "spec.migManager.config": {},
        "spec.vgpuDeviceManager.config": {}, "spec.hostPaths": {}, "spec.cdi": {},
        "spec.driver.upgradePolicy": {"podDeletion": {}, "drain": {}},
        "spec.sandboxWorkloads": {}}))
    spec = dump(cp, defaults=True)["spec"]
    assert spec["operator"] == {"defaultRuntime": "docker", "runtimeClass": "nvidia"}
    assert spec["daemonsets"] == {"updateStrategy": "RollingUpdate"}
    assert spec["driver"]["kernelModuleType"] == "auto"
    assert spec["toolkit"] == {"installDir": "/usr/local/nvidia"}
    assert spec["devicePlugin"]["mps"] == {"root": "/run/nvidia/mps"}
    assert spec["migManager"]["config"] == {
        "name": "default-mig-parted-config", "default": "all-disabled"}
    assert spec["vgpuDeviceManager"]["config"] == {"default": "default"}
    assert spec["hostPaths"] == {"kubeletRootDir": "/var/lib/kubelet"}
    assert spec["cdi"] == {"enabled": True, "default": False, "nriPluginEnabled": False}
    assert spec["sandboxWorkloads"] == {"defaultWorkload": "container", "mode": "kubevirt"}
    upgrade = spec["driver"]["upgradePolicy"]
    assert (upgrade["autoUpgrade"], upgrade["maxParallelUpgrades"],
            upgrade["maxUnavailable"]) == (False, 1, "25%")
    assert upgrade["podDeletion"] == {"force": False, "timeoutSeconds": 300,
                                      "deleteEmptyDir": False}
    assert upgrade["drain"]["timeoutSeconds"] == 300
    # Sections the user did not write are not invented.
    assert "gds" not in spec and "validator" not in spec
    assert dump(cp)["spec"]["toolkit"] == {}


def test_clusterpolicy_reads_like_nvidias_go_types() -> None:
    cp = load((EXAMPLES_DIR / "clusterpolicy-defaults.yaml").read_text())
    assert isinstance(cp, ClusterPolicy)
    assert cp.metadata.name == "cluster-policy"
    assert cp.spec.driver.enabled is True
    assert cp.spec.driver.manager.image == "k8s-driver-manager"
    assert cp.spec.operator.use_ocp_driver_toolkit is False
    assert cp.spec.dcgm_exporter.service_monitor is not None
    assert cp.spec.dcgm_exporter.service_monitor.interval == "15s"
    assert cp.spec.gds is not None and cp.spec.gds.enabled is False
    assert cp.spec.psp.enabled is None  # not written: the component default applies


def test_nvidiadriver_defaults_are_nvidias() -> None:
    nd = load(_edit("NVIDIADriver", {"spec.upgradePolicy": {}}))
    spec = dump(nd, defaults=True)["spec"]
    assert spec["default"] is False
    assert spec["driverType"] == "gpu"
    assert spec["kernelModuleType"] == "auto"
    assert spec["image"] == "nvcr.io/nvidia/driver"
    assert spec["upgradePolicy"] == {
        "autoUpgrade": True, "maxParallelUpgrades": 1, "maxUnavailable": "25%"}


def test_nvidiadriver_driver_type_and_precompiled_are_immutable() -> None:
    old = NVIDIADriver.model_validate(_edit("NVIDIADriver", {"spec.usePrecompiled": False}))
    vgpu = NVIDIADriver.model_validate(
        _edit("NVIDIADriver", {"spec.usePrecompiled": False, "spec.driverType": "vgpu"}))
    precompiled = NVIDIADriver.model_validate(
        _edit("NVIDIADriver", {"spec.usePrecompiled": True}))
    assert validate_transition(old, vgpu) == [DRIVER_TYPE_IMMUTABLE_MESSAGE]
    assert validate_transition(old, precompiled) == [USE_PRECOMPILED_IMMUTABLE_MESSAGE]
    assert validate_transition(old, old) == []
    newer = NVIDIADriver.model_validate(
        _edit("NVIDIADriver", {"spec.usePrecompiled": False, "spec.version": "600.1"}))
    assert validate_transition(old, newer) == []


def test_a_default_driver_may_have_an_empty_node_selector() -> None:
    load(_edit("NVIDIADriver", {"spec.default": True, "spec.nodeSelector": {}}))
    load(_edit("NVIDIADriver", {"spec.default": False, "spec.nodeSelector": {"a": "b"}}))


@pytest.mark.parametrize("kind", sorted(BASES))
def test_base_manifests_are_valid(kind: str) -> None:
    load(BASES[kind])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_manifest_is_rejected(case: Case) -> None:
    with pytest.raises(LoadError) as info:
        load(case.manifest())
    at_path = [e for e in info.value.errors if e.path == case.path]
    assert at_path, f"no error at {case.path}: {info.value.errors}"
    if case.cel:
        assert any(e.message == case.message for e in at_path), info.value.errors


def test_components_are_enabled_by_nvidias_defaults() -> None:
    spec = ClusterPolicy.model_validate(BASES["ClusterPolicy"]).spec
    on = {name: getattr(spec, name).is_enabled() for name in (
        "driver", "toolkit", "device_plugin", "dcgm", "dcgm_exporter", "gfd", "mig_manager",
        "node_status_exporter", "vfio_manager", "sandbox_device_plugin", "vgpu_manager",
        "vgpu_device_manager", "kata_manager", "cc_manager", "kata_sandbox_device_plugin",
        "sandbox_workloads", "psa")}
    assert {k for k, v in on.items() if v} == {
        "driver", "toolkit", "device_plugin", "dcgm", "dcgm_exporter", "gfd", "mig_manager"}
    assert spec.cdi.enabled is True
    off = ClusterPolicy.model_validate(_edit("ClusterPolicy", {
        "spec.driver.enabled": False, "spec.vgpuManager.enabled": True})).spec
    assert not off.driver.is_enabled() and off.vgpu_manager.is_enabled()


def test_image_path_resolution_follows_nvidia() -> None:
    spec = ClusterPolicy.model_validate(_edit("ClusterPolicy", {
        "spec.driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": "595.1"},
        "spec.toolkit": {"repository": "nvcr.io/nvidia/k8s", "image": "container-toolkit",
                         "version": "sha256:0123"},
        "spec.devicePlugin": {"image": "registry.local/dp@sha256:abcd"},
        "spec.gfd": {"repository": "nvcr.io/nvidia", "image": "gfd"},
    })).spec
    assert spec.driver.image_path({}) == "nvcr.io/nvidia/driver:595.1"
    assert spec.toolkit.image_path({}) == "nvcr.io/nvidia/k8s/container-toolkit@sha256:0123"
    assert spec.device_plugin.image_path({}) == "registry.local/dp@sha256:abcd"
    with pytest.raises(ValueError, match="invalid image specification"):
        spec.gfd.image_path({"GFD_IMAGE": "x"})
    assert spec.dcgm.image_path({"DCGM_IMAGE": "nvcr.io/dcgm:4"}) == "nvcr.io/dcgm:4"
    with pytest.raises(ValueError, match="ENV DCGM_EXPORTER_IMAGE"):
        spec.dcgm_exporter.image_path({})
    assert spec.driver.manager.image_path({"DRIVER_MANAGER_IMAGE": "m:1"}) == "m:1"
    assert spec.validator.image_path({"VALIDATOR_IMAGE": "v:1"}) == "v:1"
