"""State ``state-device-plugin``: the NVIDIA device plugin DaemonSet, which makes
each node advertise ``nvidia.com/gpu`` (or MIG devices) once the toolkit is
validated. With ``devicePlugin.config.name`` a config manager picks the node's
configuration (label ``nvidia.com/device-plugin.config``) from that ConfigMap.
"""

from __future__ import annotations

from typing import Any

from manifests import configmap
from manifests.meta import object_meta
from platforms.gpu import transforms as t
from platforms.gpu.common import (
    DOC,
    HTOC,
    PRIV,
    SOURCE_DRIVER_READY,
    config_map_volume,
    container,
    daemonset,
    env,
    host_path,
    mount,
    policy_rule,
    rbac,
    scc_privileged,
    wait_for_file,
)
from platforms.gpu.context import StateContext
from platforms.gpu.images import image_path

NAME = "nvidia-device-plugin"
DAEMONSET = "nvidia-device-plugin-daemonset"
ENTRYPOINT = "nvidia-device-plugin-entrypoint"
DEFAULT_MPS_ROOT = "/run/nvidia/mps"

ENTRYPOINT_SCRIPT = (
    """#!/bin/sh
# Wait until the driver is validated on this node and take what the validation
# reports, then switch on the features whose kernel modules are loaded (GDRCopy:
# gdrdrv; GPUDirect Storage, with MOFED: nvidia_fs) unless already set.
"""
    + SOURCE_DRIVER_READY
    + """set +a
loaded() { grep -q "^$1 " /proc/modules; }
if loaded gdrdrv && [ -z "${GDRCOPY_ENABLED}" ]; then
  export GDRCOPY_ENABLED=true
  echo "GDRCOPY_ENABLED=true"
fi
if loaded nvidia_fs; then
  if [ -z "${GDS_ENABLED}" ]; then
    export GDS_ENABLED=true
    echo "GDS_ENABLED=true"
  fi
  if [ -z "${MOFED_ENABLED}" ]; then
    export MOFED_ENABLED=true
    echo "MOFED_ENABLED=true"
  fi
fi
echo "Starting nvidia-device-plugin"
exec nvidia-device-plugin
"""
)


def node_rules() -> list[dict[str, Any]]:
    """The ClusterRole of the device plugin, its MPS control daemon and GFD: read nodes."""
    return [policy_rule([""], ["nodes"], ["get", "list", "watch"])]


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC, the entrypoint ConfigMap and the device plugin DaemonSet."""
    out = rbac(ctx, NAME, [scc_privileged()], node_rules())
    out.append(
        configmap.build(
            object_meta(ENTRYPOINT, labels={"app": DAEMONSET}), {"entrypoint.sh": ENTRYPOINT_SCRIPT}
        )
    )
    ds = t.prepare(_asset(), ctx)
    transform(ds, ctx)
    out.append(t.finish(ds, ctx))
    return out


def _asset() -> dict[str, Any]:
    main = container(
        NAME,
        command=["/bin/sh", "-c"],
        args=["/bin/entrypoint.sh"],
        env_vars=[
            env("PASS_DEVICE_SPECS", "true"),
            env("FAIL_ON_INIT_ERROR", "true"),
            env("DEVICE_LIST_STRATEGY", "envvar"),
            env("DEVICE_ID_STRATEGY", "uuid"),
            env("NVIDIA_VISIBLE_DEVICES", "all"),
            env("NVIDIA_DRIVER_CAPABILITIES", "all"),
            env("MPS_ROOT", DEFAULT_MPS_ROOT),
        ],
        security_context=PRIV,
        mounts=[
            mount(ENTRYPOINT, "/bin/entrypoint.sh", read_only=True, sub_path="entrypoint.sh"),
            mount("device-plugin", "/var/lib/kubelet/device-plugins"),
            mount("run-nvidia-validations", "/run/nvidia/validations"),
            mount("driver-install-dir", "/driver-root", propagation=HTOC),
            mount("host-root", "/host", read_only=True, propagation=HTOC),
            mount("cdi-root", "/var/run/cdi"),
            mount("mps-shm", "/dev/shm"),
            mount("mps-root", "/mps"),
        ],
    )
    return daemonset(
        DAEMONSET,
        component="device-plugin",
        annotations={"openshift.io/scc": "hostmount-anyuid"},
        service_account=NAME,
        init_containers=[
            wait_for_file(
                "toolkit-validation",
                "toolkit-ready",
                volume="run-nvidia-validations",
                mount_path="/run/nvidia/validations",
            ),
            t.config_manager(init=True, process_to_signal=""),
        ],
        containers=[main, t.config_manager(init=False, process_to_signal="nvidia-device-plugin")],
        volumes=[
            config_map_volume(ENTRYPOINT, ENTRYPOINT, mode=0o700),
            host_path("device-plugin", "/var/lib/kubelet/device-plugins"),
            host_path("run-nvidia-validations", "/run/nvidia/validations", DOC),
            host_path("driver-install-dir", "/run/nvidia/driver", DOC),
            host_path("host-root", "/"),
            host_path("cdi-root", "/var/run/cdi", DOC),
            host_path("mps-root", DEFAULT_MPS_ROOT, DOC),
            host_path("mps-shm", f"{DEFAULT_MPS_ROOT}/shm"),
        ],
    )


def apply_mps_root(ds: dict[str, Any], ctx: StateContext) -> str | None:
    """A custom ``devicePlugin.mps.root`` moves the MPS volumes; returns it (None: default)."""
    mps = ctx.spec.device_plugin.mps
    if mps is None or not mps.root or mps.root == DEFAULT_MPS_ROOT:
        return None
    for name, path in (("mps-root", mps.root), ("mps-shm", f"{mps.root}/shm")):
        vol = t.volume(ds, name)
        if vol is not None:
            vol["hostPath"]["path"] = path
    return mps.root


def transform(ds: dict[str, Any], ctx: StateContext) -> None:
    """NVIDIA's ``TransformDevicePlugin``; the user's ``devicePlugin.env`` wins last."""
    plugin = ctx.spec.device_plugin
    image = image_path(plugin, ctx.facts.operator_env, "devicePlugin")
    c = t.apply_component(ds, plugin, image=image, main=NAME, user_env=False)
    if ctx.spec.gds is not None and ctx.spec.gds.is_enabled():
        t.set_env(c, "GDS_ENABLED", "true")
        t.set_env(c, "MOFED_ENABLED", "true")
    if ctx.spec.gdrcopy is not None and ctx.spec.gdrcopy.is_enabled():
        t.set_env(c, "GDRCOPY_ENABLED", "true")
    t.apply_mig_env(c, ctx)
    if ctx.spec.cdi.enabled:
        t.set_env(c, "CDI_ENABLED", "true")
        t.set_env(c, "DEVICE_LIST_STRATEGY", "cdi-annotations,cdi-cri")
        t.set_env(c, "CDI_ANNOTATION_PREFIX", "cdi.k8s.io/")
        t.apply_cdi_hook_env(c, ctx)
    root = apply_mps_root(ds, ctx)
    if root is not None:
        t.set_env(c, "MPS_ROOT", root)
    t.apply_device_plugin_config(ds, ctx, main=[NAME])
    t.apply_runtime_class(ds, ctx)
    t.apply_nri_annotation(ds, ctx, NAME)
    t.set_user_env(c, plugin.env)
