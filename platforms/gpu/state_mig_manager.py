"""State ``state-mig-manager``: the MIG manager, which applies the MIG layout a
node's ``nvidia.com/mig.config`` label names (from the mig-parted ConfigMap),
stopping and restarting the GPU clients around the change.

The default ``default-mig-parted-config`` holds every layout NVIDIA ships
(``mig_configs``); naming a ConfigMap in ``migManager.config.name`` mounts that one
as is.
"""

from __future__ import annotations

from typing import Any

from api.nvidia.v1.clusterpolicy import ConfigMapName, MIGPartedConfigSpec
from manifests import configmap
from manifests.meta import object_meta
from platforms.gpu import transforms as t
from platforms.gpu.common import (
    DIR,
    DOC,
    HTOC,
    PRIV,
    SOURCE_DRIVER_READY,
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
    wait_for_file,
)
from platforms.gpu.context import StateContext
from platforms.gpu.images import image_path
from platforms.gpu.mig_configs import config_yaml

NAME = "nvidia-mig-manager"
ENTRYPOINT = "nvidia-mig-manager-entrypoint"
DEFAULT_CONFIG = "default-mig-parted-config"
DEFAULT_CLIENTS = "default-gpu-clients"

ENTRYPOINT_SCRIPT = (
    """#!/bin/sh
# Wait until the driver is validated on this node and take what the validation
# reports (IS_HOST_DRIVER, NVIDIA_DRIVER_ROOT...); stop host GPU clients around a
# MIG change only when the driver is the host's own.
"""
    + SOURCE_DRIVER_READY
    + """WITH_SHUTDOWN_HOST_GPU_CLIENTS="${IS_HOST_DRIVER}"
set +a
echo "WITH_SHUTDOWN_HOST_GPU_CLIENTS=${WITH_SHUTDOWN_HOST_GPU_CLIENTS}"
echo "Starting nvidia-mig-manager"
exec nvidia-mig-manager
"""
)

GPU_CLIENTS = """version: v1
systemd-services:
  - nvsm.service
  - nvsm-mqtt.service
  - nvsm-core.service
  - nvsm-api-gateway.service
  - nvsm-notifier.service
  - nv_peer_mem.service
  - nvidia-dcgm.service
  - dcgm.service
  - dcgm-exporter.service
"""


def _named(cfg: MIGPartedConfigSpec | ConfigMapName | None) -> str:
    return (cfg.name if cfg is not None else None) or ""


def config_name(ctx: StateContext) -> str:
    """The mig-parted ConfigMap the manager mounts: the named one, else the default."""
    return _named(ctx.spec.mig_manager.config) or DEFAULT_CONFIG


def custom_config(ctx: StateContext) -> bool:
    """NVIDIA: any non-empty ``migManager.config.name`` (even the default's name) is a
    custom configuration, read as ``CONFIG_FILE``; an empty name mounts the default
    as ``config-default.yaml``, mig-manager's fallback."""
    return bool(_named(ctx.spec.mig_manager.config))


def clients_name(ctx: StateContext) -> str:
    """The GPU clients ConfigMap the manager reads."""
    return _named(ctx.spec.mig_manager.gpu_clients_config) or DEFAULT_CLIENTS


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC, default ConfigMaps (unless custom ones are named), entrypoint, DaemonSet."""
    out = rbac(
        ctx,
        NAME,
        [
            scc_privileged(),
            policy_rule([""], ["pods"], ["get", "list", "watch", "delete"]),
            policy_rule([""], ["configmaps"], ["create", "get", "list", "update", "patch"]),
        ],
        [
            policy_rule([""], ["nodes"], ["get", "list", "watch", "update", "patch"]),
            policy_rule([""], ["pods"], ["list"]),
        ],
    )
    # The default ConfigMaps are made unless another ConfigMap is named.
    if config_name(ctx) == DEFAULT_CONFIG:
        out.append(configmap.build(object_meta(DEFAULT_CONFIG), {"config.yaml": config_yaml()}))
    if clients_name(ctx) == DEFAULT_CLIENTS:
        out.append(configmap.build(object_meta(DEFAULT_CLIENTS), {"clients.yaml": GPU_CLIENTS}))
    out.append(
        configmap.build(
            object_meta(ENTRYPOINT, labels={"app": NAME}), {"entrypoint.sh": ENTRYPOINT_SCRIPT}
        )
    )
    ds = t.prepare(_asset(ctx), ctx)
    transform(ds, ctx)
    out.append(t.finish(ds, ctx))
    return out


def _asset(ctx: StateContext) -> dict[str, Any]:
    main = container(
        NAME,
        command=["/bin/sh", "-c"],
        args=["/bin/entrypoint.sh"],
        env_vars=[
            field_env("NODE_NAME", "spec.nodeName"),
            field_env("POD_NAME", "metadata.name"),
            field_env("POD_NAMESPACE", "metadata.namespace"),
            env("GPU_CLIENTS_FILE", "/gpu-clients/clients.yaml"),
            field_env("DEFAULT_GPU_CLIENTS_NAMESPACE", "metadata.namespace"),
        ],
        security_context=PRIV,
        mounts=[
            mount(ENTRYPOINT, "/bin/entrypoint.sh", read_only=True, sub_path="entrypoint.sh"),
            mount("run-nvidia-validations", "/run/nvidia/validations"),
            mount("host-sys", "/sys"),
            mount("host-root", "/host", propagation=HTOC),
            mount("gpu-clients", "/gpu-clients"),
            mount("mig-parted-config", "/mig-parted-config"),
            mount("driver-install-dir", "/driver-root", propagation=HTOC),
            mount("cdi-root", "/var/run/cdi"),
        ],
    )
    return daemonset(
        NAME,
        component="mig-manager",
        service_account=NAME,
        host_pid=True,
        host_ipc=True,
        init_containers=[
            wait_for_file(
                "toolkit-validation",
                "toolkit-ready",
                volume="run-nvidia-validations",
                mount_path="/run/nvidia/validations",
                waiting_for="nvidia container toolkit to be setup",
            )
        ],
        containers=[main],
        volumes=[
            config_map_volume(ENTRYPOINT, ENTRYPOINT, mode=0o700),
            host_path("host-sys", "/sys", DIR),
            host_path("run-nvidia-validations", "/run/nvidia/validations", DOC),
            host_path("driver-install-dir", "/run/nvidia/driver", DOC),
            host_path("host-root", "/"),
            config_map_volume("gpu-clients", clients_name(ctx)),
            config_map_volume("mig-parted-config", config_name(ctx)),
            host_path("cdi-root", "/var/run/cdi", DOC),
        ],
    )


def transform(ds: dict[str, Any], ctx: StateContext) -> None:
    """NVIDIA's ``TransformMIGManager``."""
    manager = ctx.spec.mig_manager
    image = image_path(manager, ctx.facts.operator_env, "migManager")
    c = t.apply_component(ds, manager, image=image, main=NAME, user_env=False)
    if custom_config(ctx):
        t.set_env(c, "CONFIG_FILE", "/mig-parted-config/config.yaml")
    else:
        vol = t.volume(ds, "mig-parted-config")
        assert vol is not None
        vol["configMap"]["items"] = [{"key": "config.yaml", "path": "config-default.yaml"}]
        t.set_env(c, "DEFAULT_CONFIG_FILE", "/mig-parted-config/config-default.yaml")
    t.apply_cdi_hook_env(c, ctx)
    t.apply_runtime_class(ds, ctx)
    t.apply_nri_annotation(ds, ctx, NAME)
    t.set_user_env(c, manager.env)
