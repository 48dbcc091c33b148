"""State ``state-operator-validation``: the ``nvidia-operator-validator`` DaemonSet.

Its init containers check, in order, the driver, the toolkit (a GPU is visible
through the runtime), a CUDA workload and the device plugin (the node
advertises GPUs); each writes its ``*-ready`` file under
``/run/nvidia/validations``, which the other operands wait for. The main
container only sleeps; stopping it removes the ready files, so a restarted
driver re-gates every operand.
"""

from __future__ import annotations

from typing import Any

from platforms.gpu import transforms as t
from platforms.gpu.common import (
    BIDIR,
    HTOC,
    PRIV,
    PRIV_S0,
    container,
    daemonset,
    env,
    field_env,
    host_path,
    json_copy,
    mount,
    policy_rule,
    rbac,
    scc_privileged,
)
from platforms.gpu.context import StateContext
from platforms.gpu.images import image_path, pull_policy

NAME = "nvidia-operator-validator"
PART_OF = {"app.kubernetes.io/part-of": "gpu-operator"}
VALIDATIONS = mount("run-nvidia-validations", "/run/nvidia/validations", propagation=BIDIR)


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC and the validator DaemonSet."""
    out = rbac(
        ctx,
        NAME,
        [
            scc_privileged(),
            policy_rule(
                [""], ["pods"], ["create", "get", "list", "watch", "update", "patch", "delete"]
            ),
            policy_rule(["apps"], ["daemonsets"], ["get", "list", "watch"]),
        ],
        [
            policy_rule([""], ["nodes"], ["get", "list", "watch"]),
            policy_rule(
                ["nvidia.com"],
                ["clusterpolicies/finalizers", "nvidiadrivers/finalizers"],
                ["create", "get", "list", "watch", "update", "patch", "delete"],
            ),
        ],
    )
    ds = t.prepare(_asset(), ctx)
    transform(ds, ctx)
    out.append(t.finish(ds, ctx))
    return out


def _validation(component: str, *env_vars: dict[str, Any]) -> dict[str, Any]:
    """A component check; its env in the order of NVIDIA's asset (an env list in another
    order is another pod template, so a take-over would restart the validator)."""
    return container(
        f"{component}-validation",
        command=["sh", "-c"],
        args=["nvidia-validator"],
        env_vars=list(env_vars),
        security_context=PRIV,
        mounts=[VALIDATIONS],
    )


def _asset() -> dict[str, Any]:
    no_wait = env("WITH_WAIT", "false")
    driver = _validation(
        "driver",
        env("WITH_WAIT", "true"),
        env("COMPONENT", "driver"),
        field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
    )
    driver["securityContext"] = json_copy(PRIV_S0)
    driver["volumeMounts"] = [
        mount("host-root", "/host", read_only=True, propagation=HTOC),
        mount("driver-install-dir", "/run/nvidia/driver", propagation=HTOC),
        dict(VALIDATIONS),
        mount("host-dev-char", "/host-dev-char"),
    ]
    toolkit = _validation(
        "toolkit", env("NVIDIA_VISIBLE_DEVICES", "all"), no_wait, env("COMPONENT", "toolkit")
    )
    node_env = [
        field_env("NODE_NAME", "spec.nodeName"),
        field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
    ]
    cuda = _validation("cuda", no_wait, env("COMPONENT", "cuda"), *node_env)
    # MIG_STRATEGY holds its place in NVIDIA's asset; the transform fills it in.
    plugin = _validation(
        "plugin",
        env("COMPONENT", "plugin"),
        no_wait,
        env("WITH_WORKLOAD", "false"),
        env("MIG_STRATEGY", ""),
        *node_env,
    )
    main = container(
        NAME,
        command=["sh", "-c"],
        args=["echo all validations are successful; while true; do sleep 86400; done"],
        security_context={**PRIV, "runAsUser": 0},
        mounts=[VALIDATIONS],
        lifecycle={
            "preStop": {"exec": {"command": ["sh", "-c", "rm -f /run/nvidia/validations/*-ready"]}}
        },
    )
    return daemonset(
        NAME,
        component="operator-validator",
        labels={"app": NAME, **PART_OF},
        service_account=NAME,
        init_containers=[driver, toolkit, cuda, plugin],
        containers=[main],
        volumes=[
            host_path("run-nvidia-validations", "/run/nvidia/validations", "DirectoryOrCreate"),
            host_path("driver-install-dir", "/run/nvidia/driver"),
            host_path("host-root", "/"),
            host_path("host-dev-char", "/dev/char"),
        ],
    )


def transform(ds: dict[str, Any], ctx: StateContext) -> None:
    """NVIDIA's ``TransformValidator``: validator image everywhere, the component env,
    the plugin check only with a device plugin, runtime class or NRI annotation."""
    validator = ctx.spec.validator
    image = image_path(validator, ctx.facts.operator_env, "validator")
    main = t.find(ds, NAME)
    assert main is not None
    main["image"] = image
    main["imagePullPolicy"] = pull_policy(validator.image_pull_policy)
    if validator.resources is not None:
        main["resources"] = t.dump(validator.resources)
    if validator.args:
        main["args"] = list(validator.args)
    t.set_user_env(main, validator.env)
    t.add_pull_secrets(ds, validator.image_pull_secrets)
    if not ctx.spec.device_plugin.is_enabled():
        t.remove_containers(ds, "plugin-validation")
    t.apply_runtime_class(ds, ctx)
    t.apply_nri_annotation(ds, ctx, "toolkit-validation")
    runtime_class = t.pod_spec(ds).get("runtimeClassName")
    for name, extra in (
        ("cuda-validation", validator.cuda),
        ("plugin-validation", validator.plugin),
    ):
        c = t.find(ds, name)
        if c is None:
            continue
        if name == "plugin-validation":
            t.set_env(c, "MIG_STRATEGY", ctx.spec.mig.strategy or "")
        t.set_env(c, "VALIDATOR_IMAGE", image)
        t.set_env(c, "VALIDATOR_IMAGE_PULL_POLICY", validator.image_pull_policy or "")
        if validator.image_pull_secrets:
            t.set_env(c, "VALIDATOR_IMAGE_PULL_SECRETS", ",".join(validator.image_pull_secrets))
        if runtime_class:
            t.set_env(c, "VALIDATOR_RUNTIME_CLASS", runtime_class)
        if extra is not None:
            t.set_user_env(c, extra.env)
