"""State ``state-kata-device-plugin``: the Kata sandbox device plugin, which
advertises passthrough GPUs to Kata confidential containers (sandbox mode
``kata``).
"""

from __future__ import annotations

from typing import Any

from platforms.gpu import transforms as t
from platforms.gpu.common import (
    DOC,
    PRIV,
    container,
    daemonset,
    field_env,
    host_path,
    mount,
    rbac,
)
from platforms.gpu.context import StateContext
from platforms.gpu.images import image_path
from platforms.gpu.state_sandbox_device_plugin import cluster_role_rules, role_rules, workload_wait

NAME = "nvidia-kata-sandbox-device-plugin"
DAEMONSET = "nvidia-kata-sandbox-device-plugin-daemonset"
MAIN = "nvidia-kata-sandbox-device-plugin-ctr"


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC and the Kata device plugin DaemonSet."""
    out = rbac(ctx, NAME, role_rules(), cluster_role_rules())
    ds = t.prepare(_asset(), ctx)
    plugin = ctx.spec.kata_sandbox_device_plugin
    image = image_path(plugin, ctx.facts.operator_env, "kataSandboxDevicePlugin")
    t.apply_component(ds, plugin, image=image, main=MAIN)
    out.append(t.finish(ds, ctx))
    return out


def _asset() -> dict[str, Any]:
    main = container(
        MAIN,
        env_vars=[
            field_env("NODE_NAME", "spec.nodeName"),
            field_env("POD_NAMESPACE", "metadata.namespace"),
            field_env("POD_SERVICE_ACCOUNT", "spec.serviceAccountName"),
        ],
        security_context=PRIV,
        mounts=[
            mount("device-plugin", "/var/lib/kubelet/device-plugins"),
            mount("cdi-root", "/var/run/cdi"),
        ],
    )
    return daemonset(
        DAEMONSET,
        component="kata-sandbox-device-plugin",
        annotations={"openshift.io/scc": NAME},
        service_account=NAME,
        init_containers=[
            workload_wait(
                "vfio-pci-validation",
                "vm-passthrough",
                "vfio-pci-ready",
                skipped="kata",
                waiting="waiting for vfio-pci driver ...",
            )
        ],
        containers=[main],
        volumes=[
            host_path("device-plugin", "/var/lib/kubelet/device-plugins"),
            host_path("run-nvidia-validations", "/run/nvidia/validations", DOC),
            host_path("cdi-root", "/var/run/cdi", DOC),
        ],
    )
