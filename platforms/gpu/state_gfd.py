"""State ``gpu-feature-discovery``: GPU feature discovery, which labels each node
with its GPUs (``nvidia.com/gpu.product``, ``gpu.count``, ``gpu.memory``,
``mig.capable``, ...) through NFD's feature files or NodeFeature objects.
"""

from __future__ import annotations

from typing import Any

from platforms.gpu import transforms as t
from platforms.gpu.common import (
    DIR,
    PRIV,
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
from platforms.gpu.state_device_plugin import node_rules

NAME = "gpu-feature-discovery"
SERVICE_ACCOUNT = "nvidia-gpu-feature-discovery"
FEATURES_DIR = "/etc/kubernetes/node-feature-discovery/features.d"


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC and the GFD DaemonSet."""
    out = rbac(
        ctx,
        SERVICE_ACCOUNT,
        [
            scc_privileged(),
            policy_rule(
                ["nfd.k8s-sigs.io"], ["nodefeatures"], ["get", "list", "watch", "create", "update"]
            ),
            policy_rule([""], ["pods"], ["get"]),
        ],
        node_rules(),
    )
    ds = t.prepare(_asset(), ctx)
    transform(ds, ctx)
    out.append(t.finish(ds, ctx))
    return out


def _asset() -> dict[str, Any]:
    main = container(
        NAME,
        command=["gpu-feature-discovery"],
        env_vars=[
            env("GFD_SLEEP_INTERVAL", "60s"),
            env("GFD_FAIL_ON_INIT_ERROR", "true"),
            field_env("NAMESPACE", "metadata.namespace"),
            field_env("NODE_NAME", "spec.nodeName"),
            field_env("POD_NAME", "metadata.name"),
        ],
        security_context=PRIV,
        mounts=[mount("output-dir", FEATURES_DIR), mount("host-sys", "/sys", read_only=True)],
    )
    return daemonset(
        NAME,
        component="gpu-feature-discovery",
        labels={"app": NAME, "app.kubernetes.io/part-of": "nvidia-gpu"},
        service_account=SERVICE_ACCOUNT,
        init_containers=[
            wait_for_file("toolkit-validation", "toolkit-ready"),
            t.config_manager(init=True, process_to_signal=""),
        ],
        containers=[main, t.config_manager(init=False, process_to_signal="gpu-feature-discovery")],
        volumes=[
            host_path("output-dir", FEATURES_DIR),
            host_path("host-sys", "/sys"),
            host_path("run-nvidia", "/run/nvidia", DIR),
        ],
    )


def transform(ds: dict[str, Any], ctx: StateContext) -> None:
    """NVIDIA's ``TransformGPUDiscoveryPlugin``."""
    gfd = ctx.spec.gfd
    image = image_path(gfd, ctx.facts.operator_env, "gfd")
    c = t.apply_component(ds, gfd, image=image, main=NAME, user_env=False)
    if ctx.openshift:
        t.set_env(c, "USE_NODE_FEATURE_API", "false")
    t.set_user_env(c, gfd.env)
    t.apply_device_plugin_config(ds, ctx, main=[NAME], init_resources=gfd.resources)
    t.apply_runtime_class(ds, ctx)
    t.apply_nri_annotation(ds, ctx, NAME)
    t.apply_mig_env(c, ctx)
