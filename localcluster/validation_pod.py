"""kube-apiserver's validation of a pod spec: containers, volumes, probes, resources, env.

Pods and every pod template (Deployment, StatefulSet, DaemonSet, ReplicaSet,
Job, CronJob) go through :func:`validate_pod_spec`. The rules and messages are
those of ``pkg/apis/core/validation`` for the fields users (and our operator's
manifest builders) set: enums (``imagePullPolicy``, ``restartPolicy``,
``dnsPolicy``, port protocols, toleration operators), required fields (container
name and image, env names, volume sources), name formats, port ranges, resource
quantities (requests within limits, whole extended resources such as
``nvidia.com/gpu``) and volume mounts that name a declared volume. Security
contexts are checked by ``validation_security``, affinity and topology spread
by ``validation_scheduling``.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from .validation_field import Errors, as_dict, as_list, label_value_problems, quantity
from .validation_scheduling import validate_affinity, validate_topology_spread
from .validation_security import (
    validate_container_security_context,
    validate_pod_security_context,
)
from .validation_volumes import validate_mount, validate_volume_source

PULL_POLICIES = ("Always", "IfNotPresent", "Never")
RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PROTOCOLS = ("SCTP", "TCP", "UDP")
TOLERATION_OPERATORS = ("Equal", "Exists")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "PreferNoSchedule")
TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
URI_SCHEMES = ("HTTP", "HTTPS")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")  # kube-apiserver's order
_PROBE_HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
_ENV_SOURCES = ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef", "fileKeyRef")
_OVERCOMMITTABLE = frozenset({"cpu", "memory", "ephemeral-storage"})


@functools.cache
def volume_sources() -> tuple[str, ...]:
    """The volume types of core/v1 VolumeSource (from the protobuf layouts)."""
    from .protobuf import load_table

    messages, _maps = load_table()
    return tuple(row[0] for row in messages["k8s.io.api.core.v1.VolumeSource"])


def validate_pod_spec(
    spec: Mapping[str, Any],
    path: str,
    errs: Errors,
    *,
    restart_policies: tuple[str, ...] = RESTART_POLICIES,
) -> None:
    volumes = _volumes(as_list(spec.get("volumes")), f"{path}.volumes", errs)
    containers = as_list(spec.get("containers"))
    if not containers:
        errs.required(f"{path}.containers")
    names: set[str] = set()
    host_users = spec.get("hostUsers") is not False
    for group in ("initContainers", "containers"):
        for i, container in enumerate(as_list(spec.get(group))):
            where = f"{path}.{group}[{i}]"
            _container(as_dict(container), where, errs, volumes, names, group=group)
            validate_container_security_context(
                as_dict(container), where, errs, host_users=host_users
            )
    restart = spec.get("restartPolicy")
    if restart is not None and restart not in restart_policies:
        errs.not_supported(f"{path}.restartPolicy", restart, restart_policies)
    errs.enum(f"{path}.dnsPolicy", spec.get("dnsPolicy"), DNS_POLICIES)
    errs.non_negative(
        f"{path}.terminationGracePeriodSeconds", spec.get("terminationGracePeriodSeconds")
    )
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and not 1 <= deadline <= 2**31 - 1:
        errs.invalid(
            f"{path}.activeDeadlineSeconds", deadline, "must be between 1 and 2147483647, inclusive"
        )
    for key in ("serviceAccountName", "nodeName", "priorityClassName", "runtimeClassName"):
        value = spec.get(key)
        if isinstance(value, str) and value:
            errs.dns_subdomain(f"{path}.{key}", value)
    for key in ("hostname", "subdomain"):
        value = spec.get(key)
        if isinstance(value, str) and value:
            errs.dns_label(f"{path}.{key}", value)
    errs.enum(f"{path}.preemptionPolicy", spec.get("preemptionPolicy"), PREEMPTION_POLICIES)
    _node_selector(as_dict(spec.get("nodeSelector")), f"{path}.nodeSelector", errs)
    validate_pod_security_context(spec, path, errs)
    validate_affinity(as_dict(spec.get("affinity")), f"{path}.affinity", errs)
    validate_topology_spread(
        as_list(spec.get("topologySpreadConstraints")), f"{path}.topologySpreadConstraints", errs
    )
    for i, toleration in enumerate(as_list(spec.get("tolerations"))):
        _toleration(as_dict(toleration), f"{path}.tolerations[{i}]", errs)
    for i, secret in enumerate(as_list(spec.get("imagePullSecrets"))):
        if not as_dict(secret).get("name"):
            errs.required(f"{path}.imagePullSecrets[{i}].name")


def _volumes(volumes: list[Any], path: str, errs: Errors) -> set[str]:
    names: set[str] = set()
    sources = volume_sources()
    for i, raw in enumerate(volumes):
        volume, where = as_dict(raw), f"{path}[{i}]"
        name = volume.get("name")
        if not name:
            errs.required(f"{where}.name")
        elif isinstance(name, str):
            errs.dns_label(f"{where}.name", name)
            if name in names:
                errs.duplicate(f"{where}.name", name)
            names.add(name)
        present = [s for s in sources if volume.get(s) is not None]
        if not present:
            errs.required(where, "must specify a volume type")
        for extra in present[1:]:
            errs.forbidden(f"{where}.{extra}", "may not specify more than 1 volume type")
        pvc = as_dict(volume.get("persistentVolumeClaim"))
        if "persistentVolumeClaim" in present and not pvc.get("claimName"):
            errs.required(f"{where}.persistentVolumeClaim.claimName")
        if "configMap" in present and not as_dict(volume.get("configMap")).get("name"):
            errs.required(f"{where}.configMap.name")
        if "secret" in present and not as_dict(volume.get("secret")).get("secretName"):
            errs.required(f"{where}.secret.secretName")
        if "hostPath" in present and not as_dict(volume.get("hostPath")).get("path"):
            errs.required(f"{where}.hostPath.path")
        validate_volume_source(volume, where, errs)
        size = quantity(as_dict(volume.get("emptyDir")).get("sizeLimit"))
        if size is not None and size < 0:
            errs.invalid(
                f"{where}.emptyDir.sizeLimit",
                as_dict(volume.get("emptyDir")).get("sizeLimit"),
                "must be greater than or equal to 0",
            )
    return names


def _container(
    c: Mapping[str, Any],
    path: str,
    errs: Errors,
    volumes: set[str],
    names: set[str],
    *,
    group: str,
) -> None:
    name = c.get("name")
    if not name:
        errs.required(f"{path}.name")
    elif isinstance(name, str):
        errs.dns_label(f"{path}.name", name)
        if name in names:
            errs.duplicate(f"{path}.name", name)
        names.add(name)
    image = c.get("image")
    if not isinstance(image, str) or not image.strip():
        errs.required(f"{path}.image")
    elif image != image.strip():
        errs.invalid(f"{path}.image", image, "must not have leading or trailing whitespace")
    errs.enum(f"{path}.imagePullPolicy", c.get("imagePullPolicy"), PULL_POLICIES)
    errs.enum(
        f"{path}.terminationMessagePolicy",
        c.get("terminationMessagePolicy"),
        TERMINATION_MESSAGE_POLICIES,
    )
    _ports(as_list(c.get("ports")), f"{path}.ports", errs)
    _env(as_list(c.get("env")), f"{path}.env", errs)
    for i, source in enumerate(as_list(c.get("envFrom"))):
        refs = [k for k in ("configMapRef", "secretRef") if as_dict(source).get(k) is not None]
        if len(refs) != 1:
            errs.invalid(
                f"{path}.envFrom[{i}]",
                "",
                "must specify one of: `configMapRef` or `secretRef`"
                if not refs
                else "may not have more than one field specified at a time",
            )
    _resources(as_dict(c.get("resources")), f"{path}.resources", errs)
    mount_paths: set[str] = set()
    for i, raw in enumerate(as_list(c.get("volumeMounts"))):
        mount, where = as_dict(raw), f"{path}.volumeMounts[{i}]"
        mount_name = mount.get("name")
        if not mount_name:
            errs.required(f"{where}.name")
        elif mount_name not in volumes:
            errs.not_found(f"{where}.name", mount_name)
        mount_path = mount.get("mountPath")
        if not mount_path:
            errs.required(f"{where}.mountPath")
        elif mount_path in mount_paths:
            errs.invalid(f"{where}.mountPath", mount_path, "must be unique")
        else:
            mount_paths.add(str(mount_path))
        validate_mount(mount, c, where, errs)
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        if c.get(probe) is not None:
            if group == "initContainers" and c.get("restartPolicy") != "Always":
                errs.forbidden(
                    f"{path}.{probe}",
                    "may not be set for init containers without restartPolicy=Always",
                )
                continue
            _probe(as_dict(c.get(probe)), f"{path}.{probe}", errs, probe)


def _ports(ports: list[Any], path: str, errs: Errors) -> None:
    names: set[str] = set()
    for i, raw in enumerate(ports):
        port, where = as_dict(raw), f"{path}[{i}]"
        name = port.get("name")
        if isinstance(name, str) and name:
            errs.port_name(f"{where}.name", name)
            if name in names:
                errs.duplicate(f"{where}.name", name)
            names.add(name)
        number = port.get("containerPort")
        if number is None or number == 0:
            errs.invalid(
                f"{where}.containerPort", number or 0, "must be between 1 and 65535, inclusive"
            )
        else:
            errs.port_number(f"{where}.containerPort", number)
        host = port.get("hostPort")
        if host:
            errs.port_number(f"{where}.hostPort", host)
        errs.enum(f"{where}.protocol", port.get("protocol"), PROTOCOLS)


def _env(env: list[Any], path: str, errs: Errors) -> None:
    for i, raw in enumerate(env):
        var, where = as_dict(raw), f"{path}[{i}]"
        name = var.get("name")
        if not name:
            errs.required(f"{where}.name")
        elif isinstance(name, str) and (
            "=" in name or not name.isprintable() or not name.isascii()
        ):
            errs.invalid(
                f"{where}.name",
                name,
                "a valid environment variable name must consist only of printable ASCII "
                "characters other than '='",
            )
        source = var.get("valueFrom")
        if source is None:
            continue
        source = as_dict(source)
        if var.get("value"):
            errs.invalid(f"{where}.valueFrom", "", "may not be specified when `value` is not empty")
        present = [k for k in _ENV_SOURCES if source.get(k) is not None]
        if not present:
            errs.invalid(
                f"{where}.valueFrom",
                "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or "
                "`secretKeyRef`",
            )
        elif len(present) > 1:
            errs.invalid(
                f"{where}.valueFrom", "", "may not have more than one field specified at a time"
            )
        for ref in ("configMapKeyRef", "secretKeyRef"):
            selector = source.get(ref)
            if selector is None:
                continue
            selector = as_dict(selector)
            if not selector.get("key"):
                errs.required(f"{where}.valueFrom.{ref}.key")
            if not selector.get("name"):
                errs.required(f"{where}.valueFrom.{ref}.name")
        field_ref = source.get("fieldRef")
        if field_ref is not None and not as_dict(field_ref).get("fieldPath"):
            errs.required(f"{where}.valueFrom.fieldRef.fieldPath")


def _resources(resources: Mapping[str, Any], path: str, errs: Errors) -> None:
    limits, requests = as_dict(resources.get("limits")), as_dict(resources.get("requests"))
    for section, values in (("limits", limits), ("requests", requests)):
        for name, raw in values.items():
            where = f"{path}.{section}[{name}]"
            value = quantity(raw)
            if value is None:
                continue
            if value < 0:
                errs.invalid(where, str(raw), "must be greater than or equal to 0")
            if _extended(name) and value.denominator != 1:
                errs.invalid(where, str(raw), "must be an integer")
    for name, raw in requests.items():
        request = quantity(raw)
        if request is None:
            continue
        limit_raw = limits.get(name)
        limit = quantity(limit_raw)
        overcommit = _overcommit_allowed(name)
        if limit is not None:
            if request != limit and not overcommit:
                errs.invalid(
                    f"{path}.requests", str(raw), f"must be equal to {name} limit of {limit_raw}"
                )
            elif request > limit:
                errs.invalid(
                    f"{path}.requests",
                    str(raw),
                    f"must be less than or equal to {name} limit of {limit_raw}",
                )
        elif not overcommit:
            errs.required(f"{path}.limits", "Limit must be set for non overcommitable resources")


def _overcommit_allowed(name: str) -> bool:
    """Native resources (cpu, memory ...) may be requested below their limit; others not."""
    native = "/" not in name or name.split("/", 1)[0].endswith("kubernetes.io")
    return native and not name.startswith("hugepages-")


def _extended(name: str) -> bool:
    """A resource outside kubernetes.io's own (``nvidia.com/gpu``, ``example.com/foo``)."""
    return "/" in name and not name.split("/", 1)[0].endswith("kubernetes.io")


def _probe(probe: Mapping[str, Any], path: str, errs: Errors, kind: str) -> None:
    handlers = [h for h in _PROBE_HANDLERS if probe.get(h) is not None]
    if not handlers:
        errs.required(path, "must specify a handler type")
    for extra in handlers[1:]:
        errs.forbidden(f"{path}.{extra}", "may not specify more than 1 handler type")
    http = as_dict(probe.get("httpGet"))
    if probe.get("httpGet") is not None:
        errs.int_or_port_name(f"{path}.httpGet.port", http.get("port"))
        errs.enum(f"{path}.httpGet.scheme", http.get("scheme"), URI_SCHEMES)
    if probe.get("tcpSocket") is not None:
        errs.int_or_port_name(f"{path}.tcpSocket.port", as_dict(probe.get("tcpSocket")).get("port"))
    for key in (
        "initialDelaySeconds",
        "timeoutSeconds",
        "periodSeconds",
        "successThreshold",
        "failureThreshold",
    ):
        errs.non_negative(f"{path}.{key}", probe.get(key))
    success = probe.get("successThreshold")
    if kind in ("livenessProbe", "startupProbe") and isinstance(success, int) and success != 1:
        errs.invalid(f"{path}.successThreshold", success, "must be 1")


def _node_selector(selector: Mapping[str, Any], path: str, errs: Errors) -> None:
    """ValidateLabels: keys and values both reported at the map's path."""
    for key, value in selector.items():
        errs.label_name(path, key)
        errs.label_value(path, value)


def _toleration(toleration: Mapping[str, Any], path: str, errs: Errors) -> None:
    operator = toleration.get("operator")
    key = toleration.get("key")
    if key:
        errs.label_name(f"{path}.key", key)
    if toleration.get("tolerationSeconds") is not None and toleration.get("effect") != "NoExecute":
        errs.invalid(
            f"{path}.effect",
            toleration.get("effect") or "",
            "effect must be 'NoExecute' when `tolerationSeconds` is set",
        )
    if operator in (None, "", "Equal"):
        problems = label_value_problems(str(toleration.get("value") or ""))
        if problems:
            errs.invalid(f"{path}.operator", toleration.get("value"), ";".join(problems))
    errs.enum(f"{path}.operator", operator, TOLERATION_OPERATORS)
    errs.enum(f"{path}.effect", toleration.get("effect") or None, TAINT_EFFECTS)
    if operator == "Exists" and toleration.get("value"):
        errs.invalid(
            f"{path}.operator",
            toleration.get("value"),
            "value must be empty when `operator` is 'Exists'",
        )
    if not toleration.get("key") and operator != "Exists":
        errs.invalid(
            f"{path}.operator",
            operator or "",
            "operator must be Exists when `key` is empty, which means "
            '"match all values and all keys"',
        )
