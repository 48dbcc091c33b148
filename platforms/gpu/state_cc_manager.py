"""State ``state-cc-manager``: the confidential computing manager, which switches
each GPU's CC mode (``ccManager.defaultMode`` unless the node's
``nvidia.com/cc.mode`` label says otherwise).
"""

from __future__ import annotations

from typing import Any

from platforms.gpu import transforms as t
from platforms.gpu.common import (
    DIR,
    DOC,
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
from platforms.gpu.images import image_path

NAME = "nvidia-cc-manager"
RESOURCES = {"limits": {"memory": "200Mi"}, "requests": {"cpu": "100m", "memory": "200Mi"}}


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC and the CC manager DaemonSet."""
    out = rbac(
        ctx,
        NAME,
        [scc_privileged(), policy_rule([""], ["pods"], ["get", "list", "watch"])],
        [policy_rule([""], ["nodes"], ["get", "list", "patch", "watch"])],
    )
    ds = t.prepare(_asset(), ctx)
    manager = ctx.spec.cc_manager
    image = image_path(manager, ctx.facts.operator_env, "ccManager")
    c = t.apply_component(ds, manager, image=image, main=NAME, user_env=False)
    if manager.default_mode:
        t.set_env(c, "DEFAULT_CC_MODE", manager.default_mode)
    t.set_user_env(c, manager.env)
    out.append(t.finish(ds, ctx))
    return out


def _asset() -> dict[str, Any]:
    main = container(
        NAME,
        env_vars=[field_env("NODE_NAME", "spec.nodeName"), env("NVIDIA_VISIBLE_DEVICES", "void")],
        security_context=PRIV_S0,
        resources={k: dict(v) for k, v in RESOURCES.items()},
        mounts=[mount("host-sys", "/sys"), mount("run-nvidia", "/run/nvidia")],
        lifecycle={
            "preStop": {
                "exec": {
                    # NVIDIA's command, word for word (it is in the pod template).
                    "command": ["/bin/rm", "-f", "/run/nvidia/validations/.cc-manager-ctr-ready"]
                }
            }
        },
    )
    return daemonset(
        NAME,
        component="cc-manager",
        labels={"app": NAME},
        selector={"name": NAME},
        service_account=NAME,
        terminationGracePeriodSeconds=30,
        containers=[main],
        volumes=[host_path("host-sys", "/sys", DIR), host_path("run-nvidia", "/run/nvidia", DOC)],
    )
