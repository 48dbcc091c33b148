"""State ``state-vgpu-manager``: the vGPU host driver (sandbox workloads, nodes
configured for ``vm-vgpu``), installed like the container driver: a
driver-manager init container, then ``nvidia-driver init`` from the
``vgpuManager`` image tagged for the node OS. Off when NVIDIADriver objects own
the drivers.
"""

from __future__ import annotations

from typing import Any

from api.nvidia.v1.clusterpolicy import DriverManagerSpec
from platforms.gpu import transforms as t
from platforms.gpu.common import (
    BIDIR,
    DIR,
    DOC,
    HTOC,
    PRIV,
    PRIV_S0,
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
from platforms.gpu.images import driver_image, image_path, pull_policy
from platforms.gpu.state_driver import config_map_files, require_os

NAME = "nvidia-vgpu-manager"
DAEMONSET = "nvidia-vgpu-manager-daemonset"
MAIN = "nvidia-vgpu-manager-ctr"
MANAGER = "k8s-driver-manager"


def driver_manager_rules() -> list[dict[str, Any]]:
    """The ClusterRole of an operand with a k8s-driver-manager init container (the VFIO
    manager's; the vGPU manager's adds DaemonSet get): the OpenShift version, nodes
    labelled and cordoned, GPU pods found and evicted. Their Role is the SCC only."""
    return [
        cluster_versions_rule(),
        policy_rule([""], ["nodes"], ["get", "list", "patch", "watch"]),
        policy_rule([""], ["pods"], ["get", "list", "watch"]),
        policy_rule([""], ["pods/eviction"], ["create"]),
    ]


def driver_manager(mounts: list[dict[str, Any]]) -> dict[str, Any]:
    """The k8s-driver-manager init container of the sandbox operands (no eviction, no drain)."""
    return container(
        MANAGER,
        command=["driver-manager"],
        args=["uninstall_driver"],
        env_vars=[
            field_env("NODE_NAME", "spec.nodeName"),
            env("NVIDIA_VISIBLE_DEVICES", "void"),
            env("ENABLE_GPU_POD_EVICTION", "false"),
            env("ENABLE_AUTO_DRAIN", "false"),
            field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
        ],
        security_context=PRIV,
        mounts=mounts,
    )


def apply_driver_manager(
    ds: dict[str, Any], ctx: StateContext, spec: DriverManagerSpec | None, field: str
) -> None:
    """Image, pull policy, secrets and env of the driver-manager init container."""
    c = t.find(ds, MANAGER)
    assert c is not None
    spec = spec or DriverManagerSpec()
    c["image"] = image_path(spec, ctx.facts.operator_env, field)
    c["imagePullPolicy"] = pull_policy(spec.image_pull_policy)
    t.add_pull_secrets(ds, spec.image_pull_secrets)
    t.set_user_env(c, spec.env)


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC and the vGPU manager DaemonSet (once there is a GPU node to tag the image for)."""
    cluster_rules = [*driver_manager_rules(), policy_rule(["apps"], ["daemonsets"], ["get"])]
    out = rbac(ctx, NAME, [scc_privileged()], cluster_rules)
    if not ctx.facts.nodes:
        return out
    ds = t.prepare(_asset(), ctx)
    transform(ds, ctx)
    out.append(t.finish(ds, ctx))
    return out


def _asset() -> dict[str, Any]:
    init = driver_manager(
        [
            mount("run-nvidia", "/run/nvidia", propagation=BIDIR),
            mount("host-root", "/host", read_only=True, propagation=HTOC),
            mount("host-sys", "/sys"),
        ]
    )
    main = container(
        MAIN,
        command=["nvidia-driver"],
        args=["init"],
        security_context=PRIV_S0,
        mounts=[
            mount("run-nvidia", "/run/nvidia", propagation=BIDIR),
            mount("var-log", "/var/log"),
            mount("dev-log", "/dev/log"),
            mount("host-os-release", "/host-etc/os-release", read_only=True),
            mount("cgroup", "/sys/fs/cgroup"),
            mount("vfio", "/dev/vfio"),
            mount("host-root", "/host", read_only=True, propagation=HTOC),
            mount("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
            mount("nv-firmware", "/lib/firmware"),
        ],
    )
    return daemonset(
        DAEMONSET,
        component="vgpu-manager",
        annotations={"openshift.io/scc": NAME},
        pod_annotations={"kubectl.kubernetes.io/default-container": MAIN},
        service_account=NAME,
        host_pid=True,
        host_ipc=True,
        terminationGracePeriodSeconds=120,
        init_containers=[init],
        containers=[main],
        volumes=[
            host_path("run-nvidia", "/run/nvidia", DOC),
            host_path("host-os-release", "/etc/os-release"),
            host_path("cgroup", "/sys/fs/cgroup", DIR),
            host_path("vfio", "/dev/vfio", DIR),
            host_path("host-root", "/"),
            host_path("host-sys", "/sys", DIR),
            host_path("var-log", "/var/log", DIR),
            host_path("dev-log", "/dev/log"),
            host_path("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
            host_path("nv-firmware", "/run/nvidia/driver/lib/firmware", DOC),
        ],
    )


def transform(ds: dict[str, Any], ctx: StateContext) -> None:
    """NVIDIA's ``TransformVGPUManager``."""
    manager = ctx.spec.vgpu_manager
    node = ctx.facts.nodes[0]
    require_os(node)
    image = driver_image(manager, ctx.facts.operator_env, "vgpuManager", os_tag=node.os_tag)
    c = t.apply_component(ds, manager, image=image, main=MAIN, user_env=False)
    apply_driver_manager(ds, ctx, manager.driver_manager, "vgpuManager.driverManager")
    if ctx.facts.openshift is not None:
        t.set_env(c, "OPENSHIFT_VERSION", ctx.facts.openshift)
    t.set_user_env(c, manager.env)
    cfg = manager.kernel_module_config
    if cfg is not None and cfg.name:
        config_map_files(ds, c, ctx, name=cfg.name, field="vgpuManager.kernelModuleConfig.name")
