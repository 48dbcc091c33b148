"""State ``state-sandbox-validation``: ``nvidia-sandbox-validator`` checks, on nodes
running GPU virtual machines, the CC manager, VFIO binding, the vGPU manager and
the vGPU devices, in that order (each waits for the one before).
"""

from __future__ import annotations

from typing import Any

from platforms.gpu import transforms as t
from platforms.gpu.common import (
    BIDIR,
    DOC,
    HTOC,
    PRIV,
    PRIV_S0,
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
from platforms.gpu.images import image_path, pull_policy

NAME = "nvidia-sandbox-validator"
WORKLOADS = ("container", "vm-passthrough", "vm-vgpu")


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC and the sandbox validator DaemonSet."""
    out = rbac(
        ctx,
        NAME,
        [scc_privileged()],
        [policy_rule([""], ["nodes"], ["get"])],
    )
    ds = t.prepare(_asset(), ctx)
    transform(ds, ctx)
    out.append(t.finish(ds, ctx))
    return out


def _validation(component: str) -> dict[str, Any]:
    """A component's validation init container, with NVIDIA's mounts and SELinux level:
    the VFIO and vGPU manager checks look at the host (and the vGPU driver's root)."""
    host_root = mount("host-root", "/host", read_only=True, propagation=HTOC)
    driver = mount("driver-install-path", "/run/nvidia/driver", propagation=HTOC)
    mounts = {"vfio-pci": [host_root], "vgpu-manager": [host_root, driver]}.get(component, [])
    return container(
        f"{component}-validation",
        command=["sh", "-c"],
        args=["nvidia-validator"],
        env_vars=[
            env("WITH_WAIT", "true"),
            env("COMPONENT", component),
            field_env("NODE_NAME", "spec.nodeName"),
        ],
        security_context=PRIV if component == "vgpu-devices" else PRIV_S0,
        mounts=[
            *mounts,
            mount("run-nvidia-validations", "/run/nvidia/validations", propagation=BIDIR),
        ],
    )


def _asset() -> dict[str, Any]:
    main = container(
        NAME,
        command=["sh", "-c"],
        args=["echo all validations are successful; while true; do sleep 86400; done"],
        security_context={**PRIV, "runAsUser": 0},
        mounts=[mount("run-nvidia-validations", "/run/nvidia/validations", propagation=BIDIR)],
        lifecycle={
            "preStop": {"exec": {"command": ["sh", "-c", "rm -f /run/nvidia/validations/*"]}}
        },
    )
    return daemonset(
        NAME,
        component="sandbox-validator",
        labels={"app": NAME, "app.kubernetes.io/part-of": "gpu-operator"},
        service_account=NAME,
        init_containers=[
            _validation(c) for c in ("cc-manager", "vfio-pci", "vgpu-manager", "vgpu-devices")
        ],
        containers=[main],
        volumes=[
            host_path("run-nvidia-validations", "/run/nvidia/validations", DOC),
            host_path("driver-install-path", "/run/nvidia/driver"),
            host_path("host-root", "/"),
        ],
    )


def transform(ds: dict[str, Any], ctx: StateContext) -> None:
    """NVIDIA's ``TransformSandboxValidator``."""
    validator = ctx.spec.validator
    main = t.find(ds, NAME)
    assert main is not None
    main["image"] = image_path(validator, ctx.facts.operator_env, "validator")
    main["imagePullPolicy"] = pull_policy(validator.image_pull_policy)
    t.set_user_env(main, validator.env)
    if not ctx.spec.cc_manager.is_enabled():
        t.remove_containers(ds, "cc-manager-validation")
    default = ctx.spec.sandbox_workloads.default_workload
    workload = default if default in WORKLOADS else "container"
    for name, extra in (
        ("vfio-pci-validation", validator.vfio_pci),
        ("vgpu-manager-validation", validator.vgpu_manager),
        ("vgpu-devices-validation", validator.vgpu_devices),
    ):
        c = t.find(ds, name)
        assert c is not None
        t.set_env(c, "DEFAULT_GPU_WORKLOAD_CONFIG", workload)
        if extra is not None:
            t.set_user_env(c, extra.env)
