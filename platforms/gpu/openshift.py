"""OpenShift only: the SecurityContextConstraints that let each operand's
ServiceAccount run its privileged, host-mounting pods.

NVIDIA ships one SCC per operand (files with ``openshift`` in their name, loaded
only on OpenShift) and grants it to the operand's ServiceAccount. The
constraints here are our own: the operands are privileged by nature (kernel
modules, host paths, host PID/IPC), so the SCC allows exactly that and names
the one ServiceAccount that may use it.
"""

from __future__ import annotations

from typing import Any, Final

from manifests.meta import object_meta

API_VERSION: Final = "security.openshift.io/v1"
KIND: Final = "SecurityContextConstraints"
GVK: Final = (API_VERSION, KIND)

SCC_BY_STATE: Final[dict[str, str]] = {
    "state-driver": "nvidia-driver",
    "state-operator-validation": "nvidia-operator-validator",
    "state-dcgm": "nvidia-dcgm",
    "state-dcgm-exporter": "nvidia-dcgm-exporter",
    "gpu-feature-discovery": "nvidia-gpu-feature-discovery",
    "state-mig-manager": "nvidia-mig-manager",
    "state-node-status-exporter": "nvidia-node-status-exporter",
    "state-vgpu-manager": "nvidia-vgpu-manager",
    "state-vgpu-device-manager": "nvidia-vgpu-device-manager",
    "state-sandbox-validation": "nvidia-sandbox-validator",
    "state-vfio-manager": "nvidia-vfio-manager",
    "state-sandbox-device-plugin": "nvidia-sandbox-device-plugin",
    "state-kata-device-plugin": "nvidia-kata-sandbox-device-plugin",
    # NVIDIA's asset reuses the name nvidia-vfio-manager here, so the two states
    # overwrite each other's SCC; ours has its own.
    "state-cc-manager": "nvidia-cc-manager",
}
"""The SCC of each state; it is granted to the ServiceAccount of the same name."""

_RUN_AS_ANY: Final = {"type": "RunAsAny"}


def security_context_constraints(name: str, namespace: str) -> dict[str, Any]:
    """A privileged SCC usable by ServiceAccount ``namespace/name`` only."""
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": object_meta(name),
        "allowHostDirVolumePlugin": True,
        "allowHostIPC": True,
        "allowHostNetwork": True,
        "allowHostPID": True,
        "allowHostPorts": True,
        "allowPrivilegeEscalation": True,
        "allowPrivilegedContainer": True,
        "allowedCapabilities": ["*"],
        "readOnlyRootFilesystem": False,
        "runAsUser": dict(_RUN_AS_ANY),
        "seLinuxContext": dict(_RUN_AS_ANY),
        "fsGroup": dict(_RUN_AS_ANY),
        "supplementalGroups": dict(_RUN_AS_ANY),
        "seccompProfiles": ["*"],
        "volumes": ["*"],
        "users": [f"system:serviceaccount:{namespace}:{name}"],
        "groups": [],
    }


def with_scc(state: str, objects: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """``objects`` with the state's SCC placed before its first DaemonSet, as in
    NVIDIA's file order (unchanged for a state without one)."""
    name = SCC_BY_STATE.get(state)
    if name is None:
        return objects
    scc = security_context_constraints(name, namespace)
    at = next((i for i, o in enumerate(objects) if o.get("kind") == "DaemonSet"), len(objects))
    return [*objects[:at], scc, *objects[at:]]
