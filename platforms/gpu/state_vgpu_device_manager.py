"""State ``state-vgpu-device-manager``: creates the vGPU devices a node's
``nvidia.com/vgpu.config`` label names, once the vGPU manager (or a host vGPU
driver) is ready. Ships NVIDIA's default configurations (``vgpu_configs``: one per
vGPU type, and ``default`` by GPU model) unless another ConfigMap is named.
"""

from __future__ import annotations

from typing import Any

from manifests import configmap
from manifests.meta import object_meta
from platforms.gpu import transforms as t
from platforms.gpu.common import (
    BIDIR,
    DIR,
    DOC,
    HTOC,
    PRIV,
    cluster_versions_rule,
    config_map_volume,
    container,
    daemonset,
    env,
    field_env,
    host_path,
    mount,
    policy_rule,
    rbac,
    scc_privileged,
)
from platforms.gpu.context import StateContext
from platforms.gpu.images import image_path
from platforms.gpu.vgpu_configs import config_yaml

NAME = "nvidia-vgpu-device-manager"
DEFAULT_CONFIG = "default-vgpu-devices-config"
WAIT_SCRIPT = (
    "until [ -f /run/nvidia/validations/vgpu-manager-ready ] || "
    "[ -f /run/nvidia/validations/host-vgpu-manager-ready ]; do "
    "echo waiting for NVIDIA vGPU Manager to be setup; sleep 5; done"
)


def config_name(ctx: StateContext) -> str:
    """The vGPU devices ConfigMap the manager reads."""
    cfg = ctx.spec.vgpu_device_manager.config
    return (cfg.name if cfg is not None and cfg.name else "") or DEFAULT_CONFIG


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC, the default configuration (unless custom) and the DaemonSet."""
    out = rbac(
        ctx,
        NAME,
        [scc_privileged(), policy_rule([""], ["pods"], ["get", "list", "watch"])],
        [
            cluster_versions_rule(),
            policy_rule([""], ["nodes"], ["get", "list", "watch", "update"]),
        ],
    )
    if config_name(ctx) == DEFAULT_CONFIG:
        out.append(configmap.build(object_meta(DEFAULT_CONFIG), {"config.yaml": config_yaml()}))
    ds = t.prepare(_asset(ctx), ctx)
    manager = ctx.spec.vgpu_device_manager
    image = image_path(manager, ctx.facts.operator_env, "vgpuDeviceManager")
    c = t.apply_component(ds, manager, image=image, main=NAME, user_env=False)
    cfg = manager.config
    t.set_env(c, "DEFAULT_VGPU_CONFIG", (cfg.default if cfg is not None else "") or "default")
    t.set_user_env(c, manager.env)
    out.append(t.finish(ds, ctx))
    return out


def _asset(ctx: StateContext) -> dict[str, Any]:
    wait = container(
        "vgpu-manager-validation",
        command=["sh", "-c"],
        args=[WAIT_SCRIPT],
        security_context=PRIV,
        mounts=[mount("run-nvidia-validations", "/run/nvidia/validations", propagation=BIDIR)],
    )
    main = container(
        NAME,
        env_vars=[
            field_env("NAMESPACE", "metadata.namespace"),
            field_env("NODE_NAME", "spec.nodeName"),
            env("CONFIG_FILE", "/vgpu-config/config.yaml"),
            env("DEFAULT_VGPU_CONFIG", "default"),
        ],
        security_context=PRIV,
        # NVIDIA's: host and driver roots with HostToContainer propagation, so driver
        # mounts made after the pod started are seen.
        mounts=[
            mount("vgpu-config", "/vgpu-config"),
            mount("host-sys", "/sys"),
            mount("host-root", "/host", propagation=HTOC),
            mount("driver-install-dir", "/driver-root", propagation=HTOC),
        ],
    )
    return daemonset(
        NAME,
        component="vgpu-device-manager",
        annotations={"openshift.io/scc": NAME},
        service_account=NAME,
        init_containers=[wait],
        containers=[main],
        volumes=[
            config_map_volume("vgpu-config", config_name(ctx)),
            host_path("host-sys", "/sys", DIR),
            host_path("host-root", "/"),
            host_path("driver-install-dir", "/run/nvidia/driver", DOC),
            host_path("run-nvidia-validations", "/run/nvidia/validations", DOC),
        ],
    )
