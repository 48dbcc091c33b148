"""State ``state-vfio-manager``: binds every NVIDIA GPU of a ``vm-passthrough`` node
to ``vfio-pci`` (and unbinds them when the pod stops), after a driver-manager
init container has unloaded any NVIDIA driver.
"""

from __future__ import annotations

from typing import Any

from platforms.gpu import transforms as t
from platforms.gpu.common import (
    BIDIR,
    DIR,
    DOC,
    HTOC,
    PRIV_S0,
    container,
    daemonset,
    env,
    host_path,
    mount,
    rbac,
    scc_privileged,
)
from platforms.gpu.context import StateContext
from platforms.gpu.images import image_path
from platforms.gpu.state_vgpu_manager import (
    apply_driver_manager,
    driver_manager,
    driver_manager_rules,
)

NAME = "nvidia-vfio-manager"
RESOURCES = {"limits": {"memory": "200Mi"}, "requests": {"cpu": "100m", "memory": "200Mi"}}


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC and the VFIO manager DaemonSet."""
    out = rbac(ctx, NAME, [scc_privileged()], driver_manager_rules())
    ds = t.prepare(_asset(), ctx)
    manager = ctx.spec.vfio_manager
    image = image_path(manager, ctx.facts.operator_env, "vfioManager")
    t.apply_component(ds, manager, image=image, main=NAME)
    apply_driver_manager(ds, ctx, manager.driver_manager, "vfioManager.driverManager")
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
        NAME,
        command=["/bin/sh", "-c"],
        args=["vfio-manage bind --all && while true; do sleep 86400; done"],
        env_vars=[env("HOST_ROOT", "/host")],
        security_context=PRIV_S0,
        resources={k: dict(v) for k, v in RESOURCES.items()},
        # NVIDIA's: the host root read-write (vfio-manage binds devices through it).
        mounts=[
            mount("host-sys", "/sys"),
            mount("host-lib-modules", "/lib/modules", read_only=True),
            mount("host-root", "/host"),
        ],
        lifecycle={"preStop": {"exec": {"command": ["/bin/sh", "-c", "vfio-manage unbind --all"]}}},
    )
    return daemonset(
        NAME,
        component="vfio-manager",
        labels={"app": NAME},
        selector={"name": NAME},
        service_account=NAME,
        terminationGracePeriodSeconds=30,
        init_containers=[init],
        containers=[main],
        volumes=[
            host_path("host-sys", "/sys", DIR),
            host_path("host-lib-modules", "/lib/modules", DIR),
            host_path("run-nvidia", "/run/nvidia", DOC),
            host_path("host-root", "/"),
        ],
    )
