"""Building blocks shared by the state modules: containers, host volumes, the
operand DaemonSet skeleton and each state's RBAC.

Every operand DaemonSet starts the same way (NVIDIA's asset baseline): pod
priority ``system-node-critical``, the toleration ``nvidia.com/gpu:NoSchedule``,
and a nodeSelector on its ``nvidia.com/gpu.deploy.<component>`` label. The
ClusterPolicy-driven changes are applied afterwards by ``transforms``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from manifests import clusterrole, clusterrolebinding, role, rolebinding, serviceaccount
from manifests import daemonset as daemonset_builder
from manifests.meta import object_meta
from manifests.role import policy_rule
from platforms.gpu.context import StateContext

DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
VALIDATIONS_DIR = "/run/nvidia/validations"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
PRIORITY_CLASS = "system-node-critical"

DOC = "DirectoryOrCreate"
DIR = "Directory"
HTOC = "HostToContainer"
BIDIR = "Bidirectional"

PRIV: dict[str, Any] = {"privileged": True}
PRIV_S0: dict[str, Any] = {"privileged": True, "seLinuxOptions": {"level": "s0"}}

# The opening of our operand entrypoint scripts (toolkit, device plugin, MIG manager):
# wait for the validator's ``driver-ready`` file, then export what it reports
# (IS_HOST_DRIVER, NVIDIA_DRIVER_ROOT...). ``set -a`` is left on for the script to
# add its own exports before ``set +a``. The text is part of each entrypoint
# ConfigMap: a change rolls those DaemonSets.
SOURCE_DRIVER_READY = f"""until [ -f {VALIDATIONS_DIR}/driver-ready ]; do
  echo "waiting for the driver validations to be ready..."
  sleep 5
done
set -a
. {VALIDATIONS_DIR}/driver-ready
"""

__all__ = [
    "BIDIR",
    "DIR",
    "DOC",
    "HTOC",
    "PRIV",
    "PRIV_S0",
    "SOURCE_DRIVER_READY",
    "cluster_versions_rule",
    "config_map_volume",
    "container",
    "daemonset",
    "deploy_label",
    "env",
    "field_env",
    "host_path",
    "json_copy",
    "mount",
    "policy_rule",
    "rbac",
    "scc_privileged",
    "wait_for_file",
]


def deploy_label(component: str) -> str:
    """``nvidia.com/gpu.deploy.<component>``: the node label that schedules an operand."""
    return DEPLOY_LABEL_PREFIX + component


def env(name: str, value: str) -> dict[str, Any]:
    """A literal EnvVar."""
    return {"name": name, "value": value}


def field_env(name: str, path: str) -> dict[str, Any]:
    """An EnvVar from the pod's own fields (``spec.nodeName``, ``metadata.namespace``...)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def host_path(name: str, path: str, type_: str | None = None) -> dict[str, Any]:
    """A hostPath volume (``type_`` unset means no check)."""
    source: dict[str, Any] = {"path": path}
    if type_:
        source["type"] = type_
    return {"name": name, "hostPath": source}


def config_map_volume(
    name: str,
    config_map: str,
    *,
    mode: int | None = None,
    items: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
    """A configMap volume (``mode`` is defaultMode in decimal, as the API stores it)."""
    source: dict[str, Any] = {"name": config_map}
    if mode is not None:
        source["defaultMode"] = mode
    if items:
        source["items"] = items
    return {"name": name, "configMap": source}


def mount(
    name: str,
    path: str,
    *,
    read_only: bool = False,
    propagation: str | None = None,
    sub_path: str | None = None,
) -> dict[str, Any]:
    """A volumeMount."""
    out: dict[str, Any] = {"name": name, "mountPath": path}
    if read_only:
        out["readOnly"] = True
    if propagation:
        out["mountPropagation"] = propagation
    if sub_path:
        out["subPath"] = sub_path
    return out


def container(
    name: str,
    *,
    image: str = "",
    command: Sequence[str] | None = None,
    args: Sequence[str] | None = None,
    env_vars: Sequence[Mapping[str, Any]] = (),
    security_context: Mapping[str, Any] | None = None,
    mounts: Sequence[Mapping[str, Any]] = (),
    **extra: Any,
) -> dict[str, Any]:
    """A container; ``extra`` holds probes, ports, lifecycle... by their JSON names."""
    out: dict[str, Any] = {"name": name, "image": image, "imagePullPolicy": "IfNotPresent"}
    if command:
        out["command"] = list(command)
    if args:
        out["args"] = list(args)
    if env_vars:
        out["env"] = [dict(e) for e in env_vars]
    if security_context:
        out["securityContext"] = json_copy(security_context)
    if mounts:
        out["volumeMounts"] = [dict(m) for m in mounts]
    out.update(extra)
    return out


def json_copy(value: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a JSON-shaped map (shared constants and spec values stay untouched)."""
    return {k: _copy(v) for k, v in value.items()}


def _copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return json_copy(value)
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


# What NVIDIA's init containers echo while they wait for a ready file (its assets' words:
# a different string is a pod template change on a cluster NVIDIA's operator set up).
def wait_for_file(
    name: str,
    ready_file: str,
    *,
    volume: str = "run-nvidia",
    mount_path: str = "/run/nvidia",
    waiting_for: str = "nvidia container stack to be setup",
) -> dict[str, Any]:
    """An init container that loops until ``/run/nvidia/validations/<ready_file>`` exists
    (the validator image; image and policy are set by the validator transform), saying
    ``waiting for <waiting_for>`` as NVIDIA's (its command string is part of the pod
    template: another wording would roll every pod on a take-over)."""
    path = f"{VALIDATIONS_DIR}/{ready_file}"
    script = f"until [ -f {path} ]; do echo waiting for {waiting_for}; sleep 5; done"
    return container(
        name,
        command=["sh", "-c"],
        args=[script],
        security_context=PRIV,
        mounts=[mount(volume, mount_path, propagation=HTOC)],
    )


def daemonset(
    name: str,
    *,
    component: str,
    containers: list[dict[str, Any]],
    service_account: str,
    volumes: list[dict[str, Any]],
    init_containers: list[dict[str, Any]] | None = None,
    labels: Mapping[str, str] | None = None,
    selector: Mapping[str, str] | None = None,
    pod_labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    pod_annotations: Mapping[str, str] | None = None,
    extra_node_selector: Mapping[str, str] | None = None,
    host_pid: bool = False,
    host_ipc: bool = False,
    update_strategy: dict[str, Any] | None = None,
    **pod_extra: Any,
) -> dict[str, Any]:
    """An operand DaemonSet on NVIDIA's baseline.

    ``labels`` default to ``{app: name}`` and ``selector`` to ``labels``; the pod
    carries the selector plus ``pod_labels``. ``component`` names the deploy
    label the pods are scheduled by.
    """
    labels = dict(labels or {"app": name})
    selector = dict(selector or labels)
    spec: dict[str, Any] = {
        "nodeSelector": {deploy_label(component): "true", **(extra_node_selector or {})},
        "tolerations": [dict(GPU_TOLERATION)],
        "priorityClassName": PRIORITY_CLASS,
        "serviceAccountName": service_account,
    }
    if host_pid:
        spec["hostPID"] = True
    if host_ipc:
        spec["hostIPC"] = True
    if init_containers:
        spec["initContainers"] = init_containers
    spec["containers"] = containers
    spec["volumes"] = volumes
    spec.update(pod_extra)
    template_meta: dict[str, Any] = {"labels": {**selector, **(pod_labels or {})}}
    if pod_annotations:
        template_meta["annotations"] = dict(pod_annotations)
    return daemonset_builder.build(
        object_meta(name, labels=labels, annotations=annotations),
        selector=selector,
        template={"metadata": template_meta, "spec": spec},
        update_strategy=update_strategy,
    )


def rbac(
    ctx: StateContext,
    name: str,
    rules: list[dict[str, Any]] | None,
    cluster_rules: list[dict[str, Any]] | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    cluster_labels: Mapping[str, str] | None = None,
    cluster_name: str | None = None,
) -> list[dict[str, Any]]:
    """A state's ServiceAccount, Role, ClusterRole, RoleBinding and ClusterRoleBinding,
    in NVIDIA's file order; None skips the Role or ClusterRole.

    All are called ``name`` but the ClusterRole and its binding, which are called
    ``cluster_name`` when given. ``labels`` go on the ServiceAccount, Role and
    RoleBinding, ``cluster_labels`` on the ClusterRole and its binding (NVIDIA labels
    only some states' RBAC).
    """
    cluster = cluster_name or name

    def meta(obj_name: str, obj_labels: Mapping[str, str] | None) -> dict[str, Any]:
        return object_meta(obj_name, labels=dict(obj_labels) if obj_labels else None)

    out = [serviceaccount.build(meta(name, labels))]
    if rules is not None:
        out.append(role.build(meta(name, labels), rules))
    if cluster_rules is not None:
        out.append(clusterrole.build(meta(cluster, cluster_labels), cluster_rules))
    if rules is not None:
        out.append(
            rolebinding.build(
                meta(name, labels), role_name=name, service_account=name, namespace=ctx.namespace
            )
        )
    if cluster_rules is not None:
        out.append(
            clusterrolebinding.build(
                meta(cluster, cluster_labels),
                role_name=cluster,
                service_account=name,
                namespace=ctx.namespace,
            )
        )
    return out


def scc_privileged() -> dict[str, Any]:
    """``use`` of OpenShift's ``privileged`` SCC: the first rule of nearly every operand
    Role NVIDIA ships (on every cluster; elsewhere it grants nothing)."""
    return policy_rule(
        ["security.openshift.io"], ["securitycontextconstraints"], ["use"], ["privileged"]
    )


def cluster_versions_rule() -> dict[str, Any]:
    """Read of the OpenShift version (``clusterversions`` get, list), first in the
    ClusterRole of the sandbox operands."""
    return policy_rule(["config.openshift.io"], ["clusterversions"], ["get", "list"])
