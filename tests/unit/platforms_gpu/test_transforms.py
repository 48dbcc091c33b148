"""The common DaemonSet transforms and each operand's own, with NVIDIA's values."""

from __future__ import annotations

from typing import Any

import pytest

from platforms.gpu.facts import SERVICE_MONITOR

from .helpers import ctr, daemonset, env, facts, names, node, objects, volume

DAEMONSETS = [
    "nvidia-driver-daemonset",
    "nvidia-container-toolkit-daemonset",
    "nvidia-operator-validator",
    "nvidia-device-plugin-daemonset",
    "nvidia-device-plugin-mps-control-daemon",
    "nvidia-dcgm-exporter",
    "gpu-feature-discovery",
    "nvidia-mig-manager",
]


def pod(ds: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = ds["spec"]["template"]["spec"]
    return spec


# --- spec.daemonsets ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "strategy", "driver_strategy"),
    [
        ({"updateStrategy": "OnDelete"}, {"type": "OnDelete"}, {"type": "OnDelete"}),
        (
            {"rollingUpdate": {"maxUnavailable": "1"}},
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
            {"type": "OnDelete"},
        ),
        (
            {"rollingUpdate": {"maxUnavailable": "20%"}},
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "20%"}},
            {"type": "OnDelete"},
        ),
        ({"rollingUpdate": None}, None, {"type": "OnDelete"}),
    ],
)
def test_update_strategy(
    settings: dict[str, Any], strategy: dict[str, Any] | None, driver_strategy: dict[str, Any]
) -> None:
    spec = {"daemonsets": settings}
    assert (
        daemonset("nvidia-device-plugin-daemonset", spec)["spec"].get("updateStrategy") == strategy
    )
    assert daemonset("nvidia-driver-daemonset", spec)["spec"]["updateStrategy"] == driver_strategy


def test_tolerations_priority_and_pod_security_context_replace_the_baseline() -> None:
    tolerations = [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoExecute"}]
    spec = {
        "daemonsets": {
            "tolerations": tolerations,
            "priorityClassName": "gpu-critical",
            "podSecurityContext": {"runAsNonRoot": False},
        }
    }
    for name in DAEMONSETS:
        p = pod(daemonset(name, spec))
        assert p["tolerations"] == tolerations, name
        assert p["priorityClassName"] == "gpu-critical", name
        assert p["securityContext"] == {"runAsNonRoot": False}, name


def test_daemonset_labels_and_annotations() -> None:
    spec = {
        "daemonsets": {
            "labels": {"team": "ml", "app": "x", "app.kubernetes.io/part-of": "y"},
            "annotations": {"a": "b"},
        }
    }
    ds = daemonset("nvidia-operator-validator", spec)
    assert ds["metadata"]["labels"]["team"] == "ml"
    assert ds["metadata"]["annotations"]["a"] == "b"
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    # The pod keeps its own app and part-of (its selector must still match).
    assert pod_labels["app"] == "nvidia-operator-validator"
    assert pod_labels["app.kubernetes.io/part-of"] == "gpu-operator"
    assert pod_labels["team"] == "ml"
    assert ds["spec"]["template"]["metadata"]["annotations"]["a"] == "b"


def test_our_managed_by_label_wins_over_the_samples_on_the_daemonset_only() -> None:
    # NVIDIA's sample sets app.kubernetes.io/managed-by: gpu-operator in daemonsets.labels;
    # the operator's cache selects DaemonSets on its own value; operand pods keep the
    # sample's, so they stay out of the NIM controllers' filtered Pod cache.
    ds = daemonset("nvidia-device-plugin-daemonset")
    assert ds["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-nim-operator"
    pod_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert pod_labels["app.kubernetes.io/managed-by"] == "gpu-operator"
    for labels in (ds["metadata"]["labels"], pod_labels):
        assert labels["helm.sh/chart"] == "gpu-operator-v26.7.0"


# --- hostPaths ---------------------------------------------------------------------------


def test_root_fs_moves_host_root_and_dev_char() -> None:
    ds = daemonset("nvidia-container-toolkit-daemonset", {"hostPaths": {"rootFS": "/host-fs"}})
    assert volume(ds, "host-root")["hostPath"]["path"] == "/host-fs"
    assert volume(ds, "host-dev-char")["hostPath"]["path"] == "/host-fs/dev/char"
    for name in ("driver-validation", "nvidia-container-toolkit-ctr"):
        assert env(ctr(ds, name))["HOST_ROOT"] == "/host-fs"


def test_driver_install_dir_moves_the_volume_and_the_validation_mount() -> None:
    ds = daemonset("nvidia-operator-validator", {"hostPaths": {"driverInstallDir": "/opt/nvidia"}})
    assert volume(ds, "driver-install-dir")["hostPath"]["path"] == "/opt/nvidia"
    validation = ctr(ds, "driver-validation")
    assert env(validation)["DRIVER_INSTALL_DIR"] == "/opt/nvidia"
    assert env(validation)["DRIVER_INSTALL_DIR_CTR_PATH"] == "/opt/nvidia"
    mount = next(m for m in validation["volumeMounts"] if m["name"] == "driver-install-dir")
    assert mount["mountPath"] == "/opt/nvidia"


def test_default_host_paths_change_nothing() -> None:
    ds = daemonset("nvidia-operator-validator")
    assert volume(ds, "host-root")["hostPath"]["path"] == "/"
    assert "HOST_ROOT" not in env(ctr(ds, "driver-validation"))


# --- runtime class, NRI, MIG ---------------------------------------------------------------

GPU_PODS = [
    ("nvidia-device-plugin-daemonset", "nvidia-device-plugin"),
    ("nvidia-device-plugin-mps-control-daemon", "mps-control-daemon-ctr"),
    ("nvidia-operator-validator", "toolkit-validation"),
    ("gpu-feature-discovery", "gpu-feature-discovery"),
    ("nvidia-mig-manager", "nvidia-mig-manager"),
    ("nvidia-dcgm-exporter", "nvidia-dcgm-exporter"),
]


@pytest.mark.parametrize(("name", "container"), GPU_PODS)
def test_runtime_class_or_nri_annotation(name: str, container: str) -> None:
    assert pod(daemonset(name))["runtimeClassName"] == "nvidia"
    assert pod(daemonset(name, {"operator": {"runtimeClass": "nv"}}))["runtimeClassName"] == "nv"
    crio = facts(node(runtime="cri-o://1.30.0"))
    assert "runtimeClassName" not in pod(daemonset(name, {"cdi": {"enabled": False}}, crio))
    nri = daemonset(name, {"cdi": {"nriPluginEnabled": True}})
    assert "runtimeClassName" not in pod(nri)
    annotations = nri["spec"]["template"]["metadata"]["annotations"]
    assert (
        annotations[f"nvidia.cdi.k8s.io/container.{container}"] == "management.nvidia.com/gpu=all"
    )


def test_toolkit_and_driver_get_no_runtime_class() -> None:
    for name in ("nvidia-container-toolkit-daemonset", "nvidia-driver-daemonset"):
        assert "runtimeClassName" not in pod(daemonset(name))


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        (None, {"NVIDIA_MIG_MONITOR_DEVICES": "all"}),
        ("single", {"MIG_STRATEGY": "single", "NVIDIA_MIG_MONITOR_DEVICES": "all"}),
        ("mixed", {"MIG_STRATEGY": "mixed", "NVIDIA_MIG_MONITOR_DEVICES": "all"}),
        ("none", {"MIG_STRATEGY": "none"}),
    ],
)
@pytest.mark.parametrize(
    ("name", "container"),
    [
        ("nvidia-device-plugin-daemonset", "nvidia-device-plugin"),
        ("gpu-feature-discovery", "gpu-feature-discovery"),
        ("nvidia-device-plugin-mps-control-daemon", "mps-control-daemon-ctr"),
    ],
)
def test_mig_env(strategy: str | None, expected: dict[str, str], name: str, container: str) -> None:
    got = env(ctr(daemonset(name, {"mig": {"strategy": strategy}}), container))
    assert {
        k: got[k] for k in ("MIG_STRATEGY", "NVIDIA_MIG_MONITOR_DEVICES") if k in got
    } == expected


# --- per-component settings --------------------------------------------------------------


def test_component_settings_reach_the_main_container() -> None:
    spec = {
        "gfd": {
            "imagePullPolicy": "Always",
            "imagePullSecrets": ["ngc", "ngc"],
            "resources": {"limits": {"memory": "64Mi"}},
            "args": ["--oneshot"],
            "env": [
                {"name": "GFD_SLEEP_INTERVAL", "value": "30s"},
                {"name": "EXTRA", "value": "1"},
            ],
            "hostNetwork": True,
        }
    }
    ds = daemonset("gpu-feature-discovery", spec)
    c = ctr(ds, "gpu-feature-discovery")
    assert c["imagePullPolicy"] == "Always"
    assert pod(ds)["imagePullSecrets"] == [{"name": "ngc"}]
    assert c["resources"] == {"limits": {"memory": "64Mi"}}
    assert c["args"] == ["--oneshot"]
    values = env(c)
    assert values["GFD_SLEEP_INTERVAL"] == "30s"
    assert values["EXTRA"] == "1"
    assert (pod(ds)["hostNetwork"], pod(ds)["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")


def test_device_plugin_cdi_env_and_user_env_last() -> None:
    c = ctr(daemonset("nvidia-device-plugin-daemonset"), "nvidia-device-plugin")
    values = env(c)
    assert values["CDI_ENABLED"] == "true"
    assert values["CDI_ANNOTATION_PREFIX"] == "cdi.k8s.io/"
    assert values["NVIDIA_CDI_HOOK_PATH"] == "/usr/local/nvidia/toolkit/nvidia-cdi-hook"
    # The sample's devicePlugin.env sets DEVICE_LIST_STRATEGY=envvar and wins over CDI's.
    assert values["DEVICE_LIST_STRATEGY"] == "envvar"
    off = env(
        ctr(
            daemonset(
                "nvidia-device-plugin-daemonset",
                {"cdi": {"enabled": False}, "devicePlugin": {"env": []}},
            ),
            "nvidia-device-plugin",
        )
    )
    assert "CDI_ENABLED" not in off
    assert off["DEVICE_LIST_STRATEGY"] == "envvar"
    with_cdi = env(
        ctr(
            daemonset("nvidia-device-plugin-daemonset", {"devicePlugin": {"env": []}}),
            "nvidia-device-plugin",
        )
    )
    assert with_cdi["DEVICE_LIST_STRATEGY"] == "cdi-annotations,cdi-cri"


def test_device_plugin_config_manager() -> None:
    assert names(pod(daemonset("nvidia-device-plugin-daemonset"))["containers"]) == [
        "nvidia-device-plugin"
    ]
    spec = {"devicePlugin": {"config": {"name": "time-slicing", "default": "any"}}}
    for name, main, process in (
        ("nvidia-device-plugin-daemonset", "nvidia-device-plugin", "nvidia-device-plugin"),
        ("gpu-feature-discovery", "gpu-feature-discovery", "gpu-feature-discovery"),
        (
            "nvidia-device-plugin-mps-control-daemon",
            "mps-control-daemon-ctr",
            "/usr/bin/mps-control-daemon",
        ),
    ):
        ds = daemonset(name, spec)
        p = pod(ds)
        assert "config-manager-init" in names(p["initContainers"]), name
        assert names(p["containers"])[-1] == "config-manager", name
        assert env(ctr(ds, main))["CONFIG_FILE"] == "/config/config.yaml"
        sidecar = env(ctr(ds, "config-manager"))
        assert (sidecar["DEFAULT_CONFIG"], sidecar["PROCESS_TO_SIGNAL"]) == ("any", process)
        assert ctr(ds, "config-manager")["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
        assert volume(ds, "time-slicing")["configMap"]["name"] == "time-slicing"
        assert p.get("shareProcessNamespace") is (None if p.get("hostPID") else True)


def test_custom_mps_root() -> None:
    ds = daemonset(
        "nvidia-device-plugin-daemonset", {"devicePlugin": {"mps": {"root": "/var/mps"}}}
    )
    assert volume(ds, "mps-root")["hostPath"]["path"] == "/var/mps"
    assert volume(ds, "mps-shm")["hostPath"]["path"] == "/var/mps/shm"
    assert env(ctr(ds, "nvidia-device-plugin"))["MPS_ROOT"] == "/var/mps"


# --- toolkit ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runtime", "expected", "volumes"),
    [
        (
            "containerd://1.7.20",
            {
                "RUNTIME": "containerd",
                "CONTAINERD_RUNTIME_CLASS": "nvidia",
                "RUNTIME_CONFIG": "/runtime/config-dir/config.toml",
                "CONTAINERD_CONFIG": "/runtime/config-dir/config.toml",
                "RUNTIME_DROP_IN_CONFIG": "/runtime/config-dir.d/99-nvidia.toml",
                "RUNTIME_DROP_IN_CONFIG_HOST_PATH": "/etc/containerd/conf.d/99-nvidia.toml",
                "RUNTIME_SOCKET": "/runtime/sock-dir/containerd.sock",
                "CONTAINERD_SOCKET": "/runtime/sock-dir/containerd.sock",
            },
            {
                "containerd-config": "/etc/containerd",
                "containerd-drop-in-config": "/etc/containerd/conf.d",
                "containerd-socket": "/run/containerd",
            },
        ),
        (
            "cri-o://1.30.0",
            {
                "RUNTIME": "crio",
                "RUNTIME_CONFIG": "/runtime/config-dir/config.toml",
                "CRIO_CONFIG": "/runtime/config-dir/config.toml",
                "RUNTIME_DROP_IN_CONFIG": "/runtime/config-dir.d/99-nvidia.conf",
                "RUNTIME_DROP_IN_CONFIG_HOST_PATH": "/etc/crio/crio.conf.d/99-nvidia.conf",
            },
            {"crio-config": "/etc/crio", "crio-drop-in-config": "/etc/crio/crio.conf.d"},
        ),
        (
            "docker://24.0.7",
            {
                "RUNTIME": "docker",
                "RUNTIME_CONFIG": "/runtime/config-dir/daemon.json",
                "DOCKER_CONFIG": "/runtime/config-dir/daemon.json",
                "RUNTIME_SOCKET": "/runtime/sock-dir/docker.sock",
                "DOCKER_SOCKET": "/runtime/sock-dir/docker.sock",
            },
            {"docker-config": "/etc/docker", "docker-socket": "/var/run"},
        ),
    ],
)
def test_toolkit_runtime_config(
    runtime: str, expected: dict[str, str], volumes: dict[str, str]
) -> None:
    ds = daemonset("nvidia-container-toolkit-daemonset", cluster=facts(node(runtime=runtime)))
    values = env(ctr(ds, "nvidia-container-toolkit-ctr"))
    assert {k: values.get(k) for k in expected} == expected
    for name, path in volumes.items():
        assert volume(ds, name)["hostPath"]["path"] == path
    assert values["CDI_ENABLED"] == "true"
    assert values["NVIDIA_CONTAINER_RUNTIME_MODE"] == "cdi"


def test_containerd_wins_and_openshift_means_crio() -> None:
    mixed = facts(node("a", runtime="docker://24"), node("b", runtime="containerd://1.7"))
    assert mixed.container_runtime == "containerd"
    assert facts(node(runtime="docker://24")).container_runtime == "docker"
    assert facts(node(), openshift="4.16.3").container_runtime == "crio"


def test_toolkit_user_config_path_and_install_dir() -> None:
    spec = {
        "toolkit": {
            "installDir": "/opt/nvidia",
            "env": [
                {
                    "name": "CONTAINERD_CONFIG",
                    "value": "/var/lib/rancher/k3s/agent/etc/containerd/config.toml",
                }
            ],
        }
    }
    ds = daemonset("nvidia-container-toolkit-daemonset", spec)
    values = env(ctr(ds, "nvidia-container-toolkit-ctr"))
    assert values["ROOT"] == "/opt/nvidia"
    assert values["CONTAINERD_CONFIG"] == "/runtime/config-dir/config.toml"
    assert (
        volume(ds, "containerd-config")["hostPath"]["path"]
        == "/var/lib/rancher/k3s/agent/etc/containerd"
    )
    assert volume(ds, "toolkit-install-dir")["hostPath"]["path"] == "/opt/nvidia"


def test_toolkit_with_nri_uses_the_nri_socket_only() -> None:
    values = env(
        ctr(
            daemonset("nvidia-container-toolkit-daemonset", {"cdi": {"nriPluginEnabled": True}}),
            "nvidia-container-toolkit-ctr",
        )
    )
    assert values["ENABLE_NRI_PLUGIN"] == "true"
    assert values["NRI_SOCKET"] == "/runtime/nri-sock-dir/nri.sock"
    assert "CONTAINERD_RUNTIME_CLASS" not in values
    assert "RUNTIME_CONFIG" not in values


def test_toolkit_crio_without_cdi_uses_hooks() -> None:
    ds = daemonset(
        "nvidia-container-toolkit-daemonset",
        {"cdi": {"enabled": False}},
        facts(node(runtime="cri-o://1.30")),
    )
    assert env(ctr(ds, "nvidia-container-toolkit-ctr"))["CRIO_CONFIG_MODE"] == "hook"
    assert volume(ds, "crio-hooks")["hostPath"]["path"] == "/usr/share/containers/oci/hooks.d"


# --- DCGM exporter ---------------------------------------------------------------------------


def test_dcgm_exporter_remote_host_engine_only_with_dcgm() -> None:
    name, main = "nvidia-dcgm-exporter", "nvidia-dcgm-exporter"
    assert "DCGM_REMOTE_HOSTENGINE_INFO" not in env(ctr(daemonset(name), main))
    on = env(ctr(daemonset(name, {"dcgm": {"enabled": True}}), main))
    assert on["DCGM_REMOTE_HOSTENGINE_INFO"] == "nvidia-dcgm:5555"
    local = {
        "dcgmExporter": {
            "env": [{"name": "DCGM_REMOTE_HOSTENGINE_INFO", "value": "localhost:5555"}]
        }
    }
    assert pod(daemonset(name, local))["hostNetwork"] is True


def test_dcgm_exporter_pod_enrichment_and_metrics_config() -> None:
    spec = {
        "dcgmExporter": {
            "enablePodLabels": True,
            "config": {"name": "metrics"},
            "hpcJobMapping": {"enabled": True},
        }
    }
    ds = daemonset("nvidia-dcgm-exporter", spec)
    values = env(ctr(ds, "nvidia-dcgm-exporter"))
    assert values["DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"] == "true"
    assert values["DCGM_EXPORTER_COLLECTORS"] == "/etc/dcgm-exporter/dcgm-metrics.csv"
    assert values["DCGM_HPC_JOB_MAPPING_DIR"] == "/var/lib/dcgm-exporter/job-mapping"
    assert pod(ds)["automountServiceAccountToken"] is True
    assert pod(daemonset("nvidia-dcgm-exporter"))["automountServiceAccountToken"] is False


def test_dcgm_exporter_service_monitor_needs_the_flag_and_the_crd() -> None:
    on = {
        "dcgmExporter": {
            "serviceMonitor": {
                "enabled": True,
                "interval": "30s",
                "additionalLabels": {"release": "kps"},
            }
        }
    }

    def monitors(spec: dict[str, Any], crds: list[tuple[str, str]]) -> list[dict[str, Any]]:
        return [o for o in objects(spec, facts(crds=crds)) if o["kind"] == "ServiceMonitor"]

    assert [m["metadata"]["name"] for m in monitors(on, [SERVICE_MONITOR])] == [
        "gpu-operator",
        "nvidia-dcgm-exporter",
    ]
    assert [m["metadata"]["name"] for m in monitors({}, [SERVICE_MONITOR])] == ["gpu-operator"]
    assert monitors(on, []) == []
    exporter = monitors(on, [SERVICE_MONITOR])[1]
    assert exporter["spec"]["endpoints"][0] == {
        "port": "gpu-metrics",
        "path": "/metrics",
        "interval": "30s",
        "honorLabels": False,
    }
    assert exporter["metadata"]["labels"]["release"] == "kps"
    assert exporter["spec"]["jobLabel"] == "app"


# --- MIG manager -----------------------------------------------------------------------------


def test_mig_manager_default_and_custom_config() -> None:
    ds = daemonset("nvidia-mig-manager")
    assert volume(ds, "mig-parted-config")["configMap"] == {
        "name": "default-mig-parted-config",
        "items": [{"key": "config.yaml", "path": "config-default.yaml"}],
    }
    assert (
        env(ctr(ds, "nvidia-mig-manager"))["DEFAULT_CONFIG_FILE"]
        == "/mig-parted-config/config-default.yaml"
    )
    custom = daemonset("nvidia-mig-manager", {"migManager": {"config": {"name": "mine"}}})
    assert volume(custom, "mig-parted-config")["configMap"] == {"name": "mine"}
    assert env(ctr(custom, "nvidia-mig-manager"))["CONFIG_FILE"] == "/mig-parted-config/config.yaml"


def test_dcgm_exporter_pod_annotations_and_labels() -> None:
    spec = {
        "dcgmExporter": {
            "annotations": {"a": "1"},
            "podAnnotations": {"b": "2"},
            "podLabels": {"team": "ml", "app": "not-the-selector"},
        }
    }
    template = daemonset("nvidia-dcgm-exporter", spec)["spec"]["template"]["metadata"]
    assert {"a": "1", "b": "2"}.items() <= template["annotations"].items()
    assert template["labels"]["team"] == "ml"
    assert template["labels"]["app"] == "nvidia-dcgm-exporter"
