"""The operand DaemonSets NVIDIA's ClusterPolicy controller makes for the chart's default policy.

Written for this test from reading NVIDIA's GPU Operator, independently of
nimctl's renders (``platforms/gpu`` is not used): each DaemonSet is the
object in NVIDIA's ``assets/<state>/*daemonset.yaml`` after the transforms
``controllers/object_controls.go`` applies for the default ClusterPolicy
(``docs/examples/clusterpolicy-defaults.yaml``), in order:

1. ``applyCommonDaemonsetConfig``: ``updateStrategy`` RollingUpdate with
   ``maxUnavailable: 1`` (an int, from ``daemonsets.rollingUpdate``),
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


ASSET_ANNOTATIONS = {"nvidia-device-plugin-daemonset": {"openshift.io/scc": "hostmount-anyuid"}}
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


BUILDERS = (device_plugin, gpu_feature_discovery)


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
        name, selector, pod = build(policy)
        pod["tolerations"] = [dict(t) for t in common["tolerations"]]
        pod["priorityClassName"] = common["priorityClassName"]
        extra = {
            k: v
            for k, v in (common.get("labels") or {}).items()
            if k not in ("app", "app.kubernetes.io/part-of")
        }
        out.append(
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {**selector, **(common.get("labels") or {})},
                    "annotations": {
                        **ASSET_ANNOTATIONS.get(name, {}),
                        HASH_ANNOTATION: NVIDIAS_HASH,
                    },
                    "ownerReferences": [owner],
                },
                "spec": {
                    "selector": {"matchLabels": dict(selector)},
                    "template": {"metadata": {"labels": {**selector, **extra}}, "spec": pod},
                    "updateStrategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {
                            "maxUnavailable": int(common["rollingUpdate"]["maxUnavailable"])
                        },
                    },
                },
            }
        )
    return out
