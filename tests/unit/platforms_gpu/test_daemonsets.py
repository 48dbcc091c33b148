"""Each state's objects and DaemonSet identity, with NVIDIA's names and values (table-driven)."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers import ctr, daemonset, env, names, objects, states

SANDBOX: dict[str, Any] = {"sandboxWorkloads": {"enabled": True}}
KATA_CC: dict[str, Any] = {
    "sandboxWorkloads": {"enabled": True, "mode": "kata"},
    "ccManager": {"enabled": True},
}
VGPU: dict[str, Any] = {
    "sandboxWorkloads": {"enabled": True},
    "vgpuManager": {
        "enabled": True,
        "repository": "registry.example.com",
        "image": "vgpu-manager",
        "version": "595.91.07",
    },
}
ALL_CONTAINER: dict[str, Any] = {"dcgm": {"enabled": True}, "nodeStatusExporter": {"enabled": True}}


# state, spec, expected objects as kind/name in apply order
INVENTORY = [
    (
        "pre-requisites",
        {},
        ["RuntimeClass/nvidia", "RuntimeClass/nvidia-legacy", "RuntimeClass/nvidia-cdi"],
    ),
    ("pre-requisites", {"cdi": {"enabled": False}}, ["RuntimeClass/nvidia"]),
    (
        "pre-requisites",
        {"operator": {"runtimeClass": "gpu"}, "cdi": {"enabled": False}},
        ["RuntimeClass/gpu"],
    ),
    ("state-operator-metrics", {}, ["Service/gpu-operator"]),
    (
        "state-driver",
        {},
        [
            "ServiceAccount/nvidia-driver",
            "Role/nvidia-driver",
            "ClusterRole/nvidia-driver",
            "RoleBinding/nvidia-driver",
            "ClusterRoleBinding/nvidia-driver",
            "ConfigMap/nvidia-driver-startup-probe",
            "DaemonSet/nvidia-driver-daemonset",
        ],
    ),
    (
        "state-container-toolkit",
        {},
        [
            "ServiceAccount/nvidia-container-toolkit",
            "Role/nvidia-container-toolkit",
            "RoleBinding/nvidia-container-toolkit",
            "ConfigMap/nvidia-container-toolkit-entrypoint",
            "DaemonSet/nvidia-container-toolkit-daemonset",
        ],
    ),
    (
        "state-dcgm",
        ALL_CONTAINER,
        [
            "ServiceAccount/nvidia-dcgm",
            "Role/nvidia-dcgm",
            "RoleBinding/nvidia-dcgm",
            "DaemonSet/nvidia-dcgm",
            "Service/nvidia-dcgm",
        ],
    ),
    (
        "state-dcgm-exporter",
        {},
        [
            "ServiceAccount/nvidia-dcgm-exporter",
            "Role/nvidia-dcgm-exporter",
            "RoleBinding/nvidia-dcgm-exporter",
            "Service/nvidia-dcgm-exporter",
            "DaemonSet/nvidia-dcgm-exporter",
        ],
    ),
    (
        "state-dcgm-exporter",
        {"dcgmExporter": {"enablePodUID": True}},
        [
            "ServiceAccount/nvidia-dcgm-exporter",
            "Role/nvidia-dcgm-exporter",
            "ClusterRole/nvidia-dcgm-exporter-read-pods",
            "RoleBinding/nvidia-dcgm-exporter",
            "ClusterRoleBinding/nvidia-dcgm-exporter-read-pods",
            "Service/nvidia-dcgm-exporter",
            "DaemonSet/nvidia-dcgm-exporter",
        ],
    ),
    (
        "state-mig-manager",
        {},
        [
            "ServiceAccount/nvidia-mig-manager",
            "Role/nvidia-mig-manager",
            "ClusterRole/nvidia-mig-manager",
            "RoleBinding/nvidia-mig-manager",
            "ClusterRoleBinding/nvidia-mig-manager",
            "ConfigMap/default-mig-parted-config",
            "ConfigMap/default-gpu-clients",
            "ConfigMap/nvidia-mig-manager-entrypoint",
            "DaemonSet/nvidia-mig-manager",
        ],
    ),
    (
        "state-mig-manager",
        {"migManager": {"config": {"name": "my-mig"}, "gpuClientsConfig": {"name": "my-clients"}}},
        [
            "ServiceAccount/nvidia-mig-manager",
            "Role/nvidia-mig-manager",
            "ClusterRole/nvidia-mig-manager",
            "RoleBinding/nvidia-mig-manager",
            "ClusterRoleBinding/nvidia-mig-manager",
            "ConfigMap/nvidia-mig-manager-entrypoint",
            "DaemonSet/nvidia-mig-manager",
        ],
    ),
    (
        "state-node-status-exporter",
        ALL_CONTAINER,
        [
            "ServiceAccount/nvidia-node-status-exporter",
            "Role/nvidia-node-status-exporter",
            "ClusterRole/nvidia-node-status-exporter",
            "RoleBinding/nvidia-node-status-exporter",
            "ClusterRoleBinding/nvidia-node-status-exporter",
            "Service/nvidia-node-status-exporter",
            "DaemonSet/nvidia-node-status-exporter",
        ],
    ),
    (
        "state-vgpu-device-manager",
        SANDBOX,
        [
            "ServiceAccount/nvidia-vgpu-device-manager",
            "Role/nvidia-vgpu-device-manager",
            "ClusterRole/nvidia-vgpu-device-manager",
            "RoleBinding/nvidia-vgpu-device-manager",
            "ClusterRoleBinding/nvidia-vgpu-device-manager",
            "ConfigMap/default-vgpu-devices-config",
            "DaemonSet/nvidia-vgpu-device-manager",
        ],
    ),
]


@pytest.mark.parametrize(("state", "spec", "expected"), INVENTORY)
def test_object_inventory(state: str, spec: dict[str, Any], expected: list[str]) -> None:
    rendered = states(spec)[state]
    assert [f"{o['kind']}/{o['metadata']['name']}" for o in rendered.objects] == expected


# DaemonSet, spec, nodeSelector, serviceAccount, selector, hostPID, init containers, containers
IDENTITY = [
    (
        "nvidia-driver-daemonset",
        {},
        {"nvidia.com/gpu.deploy.driver": "true"},
        "nvidia-driver",
        {"app": "nvidia-driver-daemonset"},
        True,
        ["k8s-driver-manager"],
        ["nvidia-driver-ctr"],
    ),
    (
        "nvidia-container-toolkit-daemonset",
        {},
        {"nvidia.com/gpu.deploy.container-toolkit": "true"},
        "nvidia-container-toolkit",
        {"app": "nvidia-container-toolkit-daemonset"},
        True,
        ["driver-validation"],
        ["nvidia-container-toolkit-ctr"],
    ),
    (
        "nvidia-operator-validator",
        {},
        {"nvidia.com/gpu.deploy.operator-validator": "true"},
        "nvidia-operator-validator",
        {"app": "nvidia-operator-validator", "app.kubernetes.io/part-of": "gpu-operator"},
        False,
        ["driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"],
        ["nvidia-operator-validator"],
    ),
    (
        "nvidia-device-plugin-daemonset",
        {},
        {"nvidia.com/gpu.deploy.device-plugin": "true"},
        "nvidia-device-plugin",
        {"app": "nvidia-device-plugin-daemonset"},
        False,
        ["toolkit-validation"],
        ["nvidia-device-plugin"],
    ),
    (
        "nvidia-device-plugin-mps-control-daemon",
        {},
        {"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/mps.capable": "true"},
        "nvidia-device-plugin",
        {"app": "nvidia-device-plugin-mps-control-daemon"},
        True,
        ["toolkit-validation", "mps-control-daemon-mounts"],
        ["mps-control-daemon-ctr"],
    ),
    (
        "nvidia-dcgm",
        ALL_CONTAINER,
        {"nvidia.com/gpu.deploy.dcgm": "true"},
        "nvidia-dcgm",
        {"app": "nvidia-dcgm"},
        False,
        ["toolkit-validation"],
        ["nvidia-dcgm-ctr"],
    ),
    (
        "nvidia-dcgm-exporter",
        {},
        {"nvidia.com/gpu.deploy.dcgm-exporter": "true"},
        "nvidia-dcgm-exporter",
        {"app": "nvidia-dcgm-exporter"},
        False,
        ["toolkit-validation"],
        ["nvidia-dcgm-exporter"],
    ),
    (
        "gpu-feature-discovery",
        {},
        {"nvidia.com/gpu.deploy.gpu-feature-discovery": "true"},
        "nvidia-gpu-feature-discovery",
        {"app": "gpu-feature-discovery", "app.kubernetes.io/part-of": "nvidia-gpu"},
        False,
        ["toolkit-validation"],
        ["gpu-feature-discovery"],
    ),
    (
        "nvidia-mig-manager",
        {},
        {"nvidia.com/gpu.deploy.mig-manager": "true"},
        "nvidia-mig-manager",
        {"app": "nvidia-mig-manager"},
        True,
        ["toolkit-validation"],
        ["nvidia-mig-manager"],
    ),
    (
        "nvidia-node-status-exporter",
        ALL_CONTAINER,
        {"nvidia.com/gpu.deploy.node-status-exporter": "true"},
        "nvidia-node-status-exporter",
        {"app": "nvidia-node-status-exporter"},
        False,
        [],
        ["nvidia-node-status-exporter"],
    ),
    (
        "nvidia-vgpu-manager-daemonset",
        VGPU,
        {"nvidia.com/gpu.deploy.vgpu-manager": "true"},
        "nvidia-vgpu-manager",
        {"app": "nvidia-vgpu-manager-daemonset"},
        True,
        ["k8s-driver-manager"],
        ["nvidia-vgpu-manager-ctr"],
    ),
    (
        "nvidia-vgpu-device-manager",
        SANDBOX,
        {"nvidia.com/gpu.deploy.vgpu-device-manager": "true"},
        "nvidia-vgpu-device-manager",
        {"app": "nvidia-vgpu-device-manager"},
        False,
        ["vgpu-manager-validation"],
        ["nvidia-vgpu-device-manager"],
    ),
    (
        "nvidia-sandbox-validator",
        SANDBOX,
        {"nvidia.com/gpu.deploy.sandbox-validator": "true"},
        "nvidia-sandbox-validator",
        {"app": "nvidia-sandbox-validator", "app.kubernetes.io/part-of": "gpu-operator"},
        False,
        ["vfio-pci-validation", "vgpu-manager-validation", "vgpu-devices-validation"],
        ["nvidia-sandbox-validator"],
    ),
    (
        "nvidia-vfio-manager",
        SANDBOX,
        {"nvidia.com/gpu.deploy.vfio-manager": "true"},
        "nvidia-vfio-manager",
        {"name": "nvidia-vfio-manager"},
        False,
        ["k8s-driver-manager"],
        ["nvidia-vfio-manager"],
    ),
    (
        "nvidia-sandbox-device-plugin-daemonset",
        SANDBOX,
        {"nvidia.com/gpu.deploy.sandbox-device-plugin": "true"},
        "nvidia-sandbox-device-plugin",
        {"app": "nvidia-sandbox-device-plugin-daemonset"},
        False,
        ["vfio-pci-validation", "vgpu-devices-validation"],
        ["nvidia-sandbox-device-plugin-ctr"],
    ),
    (
        "nvidia-kata-sandbox-device-plugin-daemonset",
        KATA_CC,
        {"nvidia.com/gpu.deploy.kata-sandbox-device-plugin": "true"},
        "nvidia-kata-sandbox-device-plugin",
        {"app": "nvidia-kata-sandbox-device-plugin-daemonset"},
        False,
        ["vfio-pci-validation"],
        ["nvidia-kata-sandbox-device-plugin-ctr"],
    ),
    (
        "nvidia-cc-manager",
        KATA_CC,
        {"nvidia.com/gpu.deploy.cc-manager": "true"},
        "nvidia-cc-manager",
        {"name": "nvidia-cc-manager"},
        False,
        [],
        ["nvidia-cc-manager"],
    ),
]


@pytest.mark.parametrize(
    ("name", "spec", "node_selector", "sa", "selector", "host_pid", "inits", "mains"), IDENTITY
)
def test_daemonset_identity(
    name: str,
    spec: dict[str, Any],
    node_selector: dict[str, str],
    sa: str,
    selector: dict[str, str],
    host_pid: bool,
    inits: list[str],
    mains: list[str],
) -> None:
    ds = daemonset(name, spec)
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == node_selector
    assert pod["serviceAccountName"] == sa
    assert ds["spec"]["selector"]["matchLabels"] == selector
    assert selector.items() <= ds["spec"]["template"]["metadata"]["labels"].items()
    assert bool(pod.get("hostPID")) is host_pid
    assert names(pod.get("initContainers", [])) == inits
    assert names(pod["containers"]) == mains
    # The sample's daemonsets settings: NVIDIA's baseline toleration and priority class.
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert pod["priorityClassName"] == "system-node-critical"


def test_every_daemonset_of_the_sample_is_listed() -> None:
    rendered = {o["metadata"]["name"] for o in objects(ALL_CONTAINER) if o["kind"] == "DaemonSet"}
    assert rendered == {row[0] for row in IDENTITY if row[1] in ({}, ALL_CONTAINER)}


def test_driver_daemonset_is_on_delete_with_one_pod_per_node() -> None:
    ds = daemonset("nvidia-driver-daemonset")
    assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}
    labels = ds["metadata"]["labels"]
    assert labels["nvidia.com/precompiled"] == "false"
    assert labels["app.kubernetes.io/component"] == "nvidia-driver"
    term = ds["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ][0]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchExpressions"] == [
        {"key": "app.kubernetes.io/component", "operator": "In", "values": ["nvidia-driver"]}
    ]
    probe = ctr(ds, "nvidia-driver-ctr")["startupProbe"]
    assert probe["exec"]["command"] == ["sh", "/usr/local/bin/startup-probe.sh"]
    assert (probe["initialDelaySeconds"], probe["periodSeconds"], probe["timeoutSeconds"]) == (
        60,
        10,
        60,
    )
    assert probe["failureThreshold"] == 120


def test_validator_inits_use_the_validator_image_as_root() -> None:
    ds = daemonset("nvidia-operator-validator")
    for name in ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"):
        c = ctr(ds, name)
        assert c["image"] == "nvcr.io/nvidia/gpu-operator:v26.7.0", name
        assert c["securityContext"]["runAsUser"] == 0, name
    cuda = env(ctr(ds, "cuda-validation"))
    assert cuda["VALIDATOR_IMAGE"] == "nvcr.io/nvidia/gpu-operator:v26.7.0"
    assert cuda["VALIDATOR_RUNTIME_CLASS"] == "nvidia"
    assert env(ctr(ds, "plugin-validation"))["MIG_STRATEGY"] == "single"
    assert ds["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"


@pytest.mark.parametrize(
    ("container", "order"),
    [
        ("driver-validation", ["WITH_WAIT", "COMPONENT", "OPERATOR_NAMESPACE"]),
        ("toolkit-validation", ["NVIDIA_VISIBLE_DEVICES", "WITH_WAIT", "COMPONENT"]),
        (
            "cuda-validation",
            ["WITH_WAIT", "COMPONENT", "NODE_NAME", "OPERATOR_NAMESPACE", "VALIDATOR_IMAGE",
             "VALIDATOR_IMAGE_PULL_POLICY", "VALIDATOR_RUNTIME_CLASS"],
        ),
        (
            "plugin-validation",
            ["COMPONENT", "WITH_WAIT", "WITH_WORKLOAD", "MIG_STRATEGY", "NODE_NAME",
             "OPERATOR_NAMESPACE", "VALIDATOR_IMAGE", "VALIDATOR_IMAGE_PULL_POLICY",
             "VALIDATOR_RUNTIME_CLASS"],
        ),
    ],
)  # fmt: skip
def test_validator_init_env_is_in_nvidias_order(container: str, order: list[str]) -> None:
    """NVIDIA's asset order, then what TransformValidatorComponent appends: another order is
    another pod template, which restarts every validator pod when nimctl takes over."""
    ds = daemonset("nvidia-operator-validator")
    assert [e["name"] for e in ctr(ds, container)["env"]] == order


def test_validator_fills_mig_strategy_in_place_even_when_unset() -> None:
    ds = daemonset("nvidia-operator-validator", {"mig": {"strategy": None}})
    plugin = ctr(ds, "plugin-validation")["env"]
    assert plugin[3] == {"name": "MIG_STRATEGY", "value": ""}


def test_validator_skips_the_plugin_check_without_a_device_plugin() -> None:
    ds = daemonset("nvidia-operator-validator", {"devicePlugin": {"enabled": False}})
    assert "plugin-validation" not in names(ds["spec"]["template"]["spec"]["initContainers"])


def test_sandbox_validator_drops_cc_check_without_cc_manager() -> None:
    assert "cc-manager-validation" in names(
        daemonset("nvidia-sandbox-validator", KATA_CC)["spec"]["template"]["spec"]["initContainers"]
    )
    ds = daemonset(
        "nvidia-sandbox-validator",
        {"sandboxWorkloads": {"enabled": True, "defaultWorkload": "vm-vgpu"}},
    )
    assert env(ctr(ds, "vfio-pci-validation"))["DEFAULT_GPU_WORKLOAD_CONFIG"] == "vm-vgpu"


def test_dcgm_service_is_node_local() -> None:
    svc = next(
        o
        for o in objects(ALL_CONTAINER)
        if o["kind"] == "Service" and o["metadata"]["name"] == "nvidia-dcgm"
    )
    assert svc["spec"]["internalTrafficPolicy"] == "Local"
    assert svc["spec"]["ports"] == [
        {"name": "dcgm", "port": 5555, "targetPort": 5555, "protocol": "TCP"}
    ]
