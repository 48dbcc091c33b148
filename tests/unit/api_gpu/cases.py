"""Table of invalid ClusterPolicy and NVIDIADriver manifests, one row per CEL
rule, bound, enum, pattern and required field, shared by the model-level tests
and the API-server (localcluster) tests.

Each row starts from the valid base manifest of its kind (:data:`BASES`), applies
edits (a dotted path with ``[i]`` indexes set to a value, or ``DELETE``), and
states the field path the API server reports the error at and what it says:
NVIDIA's message for a CEL rule, or a fragment of Kubernetes' wording otherwise.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Final

from tests.unit.api.negative_cases import (
    DELETE,
    ENUM,
    GE,
    PATTERN,
    REQUIRED,
    set_path,
)

CP, ND = "ClusterPolicy", "NVIDIADriver"
REQUIRED_SECTIONS: Final = (
    "daemonsets",
    "dcgm",
    "dcgmExporter",
    "devicePlugin",
    "driver",
    "gfd",
    "nodeStatusExporter",
    "operator",
    "toolkit",
)
"""The spec keys NVIDIA's ClusterPolicy CRD requires."""

BASES: Final[dict[str, dict[str, Any]]] = {
    CP: {
        "apiVersion": "nvidia.com/v1",
        "kind": CP,
        "metadata": {"name": "neg"},
        "spec": {section: {} for section in REQUIRED_SECTIONS},
    },
    ND: {
        "apiVersion": "nvidia.com/v1alpha1",
        "kind": ND,
        "metadata": {"name": "neg"},
        "spec": {"version": "595.91.07"},
    },
}


@dataclass(frozen=True)
class Case:
    """One invalid manifest and the error it must get."""

    id: str
    kind: str
    edits: tuple[tuple[str, Any], ...]
    path: str
    message: str
    """NVIDIA's CEL message, or a fragment of Kubernetes' wording."""
    cel: bool = False
    status: bool = False
    """The invalid value is in .status (only checked through the status subresource)."""

    def manifest(self) -> dict[str, Any]:
        obj = copy.deepcopy(BASES[self.kind])
        for path, value in self.edits:
            set_path(obj, path, value)
        return obj


def cel(id_: str, kind: str, edits: dict[str, Any], path: str, message: str) -> Case:
    return Case(id_, kind, tuple(edits.items()), path, message, cel=True)


def bound(id_: str, kind: str, edits: dict[str, Any], path: str, fragment: str) -> Case:
    return Case(id_, kind, tuple(edits.items()), path, fragment)


IMAGE_SECTIONS: Final = (
    "driver",
    "driver.manager",
    "toolkit",
    "devicePlugin",
    "dcgm",
    "dcgmExporter",
    "gfd",
    "nodeStatusExporter",
    "migManager",
    "validator",
    "gds",
    "gdrcopy",
    "vfioManager",
    "vfioManager.driverManager",
    "sandboxDevicePlugin",
    "vgpuManager",
    "vgpuManager.driverManager",
    "vgpuDeviceManager",
    "kataManager",
    "ccManager",
    "kataSandboxDevicePlugin",
    "operator.initContainer",
)
"""Every ClusterPolicy section with an `image` name (pattern `[a-zA-Z0-9\\-]+`)."""

PROBE_BOUNDS: Final = ("timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold")

DEFAULT_DRIVER_SELECTOR = "default NVIDIADriver must not use nodeSelector"

CASES: Final[tuple[Case, ...]] = (
    # ---- ClusterPolicy: required sections ------------------------------------------------
    *(
        bound(f"cp-{section.lower()}-missing", CP, {f"spec.{section}": DELETE},
              f"spec.{section}", REQUIRED)
        for section in REQUIRED_SECTIONS
    ),
    # ---- ClusterPolicy: image name pattern of every component ----------------------------
    *(
        bound(f"cp-{section.lower().replace('.', '-')}-image-pattern", CP,
              {f"spec.{section}.image": "???"}, f"spec.{section}.image", PATTERN)
        for section in IMAGE_SECTIONS
    ),
    # ---- ClusterPolicy: enums -------------------------------------------------------------
    bound("cp-default-runtime-enum", CP, {"spec.operator.defaultRuntime": "podman"},
          "spec.operator.defaultRuntime", ENUM),
    bound("cp-update-strategy-enum", CP, {"spec.daemonsets.updateStrategy": "Recreate"},
          "spec.daemonsets.updateStrategy", ENUM),
    bound("cp-kernel-module-type-enum", CP, {"spec.driver.kernelModuleType": "nouveau"},
          "spec.driver.kernelModuleType", ENUM),
    bound("cp-mig-strategy-enum", CP, {"spec.mig.strategy": "all"}, "spec.mig.strategy", ENUM),
    bound("cp-mig-manager-default-enum", CP,
          {"spec.migManager.config": {"default": "all-1g.5gb"}},
          "spec.migManager.config.default", ENUM),
    bound("cp-sandbox-default-workload-enum", CP,
          {"spec.sandboxWorkloads.defaultWorkload": "vm"},
          "spec.sandboxWorkloads.defaultWorkload", ENUM),
    bound("cp-sandbox-mode-enum", CP, {"spec.sandboxWorkloads.mode": "firecracker"},
          "spec.sandboxWorkloads.mode", ENUM),
    bound("cp-cc-default-mode-enum", CP, {"spec.ccManager.defaultMode": "maybe"},
          "spec.ccManager.defaultMode", ENUM),
    bound("cp-relabel-action-enum", CP,
          {"spec.dcgmExporter.serviceMonitor": {"relabelings": [{"action": "rename"}]}},
          "spec.dcgmExporter.serviceMonitor.relabelings[0].action", ENUM),
    # ---- ClusterPolicy: bounds and patterns -------------------------------------------------
    *(
        bound(f"cp-driver-startup-probe-{name.lower()}-zero", CP,
              {f"spec.driver.startupProbe.{name}": 0}, f"spec.driver.startupProbe.{name}", GE)
        for name in PROBE_BOUNDS
    ),
    bound("cp-driver-liveness-probe-period-zero", CP,
          {"spec.driver.livenessProbe.periodSeconds": 0},
          "spec.driver.livenessProbe.periodSeconds", GE),
    bound("cp-driver-readiness-probe-failure-zero", CP,
          {"spec.driver.readinessProbe.failureThreshold": 0},
          "spec.driver.readinessProbe.failureThreshold", GE),
    bound("cp-upgrade-max-parallel-negative", CP,
          {"spec.driver.upgradePolicy.maxParallelUpgrades": -1},
          "spec.driver.upgradePolicy.maxParallelUpgrades", GE),
    bound("cp-upgrade-pod-deletion-timeout-negative", CP,
          {"spec.driver.upgradePolicy.podDeletion.timeoutSeconds": -1},
          "spec.driver.upgradePolicy.podDeletion.timeoutSeconds", GE),
    bound("cp-upgrade-drain-timeout-negative", CP,
          {"spec.driver.upgradePolicy.drain.timeoutSeconds": -1},
          "spec.driver.upgradePolicy.drain.timeoutSeconds", GE),
    bound("cp-upgrade-wait-timeout-negative", CP,
          {"spec.driver.upgradePolicy.waitForCompletion.timeoutSeconds": -1},
          "spec.driver.upgradePolicy.waitForCompletion.timeoutSeconds", GE),
    bound("cp-dcgm-exporter-interval-pattern", CP,
          {"spec.dcgmExporter.serviceMonitor": {"interval": "15 seconds"}},
          "spec.dcgmExporter.serviceMonitor.interval", PATTERN),
    bound("cp-operator-scrape-timeout-pattern", CP,
          {"spec.operator.metrics": {"serviceMonitor": {"scrapeTimeout": "1min"}}},
          "spec.operator.metrics.serviceMonitor.scrapeTimeout", PATTERN),
    bound("cp-relabel-source-label-pattern", CP,
          {"spec.dcgmExporter.serviceMonitor": {"relabelings": [{"sourceLabels": ["a-b"]}]}},
          "spec.dcgmExporter.serviceMonitor.relabelings[0].sourceLabels[0]", PATTERN),
    bound("cp-toolkit-resources-quantity-pattern", CP,
          {"spec.toolkit.resources": {"limits": {"memory": "lots"}}},
          "spec.toolkit.resources.limits.memory", PATTERN),
    bound("cp-env-name-missing", CP, {"spec.devicePlugin.env": [{"value": "x"}]},
          "spec.devicePlugin.env[0].name", REQUIRED),
    Case("cp-status-state-enum", CP, (("status", {"state": "broken"}),),
         "status.state", ENUM, status=True),
    # ---- NVIDIADriver ----------------------------------------------------------------------
    cel("nd-default-with-node-selector", ND,
        {"spec.default": True, "spec.nodeSelector": {"pool": "a"}},
        "spec", DEFAULT_DRIVER_SELECTOR),
    bound("nd-driver-type-enum", ND, {"spec.driverType": "cuda"}, "spec.driverType", ENUM),
    bound("nd-kernel-module-type-enum", ND, {"spec.kernelModuleType": "closed"},
          "spec.kernelModuleType", ENUM),
    bound("nd-manager-image-pattern", ND, {"spec.manager.image": "???"},
          "spec.manager.image", PATTERN),
    bound("nd-gds-image-pattern", ND, {"spec.gds": {"image": "???"}}, "spec.gds.image", PATTERN),
    bound("nd-gdrcopy-image-pattern", ND, {"spec.gdrcopy": {"image": "???"}},
          "spec.gdrcopy.image", PATTERN),
    bound("nd-upgrade-max-parallel-negative", ND,
          {"spec.upgradePolicy": {"maxParallelUpgrades": -1}},
          "spec.upgradePolicy.maxParallelUpgrades", GE),
    bound("nd-startup-probe-timeout-zero", ND, {"spec.startupProbe": {"timeoutSeconds": 0}},
          "spec.startupProbe.timeoutSeconds", GE),
    bound("nd-node-affinity-terms-missing", ND,
          {"spec.nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
          "spec.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
          REQUIRED),
    Case("nd-status-state-enum", ND, (("status", {"state": "failed"}),),
         "status.state", ENUM, status=True),
)
