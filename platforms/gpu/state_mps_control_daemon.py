"""State ``state-mps-control-daemon``: the MPS control daemon, on the nodes where the
device plugin shares GPUs through MPS (``nvidia.com/mps.capable=true``). Its
pods use the device plugin's ServiceAccount.
"""

from __future__ import annotations

from typing import Any

from platforms.gpu import transforms as t
from platforms.gpu.common import (
    BIDIR,
    DIR,
    DOC,
    PRIV,
    container,
    daemonset,
    env,
    field_env,
    host_path,
    mount,
    rbac,
    scc_privileged,
    wait_for_file,
)
from platforms.gpu.context import StateContext
from platforms.gpu.images import image_path, pull_policy
from platforms.gpu.state_device_plugin import DEFAULT_MPS_ROOT, apply_mps_root, node_rules

NAME = "nvidia-device-plugin-mps-control-daemon"
MAIN = "mps-control-daemon-ctr"
MOUNTS_INIT = "mps-control-daemon-mounts"
MPS_CAPABLE = "nvidia.com/mps.capable"


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC and the MPS control daemon DaemonSet."""
    out = rbac(ctx, NAME, [scc_privileged()], node_rules())
    ds = t.prepare(_asset(), ctx)
    transform(ds, ctx)
    out.append(t.finish(ds, ctx))
    return out


def _asset() -> dict[str, Any]:
    mounts_init = container(
        MOUNTS_INIT,
        command=["mps-control-daemon", "mount-shm"],
        security_context=PRIV,
        mounts=[mount("mps-root", "/mps", propagation=BIDIR)],
    )
    main = container(
        MAIN,
        command=["mps-control-daemon"],
        env_vars=[
            field_env("NODE_NAME", "spec.nodeName"),
            env("NVIDIA_VISIBLE_DEVICES", "all"),
            env("NVIDIA_DRIVER_CAPABILITIES", "compute,utility"),
        ],
        security_context=PRIV,
        mounts=[mount("mps-shm", "/dev/shm"), mount("mps-root", "/mps")],
    )
    return daemonset(
        NAME,
        component="device-plugin",
        extra_node_selector={MPS_CAPABLE: "true"},
        annotations={"openshift.io/scc": "hostmount-anyuid"},
        service_account="nvidia-device-plugin",
        host_pid=True,
        init_containers=[
            wait_for_file("toolkit-validation", "toolkit-ready"),
            mounts_init,
            t.config_manager(init=True, process_to_signal=""),
        ],
        containers=[
            main,
            t.config_manager(init=False, process_to_signal="/usr/bin/mps-control-daemon"),
        ],
        volumes=[
            host_path("run-nvidia", "/run/nvidia", DIR),
            host_path("mps-root", DEFAULT_MPS_ROOT, DOC),
            host_path("mps-shm", f"{DEFAULT_MPS_ROOT}/shm"),
        ],
    )


def transform(ds: dict[str, Any], ctx: StateContext) -> None:
    """NVIDIA's ``TransformMPSControlDaemon``: the device plugin's image, pull
    settings and resources; MIG env; no devicePlugin env or args."""
    plugin = ctx.spec.device_plugin
    image = image_path(plugin, ctx.facts.operator_env, "devicePlugin")
    c = t.apply_component(ds, plugin, image=image, main=MAIN, user_env=False, args=False)
    init = t.find(ds, MOUNTS_INIT)
    assert init is not None
    init["image"] = image
    init["imagePullPolicy"] = pull_policy(plugin.image_pull_policy)
    if plugin.resources is not None:
        init["resources"] = t.dump(plugin.resources)
    t.apply_mig_env(c, ctx)
    apply_mps_root(ds, ctx)
    t.apply_device_plugin_config(ds, ctx, main=[MAIN])
    t.apply_runtime_class(ds, ctx)
    t.apply_nri_annotation(ds, ctx, MAIN)
