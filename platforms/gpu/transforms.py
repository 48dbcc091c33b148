"""The ClusterPolicy transforms every operand DaemonSet goes through.

In NVIDIA's order: ``spec.daemonsets`` (update strategy, priority class,
tolerations, pod security context), ``hostPaths`` (rootFS, driverInstallDir),
the operand's own transform (image, pull policy and secrets, resources,
args, env, hostNetwork, the validation init containers, runtimeClassName or
the NRI annotation, MIG env, the device-plugin config manager), and last
``spec.daemonsets.labels``/``annotations``. Functions change the DaemonSet
dict in place; lookups are by container and volume name, as in the assets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from api.nvidia.v1.clusterpolicy import ComponentSpec, EnvVar, ResourceRequirements
from platforms.gpu.common import PRIV, container, env, field_env, json_copy, mount
from platforms.gpu.context import StateContext
from platforms.gpu.errors import RenderError
from platforms.gpu.facts import RUNTIME_CRIO
from platforms.gpu.images import image_path, pull_policy

DEFAULT_DRIVER_INSTALL_DIR = "/run/nvidia/driver"
DRIVER_DAEMONSET_PREFIX = "nvidia-driver-daemonset"
NRI_ANNOTATION_PREFIX = "nvidia.cdi.k8s.io/container."
NRI_ANNOTATION_VALUE = "management.nvidia.com/gpu=all"
_POD_LABELS_SKIPPED = ("app", "app.kubernetes.io/part-of")


def pod_spec(ds: dict[str, Any]) -> dict[str, Any]:
    """The DaemonSet's pod spec."""
    spec: dict[str, Any] = ds["spec"]["template"]["spec"]
    return spec


def all_containers(ds: dict[str, Any]) -> list[dict[str, Any]]:
    """Init containers, then main containers."""
    pod = pod_spec(ds)
    return [*pod.get("initContainers", []), *pod["containers"]]


def find(ds: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The init or main container called ``name``."""
    return next((c for c in all_containers(ds) if c["name"] == name), None)


def volume(ds: dict[str, Any], name: str) -> dict[str, Any] | None:
    """The pod volume called ``name``."""
    return next((v for v in pod_spec(ds).get("volumes", []) if v["name"] == name), None)


def remove_containers(ds: dict[str, Any], *names: str) -> None:
    """Drop the init or main containers called ``names``."""
    pod = pod_spec(ds)
    for key in ("initContainers", "containers"):
        if key in pod:
            pod[key] = [c for c in pod[key] if c["name"] not in names]
            if not pod[key] and key == "initContainers":
                del pod[key]


def get_env(c: Mapping[str, Any], name: str) -> str | None:
    """The literal value of ``name`` on container ``c`` (None when unset)."""
    for e in c.get("env", []):
        if e["name"] == name:
            value = e.get("value")
            return value if isinstance(value, str) else ""
    return None


def set_env(c: dict[str, Any], name: str, value: str) -> None:
    """NVIDIA's ``setContainerEnv``: replace in place, or append at the end."""
    envs: list[dict[str, Any]] = c.setdefault("env", [])
    for e in envs:
        if e["name"] == name:
            e.pop("valueFrom", None)
            e["value"] = value
            return
    envs.append(env(name, value))


def set_user_env(c: dict[str, Any], user: Iterable[EnvVar] | None) -> None:
    """A component's ``env`` list, set-or-overwrite, in order."""
    for e in user or ():
        set_env(c, e.name, e.value or "")


def dump(model: BaseModel) -> Any:
    """A typed sub-spec as Kubernetes JSON."""
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def add_pull_secrets(ds: dict[str, Any], secrets: Iterable[str] | None) -> None:
    """Append image pull secrets to the pod, without duplicates."""
    pod = pod_spec(ds)
    have = {s["name"] for s in pod.get("imagePullSecrets", [])}
    for name in secrets or ():
        if name not in have:
            pod.setdefault("imagePullSecrets", []).append({"name": name})
            have.add(name)


def set_pod_annotation(ds: dict[str, Any], key: str, value: str) -> None:
    """Set an annotation on the pod template."""
    ds["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})[key] = value


# --- spec.daemonsets and hostPaths (NVIDIA's preProcessDaemonSet) ---------------------------


def apply_daemonsets_spec(ds: dict[str, Any], ctx: StateContext) -> None:
    """Update strategy, priority class, tolerations and pod security context."""
    d = ctx.spec.daemonsets
    pod = pod_spec(ds)
    name = ds["metadata"]["name"]
    if d.update_strategy == "OnDelete":
        ds["spec"]["updateStrategy"] = {"type": "OnDelete"}
    elif (
        d.rolling_update is not None
        and d.rolling_update.max_unavailable
        and not name.startswith(DRIVER_DAEMONSET_PREFIX)
    ):
        ds["spec"]["updateStrategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxUnavailable": _int_or_percent(d.rolling_update.max_unavailable)},
        }
    if d.priority_class_name:
        pod["priorityClassName"] = d.priority_class_name
    if d.tolerations:
        pod["tolerations"] = [json_copy(t) for t in d.tolerations]
    if d.pod_security_context is not None:
        pod["securityContext"] = json_copy(d.pod_security_context)


def _int_or_percent(value: str) -> int | str:
    text = value.strip()
    if text.isdigit():
        return int(text)
    if text.endswith("%") and text[:-1].isdigit():
        return text
    raise RenderError(
        f"spec.daemonsets.rollingUpdate.maxUnavailable: {value!r} is neither a number "
        "nor a percentage (for example 1 or 25%)"
    )


def apply_host_paths(ds: dict[str, Any], ctx: StateContext) -> None:
    """``hostPaths.rootFS`` and ``hostPaths.driverInstallDir`` rewrite the host volumes."""
    paths = ctx.spec.host_paths
    root = paths.root_fs
    if root and root != "/":
        host_root = volume(ds, "host-root")
        if host_root is not None:
            host_root["hostPath"]["path"] = root
            for c in all_containers(ds):
                set_env(c, "HOST_ROOT", root)
        dev_char = volume(ds, "host-dev-char")
        if dev_char is not None:
            dev_char["hostPath"]["path"] = f"{root.rstrip('/')}/dev/char"
    install_dir = paths.driver_install_dir
    if install_dir and install_dir != DEFAULT_DRIVER_INSTALL_DIR:
        vol = volume(ds, "driver-install-dir")
        if vol is not None:
            vol["hostPath"]["path"] = install_dir
        validation = find(ds, "driver-validation")
        if validation is not None:
            set_env(validation, "DRIVER_INSTALL_DIR", install_dir)
            set_env(validation, "DRIVER_INSTALL_DIR_CTR_PATH", install_dir)
            for m in validation.get("volumeMounts", []):
                if m["name"] == "driver-install-dir":
                    m["mountPath"] = install_dir


def apply_daemonsets_metadata(ds: dict[str, Any], ctx: StateContext) -> None:
    """``spec.daemonsets.labels``/``annotations`` on the DaemonSet and its pods
    (the pod keeps its own ``app`` and ``app.kubernetes.io/part-of``)."""
    d = ctx.spec.daemonsets
    meta = ds["metadata"]
    template_meta = ds["spec"]["template"].setdefault("metadata", {})
    if d.labels:
        meta["labels"] = {**meta.get("labels", {}), **d.labels}
        pod_labels = {k: v for k, v in d.labels.items() if k not in _POD_LABELS_SKIPPED}
        template_meta["labels"] = {**template_meta.get("labels", {}), **pod_labels}
    if d.annotations:
        meta["annotations"] = {**meta.get("annotations", {}), **d.annotations}
        template_meta["annotations"] = {**template_meta.get("annotations", {}), **d.annotations}


# --- per-component settings -----------------------------------------------------------------


def apply_component(
    ds: dict[str, Any],
    comp: ComponentSpec,
    *,
    image: str,
    main: str,
    user_env: bool = True,
    args: bool = True,
) -> dict[str, Any]:
    """Image, pull policy and secrets, resources (every main container), ``args``
    (first container), ``env`` (the main container) and ``hostNetwork``.

    Returns the main container, for the operand's own transform.
    """
    c = find(ds, main)
    if c is None:  # a builder bug, not a user error
        raise KeyError(f"{ds['metadata']['name']} has no container {main}")
    c["image"] = image
    c["imagePullPolicy"] = pull_policy(comp.image_pull_policy)
    add_pull_secrets(ds, comp.image_pull_secrets)
    if comp.resources is not None:
        for main_c in pod_spec(ds)["containers"]:
            main_c["resources"] = dump(comp.resources)
    if args and comp.args:
        pod_spec(ds)["containers"][0]["args"] = list(comp.args)
    if user_env:
        set_user_env(c, comp.env)
    apply_host_network(ds, comp.host_network)
    return c


def apply_host_network(ds: dict[str, Any], host_network: bool | None) -> None:
    """``hostNetwork: true`` comes with ``dnsPolicy: ClusterFirstWithHostNet``."""
    if host_network:
        pod = pod_spec(ds)
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"


def apply_validation_inits(ds: dict[str, Any], ctx: StateContext) -> None:
    """Every init container with ``validation`` in its name runs the validator image."""
    validator = ctx.spec.validator
    inits = [c for c in pod_spec(ds).get("initContainers", []) if "validation" in c["name"]]
    if not inits:
        return
    image = image_path(validator, ctx.facts.operator_env, "validator")
    for c in inits:
        c["image"] = image
        if validator.image_pull_policy:
            c["imagePullPolicy"] = pull_policy(validator.image_pull_policy)
        if validator.resources is not None:
            c["resources"] = dump(validator.resources)
        c.setdefault("securityContext", {})["runAsUser"] = 0
        if c["name"].startswith("driver") and validator.driver is not None:
            set_user_env(c, validator.driver.env)
        if c["name"].startswith("toolkit") and validator.toolkit is not None:
            set_user_env(c, validator.toolkit.env)
    add_pull_secrets(ds, validator.image_pull_secrets)


def runtime_class_applies(ctx: StateContext) -> bool:
    """runtimeClassName is set unless the NRI plugin injects GPUs, or CDI is off on cri-o."""
    cdi = ctx.spec.cdi
    if cdi.nri_plugin_enabled:
        return False
    return not (not cdi.enabled and ctx.facts.container_runtime == RUNTIME_CRIO)


def apply_runtime_class(ds: dict[str, Any], ctx: StateContext) -> None:
    """``runtimeClassName: <operator.runtimeClass>`` on a GPU-using operand pod."""
    if runtime_class_applies(ctx):
        pod_spec(ds)["runtimeClassName"] = ctx.runtime_class


def apply_nri_annotation(ds: dict[str, Any], ctx: StateContext, container_name: str) -> None:
    """With the NRI plugin, the pod asks for every GPU by annotation instead."""
    if ctx.spec.cdi.nri_plugin_enabled:
        set_pod_annotation(ds, NRI_ANNOTATION_PREFIX + container_name, NRI_ANNOTATION_VALUE)


def apply_mig_env(c: dict[str, Any], ctx: StateContext) -> None:
    """``MIG_STRATEGY`` and ``NVIDIA_MIG_MONITOR_DEVICES`` from ``spec.mig.strategy``."""
    strategy = ctx.spec.mig.strategy
    if not strategy:
        set_env(c, "NVIDIA_MIG_MONITOR_DEVICES", "all")
        return
    set_env(c, "MIG_STRATEGY", strategy)
    if strategy != "none":
        set_env(c, "NVIDIA_MIG_MONITOR_DEVICES", "all")


def apply_cdi_hook_env(c: dict[str, Any], ctx: StateContext) -> None:
    """``CDI_ENABLED`` (+ ``NVIDIA_CDI_HOOK_PATH`` when the toolkit installs the hook)."""
    if not ctx.spec.cdi.enabled:
        return
    set_env(c, "CDI_ENABLED", "true")
    if ctx.spec.toolkit.is_enabled():
        set_env(
            c, "NVIDIA_CDI_HOOK_PATH", f"{ctx.spec.toolkit.install_dir}/toolkit/nvidia-cdi-hook"
        )


# --- device-plugin configuration (device plugin, MPS control daemon, GFD) --------------------

CONFIG_MANAGER = "config-manager"
CONFIG_MANAGER_INIT = "config-manager-init"
CONFIG_MANAGER_MOUNT = "config"


def config_manager(*, init: bool, process_to_signal: str) -> dict[str, Any]:
    """The config-manager container (init: one shot; sidecar: signals on change)."""
    return container(
        CONFIG_MANAGER_INIT if init else CONFIG_MANAGER,
        command=["config-manager"],
        env_vars=[
            env("ONESHOT", "true" if init else "false"),
            env("KUBECONFIG", ""),
            field_env("NODE_NAME", "spec.nodeName"),
            env("NODE_LABEL", "nvidia.com/device-plugin.config"),
            env("CONFIG_FILE_SRCDIR", "/available-configs"),
            env("CONFIG_FILE_DST", "/config/config.yaml"),
            env("DEFAULT_CONFIG", ""),
            env("FALLBACK_STRATEGIES", "empty"),
            env("SEND_SIGNAL", "false" if init else "true"),
            env("SIGNAL", "" if init else "1"),
            env("PROCESS_TO_SIGNAL", "" if init else process_to_signal),
        ],
        security_context=None if init else PRIV,
    )


def apply_device_plugin_config(
    ds: dict[str, Any],
    ctx: StateContext,
    *,
    main: Sequence[str],
    init_resources: ResourceRequirements | None = None,
) -> None:
    """With ``devicePlugin.config.name``: the config manager init and sidecar read the
    ConfigMap and the ``main`` containers read ``/config/config.yaml``; without it
    both config-manager containers are removed. ``init_resources`` (GFD's) win over
    the device plugin's resources on the init container."""
    plugin = ctx.spec.device_plugin
    cfg = plugin.config
    if cfg is None or not cfg.name:
        remove_containers(ds, CONFIG_MANAGER_INIT, CONFIG_MANAGER)
        return
    mounts = [mount(CONFIG_MANAGER_MOUNT, "/config"), mount(cfg.name, "/available-configs")]
    for name in main:
        c = find(ds, name)
        if c is not None:
            set_env(c, "CONFIG_FILE", "/config/config.yaml")
            c.setdefault("volumeMounts", []).extend(dict(m) for m in mounts)
    pod = pod_spec(ds)
    if not pod.get("hostPID"):
        pod["shareProcessNamespace"] = True
    pod.setdefault("volumes", []).extend(
        [
            {"name": cfg.name, "configMap": {"name": cfg.name}},
            {"name": CONFIG_MANAGER_MOUNT, "emptyDir": {}},
        ]
    )
    image = image_path(plugin, ctx.facts.operator_env, "devicePlugin")
    for name in (CONFIG_MANAGER_INIT, CONFIG_MANAGER):
        c = find(ds, name)
        if c is None:
            continue
        c["image"] = image
        if plugin.image_pull_policy:
            c["imagePullPolicy"] = pull_policy(plugin.image_pull_policy)
        set_env(c, "DEFAULT_CONFIG", cfg.default or "")
        set_env(c, "FALLBACK_STRATEGIES", "empty")
        c.setdefault("volumeMounts", []).extend(dict(m) for m in mounts)
    init = find(ds, CONFIG_MANAGER_INIT)
    resources = init_resources or plugin.resources
    if init is not None and resources is not None:
        init["resources"] = dump(resources)


def finish(ds: dict[str, Any], ctx: StateContext) -> dict[str, Any]:
    """The steps every DaemonSet shares, around its own transform: call with the
    asset-shaped DaemonSet after the operand transform has run."""
    apply_validation_inits(ds, ctx)
    apply_daemonsets_metadata(ds, ctx)
    return ds


def prepare(ds: dict[str, Any], ctx: StateContext) -> dict[str, Any]:
    """NVIDIA's ``preProcessDaemonSet`` (before the operand transform)."""
    apply_daemonsets_spec(ds, ctx)
    apply_host_paths(ds, ctx)
    return ds
