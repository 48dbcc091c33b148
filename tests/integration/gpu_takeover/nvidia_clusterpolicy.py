"""The operand DaemonSets NVIDIA's ClusterPolicy controller makes for the chart's default policy.

Written for this test from reading NVIDIA's GPU Operator, independently of
nimctl's renders (no ``platforms/gpu`` render is called; only the driver's
``DRIVER_CONFIG_DIGEST`` is computed with nimctl's implementation of NVIDIA's
digest function, which reproduces NVIDIA's values in all 16 render goldens, on
this builder's own driver pod spec): each DaemonSet is the
object in NVIDIA's ``assets/<state>/*daemonset.yaml`` after the transforms
``controllers/object_controls.go`` applies for the default ClusterPolicy
(``docs/examples/clusterpolicy-defaults.yaml``), in order:

1. ``applyCommonDaemonsetConfig``: ``updateStrategy`` RollingUpdate with
   ``maxUnavailable: 1`` (an int, from ``daemonsets.rollingUpdate``; the driver
   keeps its asset's ``OnDelete``),
   ``priorityClassName`` and ``tolerations`` from ``daemonsets``;
2. the operand's ``Transform*`` (below, per DaemonSet);
3. ``applyCommonDaemonsetMetadata``: ``daemonsets.labels`` on the pod template
   (never ``app`` / ``app.kubernetes.io/part-of``);
4. ``DaemonSet()``: the ClusterPolicy as controller owner, ``daemonsets.labels``
   on the DaemonSet, and its own ``nvidia.com/last-applied-hash``.

Field names and values are NVIDIA's (facts); the structure is ours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nimctl_runtime.meta import Obj
from platforms.gpu.nvidiadriver_digest import config_digest, from_pod_spec

HASH_ANNOTATION = "nvidia.com/last-applied-hash"
NVIDIAS_HASH = "2718281828"
"""Any decimal FNV-32: NVIDIA's ``utils.GetObjectHash`` of its Go object."""
VALIDATIONS = "/run/nvidia/validations"
TOOLKIT_WAIT = (
    f"until [ -f {VALIDATIONS}/toolkit-ready ]; do echo waiting for nvidia container stack "
    "to be setup; sleep 5; done"
)


def _image(spec: Mapping[str, Any]) -> str:
    return f"{spec['repository']}/{spec['image']}:{spec['version']}"


def _env(name: str, value: str) -> Obj:
    return {"name": name, "value": value}


def _field_env(name: str, path: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def set_env(env: list[Obj], name: str, value: str) -> None:
    """NVIDIA's ``setContainerEnv``: overwrite in place, else append."""
    for var in env:
        if var["name"] == name:
            var["value"] = value
            return
    env.append(_env(name, value))


def _host_path(name: str, path: str, kind: str | None = None) -> Obj:
    host: Obj = {"path": path}
    if kind:
        host["type"] = kind
    return {"name": name, "hostPath": host}


def _toolkit_validation(policy: Mapping[str, Any], mount: Obj) -> Obj:
    """``transformValidationInitContainer``: the validator image and pull policy, and
    ``transformValidatorSecurityContext`` adds ``runAsUser: 0`` to ``privileged``."""
    validator = policy["validator"]
    return {
        "name": "toolkit-validation",
        "image": _image(validator),
        "imagePullPolicy": validator["imagePullPolicy"],
        "command": ["sh", "-c"],
        "args": [TOOLKIT_WAIT],
        "securityContext": {"privileged": True, "runAsUser": 0},
        "volumeMounts": [mount],
    }


def _mig(env: list[Obj], strategy: str) -> None:
    """``applyMIGConfiguration``."""
    if not strategy:
        set_env(env, "NVIDIA_MIG_MONITOR_DEVICES", "all")
        return
    set_env(env, "MIG_STRATEGY", strategy)
    if strategy != "none":
        set_env(env, "NVIDIA_MIG_MONITOR_DEVICES", "all")


def _user_env(env: list[Obj], spec: Mapping[str, Any]) -> None:
    for var in spec.get("env") or []:
        set_env(env, var["name"], str(var.get("value", "")))


def device_plugin(policy: Mapping[str, Any]) -> tuple[str, Obj, Obj]:
    """(name, pod template labels, pod spec) of ``state-device-plugin``: the asset, then
    ``TransformDevicePlugin`` with no plugin config (the config-manager containers are
    removed), CDI on (``transformDevicePluginCtrForCDI``, then the spec's env, so the
    chart's ``DEVICE_LIST_STRATEGY=envvar`` wins) and MIG ``single``."""
    spec = policy["devicePlugin"]
    env = [
        _env("PASS_DEVICE_SPECS", "true"),
        _env("FAIL_ON_INIT_ERROR", "true"),
        _env("DEVICE_LIST_STRATEGY", "envvar"),
        _env("DEVICE_ID_STRATEGY", "uuid"),
        _env("NVIDIA_VISIBLE_DEVICES", "all"),
        _env("NVIDIA_DRIVER_CAPABILITIES", "all"),
        _env("MPS_ROOT", "/run/nvidia/mps"),
    ]
    _mig(env, policy["mig"]["strategy"])
    if policy["cdi"]["enabled"]:
        set_env(env, "CDI_ENABLED", "true")
        set_env(env, "DEVICE_LIST_STRATEGY", "cdi-annotations,cdi-cri")
        set_env(env, "CDI_ANNOTATION_PREFIX", "cdi.k8s.io/")
        if policy["toolkit"]["enabled"]:
            set_env(
                env,
                "NVIDIA_CDI_HOOK_PATH",
                f"{policy['toolkit']['installDir']}/toolkit/nvidia-cdi-hook",
            )
    _user_env(env, spec)
    pod = {
        "nodeSelector": {"nvidia.com/gpu.deploy.device-plugin": "true"},
        "priorityClassName": "system-node-critical",
        "serviceAccountName": "nvidia-device-plugin",
        "runtimeClassName": policy["operator"]["runtimeClass"],
        "initContainers": [
            _toolkit_validation(
                policy,
                {
                    "name": "run-nvidia-validations",
                    "mountPath": VALIDATIONS,
                    "mountPropagation": "HostToContainer",
                },
            )
        ],
        "containers": [
            {
                "name": "nvidia-device-plugin",
                "image": _image(spec),
                "imagePullPolicy": spec["imagePullPolicy"],
                "command": ["/bin/sh", "-c"],
                "args": ["/bin/entrypoint.sh"],
                "securityContext": {"privileged": True},
                "env": env,
                "volumeMounts": [
                    {
                        "name": "nvidia-device-plugin-entrypoint",
                        "readOnly": True,
                        "mountPath": "/bin/entrypoint.sh",
                        "subPath": "entrypoint.sh",
                    },
                    {"name": "device-plugin", "mountPath": "/var/lib/kubelet/device-plugins"},
                    {"name": "run-nvidia-validations", "mountPath": VALIDATIONS},
                    {
                        "name": "driver-install-dir",
                        "mountPath": "/driver-root",
                        "mountPropagation": "HostToContainer",
                    },
                    {
                        "name": "host-root",
                        "mountPath": "/host",
                        "readOnly": True,
                        "mountPropagation": "HostToContainer",
                    },
                    {"name": "cdi-root", "mountPath": "/var/run/cdi"},
                    {"name": "mps-shm", "mountPath": "/dev/shm"},
                    {"name": "mps-root", "mountPath": "/mps"},
                ],
            }
        ],
        "volumes": [
            {
                "name": "nvidia-device-plugin-entrypoint",
                "configMap": {"name": "nvidia-device-plugin-entrypoint", "defaultMode": 448},
            },
            _host_path("device-plugin", "/var/lib/kubelet/device-plugins"),
            _host_path("run-nvidia-validations", VALIDATIONS, "DirectoryOrCreate"),
            _host_path("driver-install-dir", "/run/nvidia/driver", "DirectoryOrCreate"),
            _host_path("host-root", "/"),
            _host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
            _host_path("mps-root", "/run/nvidia/mps", "DirectoryOrCreate"),
            _host_path("mps-shm", "/run/nvidia/mps/shm"),
        ],
    }
    return "nvidia-device-plugin-daemonset", {"app": "nvidia-device-plugin-daemonset"}, pod


ASSET_ANNOTATIONS = {
    "nvidia-device-plugin-daemonset": {"openshift.io/scc": "hostmount-anyuid"},
    "nvidia-container-toolkit-daemonset": {"openshift.io/scc": "hostmount-anyuid"},
    "nvidia-dcgm-exporter": {"openshift.io/scc": "nvidia-dcgm-exporter"},
    "nvidia-driver-daemonset": {"openshift.io/scc": "nvidia-driver"},
    "nvidia-device-plugin-mps-control-daemon": {"openshift.io/scc": "hostmount-anyuid"},
    "nvidia-node-status-exporter": {"openshift.io/scc": "nvidia-node-status-exporter"},
}
TEMPLATE_ANNOTATIONS = {
    "nvidia-driver-daemonset": {"kubectl.kubernetes.io/default-container": "nvidia-driver-ctr"}
}
"""Pod-template annotations the assets carry."""
SELECTORS = {"nvidia-driver-daemonset": {"app": "nvidia-driver-daemonset"}}
"""Selectors narrower than the pod labels (the driver's)."""
ON_DELETE = ("nvidia-driver-daemonset",)
"""``applyUpdateStrategyConfig`` leaves the driver's asset strategy (``OnDelete``)."""
"""DaemonSet annotations the assets carry."""


def gpu_feature_discovery(policy: Mapping[str, Any]) -> tuple[str, Obj, Obj]:
    """``gpu-feature-discovery``: the asset, then ``TransformGPUDiscoveryPlugin`` (no
    plugin config: config-manager containers removed; the spec's env; MIG ``single``)."""
    spec = policy["gfd"]
    env = [
        _env("GFD_SLEEP_INTERVAL", "60s"),
        _env("GFD_FAIL_ON_INIT_ERROR", "true"),
        _field_env("NAMESPACE", "metadata.namespace"),
        _field_env("NODE_NAME", "spec.nodeName"),
        _field_env("POD_NAME", "metadata.name"),
    ]
    _user_env(env, spec)
    _mig(env, policy["mig"]["strategy"])
    pod = {
        "nodeSelector": {"nvidia.com/gpu.deploy.gpu-feature-discovery": "true"},
        "priorityClassName": "system-node-critical",
        "serviceAccountName": "nvidia-gpu-feature-discovery",
        "runtimeClassName": policy["operator"]["runtimeClass"],
        "initContainers": [
            _toolkit_validation(
                policy,
                {
                    "name": "run-nvidia",
                    "mountPath": "/run/nvidia",
                    "mountPropagation": "HostToContainer",
                },
            )
        ],
        "containers": [
            {
                "name": "gpu-feature-discovery",
                "image": _image(spec),
                "imagePullPolicy": spec["imagePullPolicy"],
                "command": ["gpu-feature-discovery"],
                "env": env,
                "volumeMounts": [
                    {
                        "name": "output-dir",
                        "mountPath": "/etc/kubernetes/node-feature-discovery/features.d",
                    },
                    {"name": "host-sys", "mountPath": "/sys", "readOnly": True},
                ],
                "securityContext": {"privileged": True},
            }
        ],
        "volumes": [
            _host_path("output-dir", "/etc/kubernetes/node-feature-discovery/features.d"),
            _host_path("host-sys", "/sys"),
            _host_path("run-nvidia", "/run/nvidia", "Directory"),
        ],
    }
    labels = {"app": "gpu-feature-discovery", "app.kubernetes.io/part-of": "nvidia-gpu"}
    return "gpu-feature-discovery", labels, pod


def _validation_ctr(policy: Mapping[str, Any], name: str, env: list[Obj], mounts: list[Obj],
                    security: Obj | None = None) -> Obj:  # fmt: skip
    """A validator init container after ``transformValidationInitContainer`` /
    ``TransformValidatorComponent``: validator image and pull policy, ``runAsUser: 0``."""
    validator = policy["validator"]
    return {
        "name": name,
        "image": _image(validator),
        "imagePullPolicy": validator["imagePullPolicy"],
        "command": ["sh", "-c"],
        "args": ["nvidia-validator"],
        "env": env,
        "securityContext": {**(security or {"privileged": True}), "runAsUser": 0},
        "volumeMounts": mounts,
    }


def _mount(name: str, path: str, propagation: str | None = None, read_only: bool = False) -> Obj:
    out: Obj = {"name": name, "mountPath": path}
    if read_only:
        out["readOnly"] = True
    if propagation:
        out["mountPropagation"] = propagation
    return out


PRIVILEGED_S0 = {"privileged": True, "seLinuxOptions": {"level": "s0"}}


def _driver_validation(policy: Mapping[str, Any], mounts: list[Obj]) -> Obj:
    env = [
        _env("WITH_WAIT", "true"),
        _env("COMPONENT", "driver"),
        _field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
    ]
    return _validation_ctr(policy, "driver-validation", env, mounts, PRIVILEGED_S0)


def container_toolkit(policy: Mapping[str, Any]) -> tuple[str, Obj, Obj]:
    """``state-container-toolkit``: the asset, then ``TransformToolkit`` with CDI on
    (``transformToolkitCtrForCDI``), the default install dir, and ``transformForRuntime``
    for containerd (the node's runtime): the runtime class, the top-level and drop-in
    config and the socket, each mounted under ``/runtime/``."""
    spec = policy["toolkit"]
    env = [
        _env("ROOT", "/usr/local/nvidia"),
        _env("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", "management.nvidia.com/gpu"),
        _env("NVIDIA_VISIBLE_DEVICES", "void"),
        _env("TOOLKIT_PID_FILE", "/run/nvidia/toolkit/toolkit.pid"),
        _field_env("NRI_NAMESPACE", "metadata.namespace"),
    ]
    if policy["cdi"]["enabled"]:
        set_env(env, "CDI_ENABLED", "true")
        set_env(env, "NVIDIA_RUNTIME_SET_AS_DEFAULT", "false")
        set_env(env, "NVIDIA_CONTAINER_RUNTIME_MODE", "cdi")
        set_env(env, "CRIO_CONFIG_MODE", "config")
    _user_env(env, spec)
    set_env(env, "RUNTIME", "containerd")
    set_env(env, "CONTAINERD_RUNTIME_CLASS", policy["operator"]["runtimeClass"])
    set_env(env, "RUNTIME_CONFIG", "/runtime/config-dir/config.toml")
    set_env(env, "CONTAINERD_CONFIG", "/runtime/config-dir/config.toml")
    set_env(env, "RUNTIME_DROP_IN_CONFIG", "/runtime/config-dir.d/99-nvidia.toml")
    set_env(env, "RUNTIME_DROP_IN_CONFIG_HOST_PATH", "/etc/containerd/conf.d/99-nvidia.toml")
    set_env(env, "RUNTIME_SOCKET", "/runtime/sock-dir/containerd.sock")
    set_env(env, "CONTAINERD_SOCKET", "/runtime/sock-dir/containerd.sock")
    pod = {
        "nodeSelector": {"nvidia.com/gpu.deploy.container-toolkit": "true"},
        "serviceAccountName": "nvidia-container-toolkit",
        "hostPID": True,
        "initContainers": [
            _driver_validation(
                policy,
                [
                    _mount("driver-install-dir", "/run/nvidia/driver", "HostToContainer"),
                    _mount("run-nvidia-validations", VALIDATIONS, "Bidirectional"),
                    _mount("host-root", "/host", "HostToContainer", read_only=True),
                    _mount("host-dev-char", "/host-dev-char"),
                ],
            )
        ],
        "containers": [
            {
                "name": "nvidia-container-toolkit-ctr",
                "image": _image(spec),
                "imagePullPolicy": spec["imagePullPolicy"],
                "command": ["/bin/sh", "-c"],
                "args": ["/bin/entrypoint.sh"],
                "env": env,
                "securityContext": PRIVILEGED_S0,
                "volumeMounts": [
                    {
                        "name": "nvidia-container-toolkit-entrypoint",
                        "readOnly": True,
                        "mountPath": "/bin/entrypoint.sh",
                        "subPath": "entrypoint.sh",
                    },
                    _mount("toolkit-root", "/run/nvidia/toolkit"),
                    _mount("run-nvidia-validations", VALIDATIONS),
                    _mount("toolkit-install-dir", "/usr/local/nvidia"),
                    _mount("crio-hooks", "/usr/share/containers/oci/hooks.d"),
                    _mount("driver-install-dir", "/driver-root", "HostToContainer"),
                    _mount("host-root", "/host", "HostToContainer", read_only=True),
                    _mount("cdi-root", "/var/run/cdi"),
                    _mount("containerd-config", "/runtime/config-dir/"),
                    _mount("containerd-drop-in-config", "/runtime/config-dir.d/"),
                    _mount("containerd-socket", "/runtime/sock-dir/"),
                ],
            }
        ],
        "volumes": [
            {
                "name": "nvidia-container-toolkit-entrypoint",
                "configMap": {"name": "nvidia-container-toolkit-entrypoint", "defaultMode": 448},
            },
            _host_path("toolkit-root", "/run/nvidia/toolkit", "DirectoryOrCreate"),
            _host_path("run-nvidia-validations", VALIDATIONS, "DirectoryOrCreate"),
            _host_path("driver-install-dir", "/run/nvidia/driver", "DirectoryOrCreate"),
            _host_path("host-root", "/"),
            _host_path("toolkit-install-dir", "/usr/local/nvidia"),
            _host_path("crio-hooks", "/run/containers/oci/hooks.d"),
            _host_path("host-dev-char", "/dev/char"),
            _host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
            _host_path("containerd-config", "/etc/containerd", "DirectoryOrCreate"),
            _host_path("containerd-drop-in-config", "/etc/containerd/conf.d", "DirectoryOrCreate"),
            _host_path("containerd-socket", "/run/containerd"),
        ],
    }
    return "nvidia-container-toolkit-daemonset", {"app": "nvidia-container-toolkit-daemonset"}, pod


def dcgm_exporter(policy: Mapping[str, Any]) -> tuple[str, Obj, Obj]:
    """``state-dcgm-exporter``: the asset, then ``TransformDCGMExporter`` with DCGM off
    (no remote engine), no hostPID/hostNetwork, no pod metadata (the token stays
    unmounted), the default kubelet root, and the spec's (empty) env."""
    spec = policy["dcgmExporter"]
    env = [
        _env("DCGM_EXPORTER_LISTEN", ":9400"),
        _env("DCGM_EXPORTER_KUBERNETES", "true"),
        _env("DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/dcp-metrics-included.csv"),
        _field_env("NODE_NAME", "spec.nodeName"),
    ]
    _user_env(env, spec)
    probe = {"httpGet": {"port": 9400, "path": "/health"}, "initialDelaySeconds": 45}
    pod = {
        "nodeSelector": {"nvidia.com/gpu.deploy.dcgm-exporter": "true"},
        "serviceAccountName": "nvidia-dcgm-exporter",
        "automountServiceAccountToken": False,
        "runtimeClassName": policy["operator"]["runtimeClass"],
        "initContainers": [
            _toolkit_validation(policy, _mount("run-nvidia", "/run/nvidia", "HostToContainer"))
        ],
        "containers": [
            {
                "name": "nvidia-dcgm-exporter",
                "image": _image(spec),
                "imagePullPolicy": spec["imagePullPolicy"],
                "env": env,
                "ports": [{"name": "metrics", "containerPort": 9400}],
                "livenessProbe": {**probe, "periodSeconds": 5},
                "readinessProbe": dict(probe),
                "volumeMounts": [
                    _mount("pod-gpu-resources", "/var/lib/kubelet/pod-resources", read_only=True)
                ],
                "securityContext": {"privileged": True},
            }
        ],
        "volumes": [
            _host_path("pod-gpu-resources", "/var/lib/kubelet/pod-resources"),
            _host_path("run-nvidia", "/run/nvidia"),
        ],
    }
    return "nvidia-dcgm-exporter", {"app": "nvidia-dcgm-exporter"}, pod


def operator_validator(policy: Mapping[str, Any]) -> tuple[str, Obj, Obj]:
    """``state-operator-validation``: the asset, then ``TransformValidator``: the runtime
    class first, then per component: validator image, pull policy and ``runAsUser: 0``;
    ``cuda`` and ``plugin`` get ``VALIDATOR_IMAGE``, ``VALIDATOR_IMAGE_PULL_POLICY`` and
    ``VALIDATOR_RUNTIME_CLASS``; ``plugin`` its ``MIG_STRATEGY`` in place."""
    validator = policy["validator"]
    image, pull, runtime_class = (
        _image(validator),
        validator["imagePullPolicy"],
        policy["operator"]["runtimeClass"],
    )
    bidirectional = [_mount("run-nvidia-validations", VALIDATIONS, "Bidirectional")]
    workload = [
        _env("VALIDATOR_IMAGE", image),
        _env("VALIDATOR_IMAGE_PULL_POLICY", pull),
        _env("VALIDATOR_RUNTIME_CLASS", runtime_class),
    ]
    cuda_env = [
        _env("WITH_WAIT", "false"),
        _env("COMPONENT", "cuda"),
        _field_env("NODE_NAME", "spec.nodeName"),
        _field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
        *workload,
    ]
    plugin_env = [
        _env("COMPONENT", "plugin"),
        _env("WITH_WAIT", "false"),
        _env("WITH_WORKLOAD", "false"),
        _env("MIG_STRATEGY", policy["mig"]["strategy"]),
        _field_env("NODE_NAME", "spec.nodeName"),
        _field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
        *workload,
    ]
    for var in (policy["validator"].get("plugin") or {}).get("env") or []:
        set_env(plugin_env, var["name"], str(var.get("value", "")))
    toolkit_env = [
        _env("NVIDIA_VISIBLE_DEVICES", "all"),
        _env("WITH_WAIT", "false"),
        _env("COMPONENT", "toolkit"),
    ]
    pod = {
        "nodeSelector": {"nvidia.com/gpu.deploy.operator-validator": "true"},
        "serviceAccountName": "nvidia-operator-validator",
        "runtimeClassName": runtime_class,
        "initContainers": [
            _driver_validation(
                policy,
                [
                    _mount("host-root", "/host", "HostToContainer", read_only=True),
                    _mount("driver-install-dir", "/run/nvidia/driver", "HostToContainer"),
                    _mount("run-nvidia-validations", VALIDATIONS, "Bidirectional"),
                    _mount("host-dev-char", "/host-dev-char"),
                ],
            ),
            _validation_ctr(policy, "toolkit-validation", toolkit_env, list(bidirectional)),
            _validation_ctr(policy, "cuda-validation", cuda_env, list(bidirectional)),
            _validation_ctr(policy, "plugin-validation", plugin_env, list(bidirectional)),
        ],
        "containers": [
            {
                "name": "nvidia-operator-validator",
                "image": image,
                "imagePullPolicy": pull,
                "command": ["sh", "-c"],
                "args": ["echo all validations are successful; while true; do sleep 86400; done"],
                "securityContext": {"privileged": True, "runAsUser": 0},
                "lifecycle": {
                    "preStop": {"exec": {"command": ["sh", "-c", f"rm -f {VALIDATIONS}/*-ready"]}}
                },
                "volumeMounts": list(bidirectional),
            }
        ],
        "volumes": [
            _host_path("run-nvidia-validations", VALIDATIONS, "DirectoryOrCreate"),
            _host_path("driver-install-dir", "/run/nvidia/driver"),
            _host_path("host-root", "/"),
            _host_path("host-dev-char", "/dev/char"),
        ],
    }
    labels = {"app": "nvidia-operator-validator", "app.kubernetes.io/part-of": "gpu-operator"}
    return "nvidia-operator-validator", labels, pod


def mig_manager(policy: Mapping[str, Any]) -> tuple[str, Obj, Obj]:
    """``state-mig-manager``: the asset, then ``TransformMIGManager``: the runtime class,
    the default ``default-mig-parted-config`` remapped to ``config-default.yaml`` with
    ``DEFAULT_CONFIG_FILE``, ``default-gpu-clients``, CDI env, then the spec's env."""
    spec = policy["migManager"]
    env = [
        _field_env("NODE_NAME", "spec.nodeName"),
        _field_env("POD_NAME", "metadata.name"),
        _field_env("POD_NAMESPACE", "metadata.namespace"),
        _env("GPU_CLIENTS_FILE", "/gpu-clients/clients.yaml"),
        _field_env("DEFAULT_GPU_CLIENTS_NAMESPACE", "metadata.namespace"),
        _env("DEFAULT_CONFIG_FILE", "/mig-parted-config/config-default.yaml"),
    ]
    if policy["cdi"]["enabled"]:
        set_env(env, "CDI_ENABLED", "true")
        set_env(
            env,
            "NVIDIA_CDI_HOOK_PATH",
            f"{policy['toolkit']['installDir']}/toolkit/nvidia-cdi-hook",
        )
    _user_env(env, spec)
    toolkit_wait = TOOLKIT_WAIT.replace("nvidia container stack", "nvidia container toolkit")
    init = _toolkit_validation(
        policy, _mount("run-nvidia-validations", VALIDATIONS, "HostToContainer")
    )
    init["args"] = [toolkit_wait]
    pod = {
        "nodeSelector": {"nvidia.com/gpu.deploy.mig-manager": "true"},
        "serviceAccountName": "nvidia-mig-manager",
        "hostPID": True,
        "hostIPC": True,
        "runtimeClassName": policy["operator"]["runtimeClass"],
        "initContainers": [init],
        "containers": [
            {
                "name": "nvidia-mig-manager",
                "image": _image(spec),
                "imagePullPolicy": spec["imagePullPolicy"],
                "command": ["/bin/sh", "-c"],
                "args": ["/bin/entrypoint.sh"],
                "env": env,
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    {
                        "name": "nvidia-mig-manager-entrypoint",
                        "readOnly": True,
                        "mountPath": "/bin/entrypoint.sh",
                        "subPath": "entrypoint.sh",
                    },
                    _mount("run-nvidia-validations", VALIDATIONS),
                    _mount("host-sys", "/sys"),
                    _mount("host-root", "/host", "HostToContainer"),
                    _mount("gpu-clients", "/gpu-clients"),
                    _mount("mig-parted-config", "/mig-parted-config"),
                    _mount("driver-install-dir", "/driver-root", "HostToContainer"),
                    _mount("cdi-root", "/var/run/cdi"),
                ],
            }
        ],
        "volumes": [
            {
                "name": "nvidia-mig-manager-entrypoint",
                "configMap": {"name": "nvidia-mig-manager-entrypoint", "defaultMode": 448},
            },
            _host_path("host-sys", "/sys", "Directory"),
            _host_path("run-nvidia-validations", VALIDATIONS, "DirectoryOrCreate"),
            _host_path("driver-install-dir", "/run/nvidia/driver", "DirectoryOrCreate"),
            _host_path("host-root", "/"),
            {"name": "gpu-clients", "configMap": {"name": "default-gpu-clients"}},
            {
                "name": "mig-parted-config",
                "configMap": {
                    "name": "default-mig-parted-config",
                    "items": [{"key": "config.yaml", "path": "config-default.yaml"}],
                },
            },
            _host_path("cdi-root", "/var/run/cdi", "DirectoryOrCreate"),
        ],
    }
    return "nvidia-mig-manager", {"app": "nvidia-mig-manager"}, pod


OS_TAG = "ubuntu22.04"
"""The GPU nodes' OS (NFD ``system-os_release`` ID and VERSION_ID), NVIDIA's ``gpuNodeOSTag``."""


def driver(policy: Mapping[str, Any]) -> tuple[str, Obj, Obj]:
    """``state-driver``: the asset, then ``TransformDriver`` for the default policy: the
    manager image and its env (set in place), the driver image ``resolveDriverTag``
    (``<repo>/<image>:<version>-<osTag>``), ``KERNEL_MODULE_TYPE``, the startup probe
    values, no peermem/GDS/GDRCopy/Driver Toolkit sidecars (removed), and last
    ``DRIVER_CONFIG_DIGEST`` on the manager and the driver container. The driver keeps
    the asset's ``OnDelete`` (``applyUpdateStrategyConfig`` skips the driver)."""
    spec = policy["driver"]
    manager = spec["manager"]
    manager_env = [
        _field_env("NODE_NAME", "spec.nodeName"),
        _env("NVIDIA_VISIBLE_DEVICES", "void"),
        _env("ENABLE_GPU_POD_EVICTION", "true"),
        _env("ENABLE_AUTO_DRAIN", "false"),
        _env("DRAIN_USE_FORCE", "false"),
        _env("DRAIN_POD_SELECTOR_LABEL", ""),
        _env("DRAIN_TIMEOUT_SECONDS", "0s"),
        _env("DRAIN_DELETE_EMPTYDIR_DATA", "false"),
        _field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
    ]
    _user_env(manager_env, manager)
    driver_env = [_field_env("NODE_NAME", "spec.nodeName"), _field_env("NODE_IP", "status.hostIP")]
    if spec.get("kernelModuleType"):
        set_env(driver_env, "KERNEL_MODULE_TYPE", spec["kernelModuleType"])
        if spec["kernelModuleType"] == "open":
            set_env(driver_env, "OPEN_KERNEL_MODULES_ENABLED", "true")
    _user_env(driver_env, spec)
    probe = spec.get("startupProbe") or {}
    startup = {
        "exec": {"command": ["sh", "/usr/local/bin/startup-probe.sh"]},
        "initialDelaySeconds": probe.get("initialDelaySeconds") or 60,
        "failureThreshold": probe.get("failureThreshold") or 120,
        "successThreshold": probe.get("successThreshold") or 1,
        "periodSeconds": probe.get("periodSeconds") or 10,
        "timeoutSeconds": probe.get("timeoutSeconds") or 60,
    }
    ready_files = f"{VALIDATIONS}/.driver-ctr-ready {VALIDATIONS}/.driver-daemons-status"
    pod: Obj = {
        "nodeSelector": {"nvidia.com/gpu.deploy.driver": "true"},
        "affinity": {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {
                                    "key": "app.kubernetes.io/component",
                                    "operator": "In",
                                    "values": ["nvidia-driver"],
                                }
                            ]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
        "serviceAccountName": "nvidia-driver",
        "hostPID": True,
        "initContainers": [
            {
                "name": "k8s-driver-manager",
                "image": _image(manager),
                "imagePullPolicy": manager["imagePullPolicy"],
                "command": ["driver-manager"],
                "args": ["uninstall_driver"],
                "env": manager_env,
                "securityContext": {"privileged": True},
                "volumeMounts": [
                    _mount("run-nvidia", "/run/nvidia", "Bidirectional"),
                    _mount("host-root", "/host", "HostToContainer", read_only=True),
                    _mount("host-sys", "/sys"),
                    _mount("run-mellanox-drivers", "/run/mellanox/drivers", "HostToContainer"),
                ],
            }
        ],
        "containers": [
            {
                "name": "nvidia-driver-ctr",
                "image": f"{_image(spec)}-{OS_TAG}",
                "imagePullPolicy": spec["imagePullPolicy"],
                "command": ["nvidia-driver"],
                "args": ["init"],
                "env": driver_env,
                "securityContext": PRIVILEGED_S0,
                "volumeMounts": [
                    _mount("run-nvidia", "/run/nvidia", "Bidirectional"),
                    _mount("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager"),
                    _mount("run-nvidia-topologyd", "/run/nvidia-topologyd"),
                    _mount("var-log", "/var/log"),
                    _mount("dev-log", "/dev/log"),
                    _mount("host-os-release", "/host-etc/os-release", read_only=True),
                    _mount("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", "HostToContainer"),
                    _mount("run-mellanox-drivers", "/run/mellanox/drivers", "HostToContainer"),
                    _mount("host-sys-devices-system", "/sys/devices/system"),
                    _mount("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
                    _mount("nv-firmware", "/lib/firmware"),
                    {
                        "name": "driver-startup-probe-script",
                        "mountPath": "/usr/local/bin/startup-probe.sh",
                        "subPath": "startup-probe.sh",
                    },
                ],
                "startupProbe": startup,
                "lifecycle": {
                    "preStop": {"exec": {"command": ["/bin/sh", "-c", f"rm -f {ready_files}"]}}
                },
            }
        ],
        "volumes": [
            _host_path("run-nvidia", "/run/nvidia", "DirectoryOrCreate"),
            _host_path("var-log", "/var/log"),
            _host_path("dev-log", "/dev/log"),
            _host_path("host-os-release", "/etc/os-release"),
            _host_path(
                "run-nvidia-fabricmanager", "/run/nvidia-fabricmanager", "DirectoryOrCreate"
            ),
            _host_path("run-nvidia-topologyd", "/run/nvidia-topologyd", "DirectoryOrCreate"),
            _host_path("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", "DirectoryOrCreate"),
            _host_path("run-mellanox-drivers", "/run/mellanox/drivers", "DirectoryOrCreate"),
            _host_path("run-nvidia-validations", VALIDATIONS, "DirectoryOrCreate"),
            _host_path("host-root", "/"),
            _host_path("host-sys", "/sys", "Directory"),
            _host_path("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
            _host_path("host-sys-devices-system", "/sys/devices/system", "Directory"),
            _host_path("nv-firmware", "/run/nvidia/driver/lib/firmware", "DirectoryOrCreate"),
            {
                "name": "driver-startup-probe-script",
                "configMap": {"name": "nvidia-driver-startup-probe", "defaultMode": 0o755},
            },
        ],
    }
    # The digest is NVIDIA's function of the transformed pod spec; nimctl's
    # implementation of that function is checked against NVIDIA's values in all 16
    # render goldens (tests/unit/gpu_nvidiadriver/test_nvidia_goldens.py) and is used
    # here only as that function, on this builder's pod spec.
    digest = config_digest(from_pod_spec(pod))
    set_env(pod["initContainers"][0]["env"], "DRIVER_CONFIG_DIGEST", digest)
    set_env(driver_env, "DRIVER_CONFIG_DIGEST", digest)
    labels = {
        "app": "nvidia-driver-daemonset",
        "nvidia.com/precompiled": "false",
        "app.kubernetes.io/component": "nvidia-driver",
    }
    return "nvidia-driver-daemonset", labels, pod


def mps_control_daemon(policy: Mapping[str, Any]) -> tuple[str, Obj, Obj]:
    """``state-mps-control-daemon``: the asset, then ``TransformMPSControlDaemon``: the
    device plugin's image on the mounts init container and the main container, no plugin
    config (config-manager containers removed), the runtime class and MIG ``single``."""
    spec = policy["devicePlugin"]
    image, pull = _image(spec), spec["imagePullPolicy"]
    env = [
        _field_env("NODE_NAME", "spec.nodeName"),
        _env("NVIDIA_VISIBLE_DEVICES", "all"),
        _env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
    ]
    _mig(env, policy["mig"]["strategy"])
    pod = {
        "nodeSelector": {
            "nvidia.com/gpu.deploy.device-plugin": "true",
            "nvidia.com/mps.capable": "true",
        },
        "serviceAccountName": "nvidia-device-plugin",
        "hostPID": True,
        "runtimeClassName": policy["operator"]["runtimeClass"],
        "initContainers": [
            _toolkit_validation(policy, _mount("run-nvidia", "/run/nvidia", "HostToContainer")),
            {
                "name": "mps-control-daemon-mounts",
                "image": image,
                "imagePullPolicy": pull,
                "command": ["mps-control-daemon", "mount-shm"],
                "securityContext": {"privileged": True},
                "volumeMounts": [_mount("mps-root", "/mps", "Bidirectional")],
            },
        ],
        "containers": [
            {
                "name": "mps-control-daemon-ctr",
                "image": image,
                "imagePullPolicy": pull,
                "command": ["mps-control-daemon"],
                "env": env,
                "securityContext": {"privileged": True},
                "volumeMounts": [_mount("mps-shm", "/dev/shm"), _mount("mps-root", "/mps")],
            }
        ],
        "volumes": [
            _host_path("run-nvidia", "/run/nvidia", "Directory"),
            _host_path("mps-root", "/run/nvidia/mps", "DirectoryOrCreate"),
            _host_path("mps-shm", "/run/nvidia/mps/shm"),
        ],
    }
    labels = {"app": "nvidia-device-plugin-mps-control-daemon"}
    return "nvidia-device-plugin-mps-control-daemon", labels, pod


def node_status_exporter(policy: Mapping[str, Any]) -> tuple[str, Obj, Obj]:
    """``state-node-status-exporter``: the asset, then ``TransformNodeStatusExporter``:
    image, pull policy, the spec's env and ``runAsUser: 0``; no runtime class."""
    spec = policy["nodeStatusExporter"]
    env = [
        _env("NVIDIA_VISIBLE_DEVICES", "void"),
        _env("COMPONENT", "metrics"),
        _env("METRICS_PORT", "8000"),
        _field_env("NODE_NAME", "spec.nodeName"),
        _field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
    ]
    _user_env(env, spec)
    pod = {
        "nodeSelector": {"nvidia.com/gpu.deploy.node-status-exporter": "true"},
        "serviceAccountName": "nvidia-node-status-exporter",
        "containers": [
            {
                "name": "nvidia-node-status-exporter",
                "image": _image(spec),
                "imagePullPolicy": spec["imagePullPolicy"],
                "command": ["nvidia-validator"],
                "env": env,
                "ports": [{"name": "node-status", "containerPort": 8000}],
                "securityContext": {"privileged": True, "runAsUser": 0},
                "volumeMounts": [
                    _mount("run-nvidia", "/run/nvidia", "HostToContainer"),
                    _mount("host-root", "/host", "HostToContainer", read_only=True),
                ],
            }
        ],
        "volumes": [
            _host_path("run-nvidia", "/run/nvidia", "Directory"),
            _host_path("host-root", "/"),
        ],
    }
    return "nvidia-node-status-exporter", {"app": "nvidia-node-status-exporter"}, pod


ENABLED_BY = {
    mps_control_daemon: "devicePlugin",
    node_status_exporter: "nodeStatusExporter",
}
"""Builders whose state follows a component's ``enabled`` (the others are on by default
and stay on here)."""

BUILDERS = (
    driver,
    mps_control_daemon,
    node_status_exporter,
    device_plugin,
    gpu_feature_discovery,
    container_toolkit,
    dcgm_exporter,
    operator_validator,
    mig_manager,
)


def daemonsets(policy_obj: Mapping[str, Any], namespace: str) -> list[Obj]:
    """NVIDIA's DaemonSets for ``policy_obj`` (the stored ClusterPolicy, with its uid)."""
    policy = policy_obj["spec"]
    common = policy["daemonsets"]
    owner = {
        "apiVersion": policy_obj["apiVersion"],
        "kind": policy_obj["kind"],
        "name": policy_obj["metadata"]["name"],
        "uid": policy_obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    out: list[Obj] = []
    for build in BUILDERS:
        if build in ENABLED_BY and not policy[ENABLED_BY[build]].get("enabled", True):
            continue
        name, pod_labels, pod = build(policy)
        selector = SELECTORS.get(name, pod_labels)
        pod["tolerations"] = [dict(t) for t in common["tolerations"]]
        pod["priorityClassName"] = common["priorityClassName"]
        extra = {
            k: v
            for k, v in (common.get("labels") or {}).items()
            if k not in ("app", "app.kubernetes.io/part-of")
        }
        template_meta: Obj = {"labels": {**pod_labels, **extra}}
        if name in TEMPLATE_ANNOTATIONS:
            template_meta["annotations"] = dict(TEMPLATE_ANNOTATIONS[name])
        strategy: Obj = (
            {"type": "OnDelete"}
            if name in ON_DELETE
            else {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": int(common["rollingUpdate"]["maxUnavailable"])},
            }
        )
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {**pod_labels, **(common.get("labels") or {})},
                    "annotations": {
                        **ASSET_ANNOTATIONS.get(name, {}),
                        HASH_ANNOTATION: NVIDIAS_HASH,
                    },
                    "ownerReferences": [owner],
                },
                "spec": {
                    "selector": {"matchLabels": dict(selector)},
                    "template": {"metadata": template_meta, "spec": pod},
                    "updateStrategy": strategy,
                },
            }
        )
    return out
