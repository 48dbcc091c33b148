"""State ``state-sandbox-device-plugin``: the KubeVirt GPU device plugin, which
advertises passthrough GPUs and vGPUs to virtual machines once the node's
workload type (``vm-passthrough`` or ``vm-vgpu``) is validated.
"""

from __future__ import annotations

from typing import Any

from platforms.gpu import transforms as t
from platforms.gpu.common import (
    DOC,
    HTOC,
    PRIV,
    cluster_versions_rule,
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

NAME = "nvidia-sandbox-device-plugin"
DAEMONSET = "nvidia-sandbox-device-plugin-daemonset"
MAIN = "nvidia-sandbox-device-plugin-ctr"


def workload_wait(
    name: str, workload: str, ready_file: str, *, skipped: str, waiting: str
) -> dict[str, Any]:
    """An init container that waits for ``ready_file`` only on ``workload`` nodes (NVIDIA's
    command string, its messages ``<skipped> not needed...`` and ``waiting``)."""
    base = "/run/nvidia/validations"
    script = (
        f"until [ -f {base}/workload-type ]; do echo waiting for workload type status file; "
        "sleep 5; done; "
        f'if [ "$(cat {base}/workload-type)" != "{workload}" ]; then '
        f"echo {skipped} not needed, skipping validation; exit 0; fi; "
        f"until [ -f {base}/{ready_file} ]; do echo {waiting}; sleep 5; done;"
    )
    return container(
        name,
        command=["sh", "-c"],
        args=[script],
        env_vars=[env("NVIDIA_VISIBLE_DEVICES", "void")],
        security_context=PRIV,
        mounts=[mount("run-nvidia-validations", base, propagation=HTOC)],
    )


def role_rules() -> list[dict[str, Any]]:
    """NVIDIA's Role of the sandbox (and kata) device plugins: the SCC, pods, NodeFeatures."""
    return [
        scc_privileged(),
        policy_rule([""], ["pods"], ["create", "get", "list", "watch", "delete"]),
        policy_rule(
            ["nfd.k8s-sigs.io"], ["nodefeatures"], ["create", "get", "list", "watch", "update"]
        ),
    ]


def cluster_role_rules() -> list[dict[str, Any]]:
    """NVIDIA's ClusterRole of the sandbox (and kata) device plugins."""
    return [cluster_versions_rule(), policy_rule([""], ["nodes", "pods"], ["get"])]


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC and the sandbox device plugin DaemonSet."""
    out = rbac(ctx, NAME, role_rules(), cluster_role_rules())
    ds = t.prepare(_asset(), ctx)
    plugin = ctx.spec.sandbox_device_plugin
    image = image_path(plugin, ctx.facts.operator_env, "sandboxDevicePlugin")
    t.apply_component(ds, plugin, image=image, main=MAIN)
    out.append(t.finish(ds, ctx))
    return out


def _asset() -> dict[str, Any]:
    main = container(
        MAIN,
        env_vars=[
            field_env("NODE_NAME", "spec.nodeName"),
            field_env("POD_NAMESPACE", "metadata.namespace"),
        ],
        security_context=PRIV,
        mounts=[
            mount("device-plugin", "/var/lib/kubelet/device-plugins"),
            mount("vfio", "/dev/vfio"),
            mount("cdi-root", "/var/run/cdi"),
        ],
    )
    return daemonset(
        DAEMONSET,
        component="sandbox-device-plugin",
        annotations={"openshift.io/scc": NAME},
        service_account=NAME,
        init_containers=[
            workload_wait(
                "vfio-pci-validation",
                "vm-passthrough",
                "vfio-pci-ready",
                skipped="vfio-pci",
                waiting="waiting for vfio-pci driver ...",
            ),
            workload_wait(
                "vgpu-devices-validation",
                "vm-vgpu",
                "vgpu-devices-ready",
                skipped="vgpu-devices",
                waiting="waiting for vGPU devices...",
            ),
        ],
        containers=[main],
        volumes=[
            host_path("device-plugin", "/var/lib/kubelet/device-plugins"),
            host_path("run-nvidia-validations", "/run/nvidia/validations", DOC),
            host_path("vfio", "/dev/vfio"),
            host_path("cdi-root", "/var/run/cdi", DOC),
        ],
    )
