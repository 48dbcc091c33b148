"""kube-apiserver's validation of built-in objects: what a real cluster refuses with a 422.

:func:`validate` runs after decoding and defaulting, on create and update, as the
REST strategies' ``Validate``/``ValidateUpdate`` do: enums, required fields,
ranges, selectors that must match their template, and fields that are immutable
once set (a Deployment's selector, a Service's clusterIP, a Job's template, a
Secret's type, the data of an immutable ConfigMap). It returns the causes, in
kube-apiserver's words; the caller turns them into the 422 ``Invalid`` Status.

Object names and metadata are checked by the strategy (``strategy.py``); pod
specs by ``validation_pod``; this module holds the per-kind rules. Kinds not
listed here are stored as decoded.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from nimctl_runtime.field import Cause
from nimctl_runtime.labels import Selector, SelectorParseError
from nimctl_runtime.meta import ObjView

from .validation_autoscaling import validate_hpa
from .validation_field import (
    Errors,
    as_dict,
    as_list,
    go_value,
    qualified_name_problems,
    quantity,
)
from .validation_networking import ingress
from .validation_pod import PROTOCOLS, validate_pod_spec

Validator = Callable[[ObjView, "ObjView | None", Errors], None]

SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
SESSION_AFFINITIES = ("ClientIP", "None")
TRAFFIC_POLICIES = ("Cluster", "Local")
IP_FAMILY_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
DEPLOYMENT_STRATEGIES = ("Recreate", "RollingUpdate")
DAEMONSET_STRATEGIES = ("OnDelete", "RollingUpdate")
POD_MANAGEMENT_POLICIES = ("OrderedReady", "Parallel")
CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")
COMPLETION_MODES = ("NonIndexed", "Indexed")
JOB_RESTART_POLICIES = ("OnFailure", "Never")
ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
VOLUME_MODES = ("Block", "Filesystem")
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_CONFIG_KEY_MESSAGE = (
    "a valid config key must consist of alphanumeric characters, '-', '_' or '.' "
    "(e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is "
    "'[-._a-zA-Z0-9]+')"
)
_MAX_CONFIG_BYTES = 1024 * 1024
_MAX_ANNOTATION_BYTES = 256 * 1024
_STATEFULSET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)
_REDACTED = "<secret contents redacted>"


def validate(group: str, kind: str, obj: ObjView, old: ObjView | None) -> list[Cause]:
    """The causes kube-apiserver would refuse *obj* for (empty when it is valid)."""
    validator = VALIDATORS.get((group, kind))
    if validator is None:
        return []
    errs = Errors()
    validator(obj, old, errs)
    return errs.causes


# --------------------------------------------------------------------------- helpers


def _spec(obj: ObjView | None) -> Mapping[str, Any]:
    return as_dict((obj or {}).get("spec"))


def _selector_and_template(
    spec: Mapping[str, Any], errs: Errors, *, kind: str, restart: tuple[str, ...] = ("Always",)
) -> None:
    """A required, non-empty selector matching the template's labels; a valid pod spec."""
    selector = spec.get("selector")
    template = as_dict(spec.get("template"))
    labels = as_dict(as_dict(template.get("metadata")).get("labels"))
    if selector is None:
        errs.required("spec.selector")
    else:
        sel = as_dict(selector)
        if not sel.get("matchLabels") and not sel.get("matchExpressions"):
            errs.invalid("spec.selector", selector, f"empty selector is invalid for {kind}")
        else:
            try:
                matches = Selector.from_label_selector(sel).matches(
                    {str(k): str(v) for k, v in labels.items()}
                )
            except SelectorParseError as exc:
                errs.invalid("spec.selector", selector, str(exc))
            else:
                if not matches:
                    errs.invalid(
                        "spec.template.metadata.labels",
                        dict(labels),
                        "`selector` does not match template `labels`",
                    )
    if spec.get("template") is None:
        errs.required("spec.template")
        return
    _template_metadata(template, "spec.template", errs)
    validate_pod_spec(
        as_dict(template.get("spec")), "spec.template.spec", errs, restart_policies=restart
    )


def _template_metadata(template: Mapping[str, Any], path: str, errs: Errors) -> None:
    """ValidatePodTemplateSpec's metadata checks: label keys and values, annotation keys."""
    meta = as_dict(template.get("metadata"))
    for key, value in as_dict(meta.get("labels")).items():
        errs.label_name(f"{path}.metadata.labels", key)
        errs.label_value(f"{path}.metadata.labels", value)
    annotations = as_dict(meta.get("annotations"))
    for key in annotations:
        for problem in qualified_name_problems(str(key).lower()):
            errs.invalid(f"{path}.metadata.annotations", key, problem)
    size = sum(len(str(k)) + len(str(v)) for k, v in annotations.items())
    if size > _MAX_ANNOTATION_BYTES:
        errs.too_long(f"{path}.metadata.annotations", _MAX_ANNOTATION_BYTES)


def _immutable(errs: Errors, path: str, new: Any, old: Any) -> None:
    if new != old:
        errs.invalid(path, new, "field is immutable")


def _int_or_percent(value: Any) -> tuple[int, bool] | None:
    """(amount, is_percent) of an IntOrString such as ``25%`` or ``1``; None when invalid."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value, False
    if isinstance(value, str) and re.fullmatch(r"[0-9]+%", value):
        return int(value[:-1]), True
    return None


def _rolling_amount(errs: Errors, path: str, value: Any) -> int | None:
    if value is None:
        return None
    parsed = _int_or_percent(value)
    if parsed is None:
        errs.invalid(
            path,
            value,
            "a valid percent string must be a numeric string followed by an ending '%' "
            "(e.g. '1%',  or '93%', regex used for validation is '[0-9]+%')",
        )
        return None
    amount, percent = parsed
    if amount < 0:
        errs.invalid(path, value, "must be greater than or equal to 0")
    if percent and amount > 100:
        errs.invalid(path, value, "must not be greater than 100%")
    return amount


# --------------------------------------------------------------------------- apps


def deployment(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    spec = _spec(obj)
    errs.non_negative("spec.replicas", spec.get("replicas"))
    _selector_and_template(spec, errs, kind="deployment")
    strategy = as_dict(spec.get("strategy"))
    kind = strategy.get("type")
    errs.enum("spec.strategy.type", kind, DEPLOYMENT_STRATEGIES)
    rolling = strategy.get("rollingUpdate")
    if kind == "Recreate" and rolling is not None:
        errs.forbidden(
            "spec.strategy.rollingUpdate",
            "may not be specified when strategy `type` is 'Recreate'",
        )
    elif rolling is not None:
        surge = _rolling_amount(
            errs, "spec.strategy.rollingUpdate.maxSurge", as_dict(rolling).get("maxSurge")
        )
        path = "spec.strategy.rollingUpdate.maxUnavailable"
        unavailable = as_dict(rolling).get("maxUnavailable")
        amount = _rolling_amount(errs, path, unavailable)
        if surge == 0 and amount == 0:
            errs.invalid(path, unavailable, "may not be 0 when `maxSurge` is 0")
    for key in ("minReadySeconds", "revisionHistoryLimit"):
        errs.non_negative(f"spec.{key}", spec.get(key))
    deadline, ready = spec.get("progressDeadlineSeconds"), spec.get("minReadySeconds")
    if isinstance(deadline, int) and isinstance(ready, int) and deadline <= ready:
        errs.invalid(
            "spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"
        )
    if old is not None:
        _immutable(errs, "spec.selector", spec.get("selector"), _spec(old).get("selector"))


def replicaset(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    spec = _spec(obj)
    errs.non_negative("spec.replicas", spec.get("replicas"))
    _selector_and_template(spec, errs, kind="replicaset")
    if old is not None:
        _immutable(errs, "spec.selector", spec.get("selector"), _spec(old).get("selector"))


def statefulset(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    spec = _spec(obj)
    errs.non_negative("spec.replicas", spec.get("replicas"))
    _selector_and_template(spec, errs, kind="statefulset")
    errs.enum("spec.podManagementPolicy", spec.get("podManagementPolicy"), POD_MANAGEMENT_POLICIES)
    errs.enum(
        "spec.updateStrategy.type",
        as_dict(spec.get("updateStrategy")).get("type"),
        DAEMONSET_STRATEGIES,
    )
    if old is not None:
        before = {k: v for k, v in _spec(old).items() if k not in _STATEFULSET_MUTABLE}
        after = {k: v for k, v in spec.items() if k not in _STATEFULSET_MUTABLE}
        if before != after:
            errs.forbidden(
                "spec",
                "updates to statefulset spec for fields other than 'replicas', 'ordinals', "
                "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and "
                "'minReadySeconds' are forbidden",
            )


def daemonset(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    spec = _spec(obj)
    _selector_and_template(spec, errs, kind="daemonset")
    strategy = as_dict(spec.get("updateStrategy"))
    errs.enum("spec.updateStrategy.type", strategy.get("type"), DAEMONSET_STRATEGIES)
    rolling = strategy.get("rollingUpdate")
    if strategy.get("type") == "RollingUpdate" and isinstance(rolling, Mapping):
        path = "spec.updateStrategy.rollingUpdate"
        unavailable = _rolling_amount(errs, f"{path}.maxUnavailable", rolling.get("maxUnavailable"))
        surge = _rolling_amount(errs, f"{path}.maxSurge", rolling.get("maxSurge"))
        if unavailable and surge:
            errs.invalid(
                f"{path}.maxSurge",
                rolling.get("maxSurge"),
                "may not be set when maxUnavailable is non-zero",
            )
        elif not unavailable and not surge:
            errs.required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0")
    for key in ("minReadySeconds", "revisionHistoryLimit"):
        errs.non_negative(f"spec.{key}", spec.get(key))
    if old is not None:
        _immutable(errs, "spec.selector", spec.get("selector"), _spec(old).get("selector"))


# --------------------------------------------------------------------------- batch


def _job_spec(spec: Mapping[str, Any], path: str, errs: Errors) -> None:
    for key in ("parallelism", "completions", "backoffLimit", "ttlSecondsAfterFinished"):
        errs.non_negative(f"{path}.{key}", spec.get(key))
    deadline = spec.get("activeDeadlineSeconds")
    if isinstance(deadline, int) and deadline <= 0:
        errs.invalid(f"{path}.activeDeadlineSeconds", deadline, "must be greater than 0")
    errs.enum(f"{path}.completionMode", spec.get("completionMode"), COMPLETION_MODES)
    if spec.get("completionMode") == "Indexed":
        if spec.get("completions") is None:
            errs.required(f"{path}.completions", "when completion mode is Indexed")
        parallelism = spec.get("parallelism")
        if isinstance(parallelism, int) and parallelism > 100000:
            errs.invalid(
                f"{path}.parallelism",
                parallelism,
                "must be less than or equal to 100000 when completion mode is Indexed",
            )
    if spec.get("maxFailedIndexes") is not None and spec.get("backoffLimitPerIndex") is None:
        errs.required(f"{path}.backoffLimitPerIndex", "when maxFailedIndexes is specified")
    template = spec.get("template")
    if template is None:
        errs.required(f"{path}.template")
        return
    _template_metadata(as_dict(template), f"{path}.template", errs)
    pod = as_dict(as_dict(template).get("spec"))
    restart = pod.get("restartPolicy")
    if restart not in JOB_RESTART_POLICIES:
        errs.not_supported(f"{path}.template.spec.restartPolicy", restart, JOB_RESTART_POLICIES)
    validate_pod_spec(
        pod, f"{path}.template.spec", errs, restart_policies=(*JOB_RESTART_POLICIES, "Always")
    )


def job(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    spec = _spec(obj)
    _job_spec(spec, "spec", errs)
    if old is not None:
        before = _spec(old)
        _immutable(errs, "spec.selector", spec.get("selector"), before.get("selector"))
        if spec.get("completionMode") != "Indexed":
            _immutable(errs, "spec.completions", spec.get("completions"), before.get("completions"))
        if _template_core(spec.get("template")) != _template_core(before.get("template")):
            errs.invalid("spec.template", spec.get("template"), "field is immutable")


def _template_core(template: Any) -> Any:
    """A Job's template without what a suspended Job may change (scheduling directives)."""
    template = json.loads(json.dumps(template or {}))
    pod = as_dict(template.get("spec"))
    if isinstance(pod, dict):
        for key in ("nodeSelector", "tolerations", "affinity", "schedulingGates"):
            pod.pop(key, None)
    meta = template.get("metadata")
    if isinstance(meta, dict):
        meta.pop("labels", None)
        meta.pop("annotations", None)
    return template


_CRON_DESCRIPTORS = frozenset(
    {"@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly"}
)
_CRON_FIELD = re.compile(
    r"^(\*|\?|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?(,(\*|[0-9A-Za-z]+(-[0-9A-Za-z]+)?)(/[0-9]+)?)*$"
)


def _cron_problem(schedule: str) -> str | None:
    text = schedule.strip()
    if text.startswith(("TZ=", "CRON_TZ=")):
        text = text.split(" ", 1)[1] if " " in text else ""
    if text.startswith("@"):
        if text in _CRON_DESCRIPTORS or text.startswith("@every "):
            return None
        return f"unrecognized descriptor: {text}"
    parts = text.split()
    if len(parts) != 5:
        return f"expected exactly 5 fields, found {len(parts)}: {text}"
    for part in parts:
        if not _CRON_FIELD.match(part):
            return (
                f"failed to parse int from {part}: strconv.Atoi: parsing {go_value(part)}: "
                "invalid syntax"
            )
    return None


def cronjob(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    name = str(as_dict(obj.get("metadata")).get("name", ""))
    if len(name) > 52:
        errs.invalid("metadata.name", name, "must be no more than 52 characters")
    spec = _spec(obj)
    schedule = spec.get("schedule")
    if not schedule:
        errs.required("spec.schedule")
    elif isinstance(schedule, str):
        problem = _cron_problem(schedule)
        if problem:
            errs.invalid("spec.schedule", schedule, problem)
    errs.enum("spec.concurrencyPolicy", spec.get("concurrencyPolicy"), CONCURRENCY_POLICIES)
    for key in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        errs.non_negative(f"spec.{key}", spec.get(key))
    job_template = spec.get("jobTemplate")
    if job_template is None:
        errs.required("spec.jobTemplate")
    else:
        _job_spec(as_dict(as_dict(job_template).get("spec")), "spec.jobTemplate.spec", errs)


# --------------------------------------------------------------------------- core


def service(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    spec = _spec(obj)
    kind = spec.get("type") or "ClusterIP"
    errs.enum("spec.type", spec.get("type"), SERVICE_TYPES)
    errs.enum("spec.sessionAffinity", spec.get("sessionAffinity"), SESSION_AFFINITIES)
    errs.enum("spec.internalTrafficPolicy", spec.get("internalTrafficPolicy"), TRAFFIC_POLICIES)
    external = spec.get("externalTrafficPolicy")
    if external and kind not in ("NodePort", "LoadBalancer"):
        errs.invalid(
            "spec.externalTrafficPolicy",
            external,
            "may only be set when `type` is 'NodePort' or 'LoadBalancer'",
        )
    else:
        errs.enum("spec.externalTrafficPolicy", external or None, TRAFFIC_POLICIES)
    for key, value in as_dict(spec.get("selector")).items():
        errs.label_name("spec.selector", key)
        errs.label_value("spec.selector", value)
    errs.enum("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"), IP_FAMILY_POLICIES)
    for i, family in enumerate(as_list(spec.get("ipFamilies"))):
        errs.enum(f"spec.ipFamilies[{i}]", family, ("IPv4", "IPv6"))
    ports = as_list(spec.get("ports"))
    headless = spec.get("clusterIP") == "None"
    if kind == "ExternalName":
        if not spec.get("externalName"):
            errs.required("spec.externalName")
    elif not ports and not headless:
        errs.required("spec.ports")
    names: set[str] = set()
    for i, raw in enumerate(ports):
        port, where = as_dict(raw), f"spec.ports[{i}]"
        name = port.get("name")
        if len(ports) > 1 and not name:
            errs.required(f"{where}.name")
        elif isinstance(name, str) and name:
            errs.dns_label(f"{where}.name", name)
            if name in names:
                errs.duplicate(f"{where}.name", name)
            names.add(name)
        number = port.get("port")
        if not number:
            errs.invalid(f"{where}.port", number or 0, "must be between 1 and 65535, inclusive")
        else:
            errs.port_number(f"{where}.port", number)
        errs.enum(f"{where}.protocol", port.get("protocol"), PROTOCOLS)
        errs.int_or_port_name(f"{where}.targetPort", port.get("targetPort"))
        if isinstance(port.get("appProtocol"), str):
            errs.label_name(f"{where}.appProtocol", port["appProtocol"])
        node_port = port.get("nodePort")
        if node_port and kind == "ClusterIP":
            errs.forbidden(f"{where}.nodePort", "may not be used when `type` is 'ClusterIP'")
        elif node_port and not 30000 <= node_port <= 32767:
            errs.invalid(
                f"{where}.nodePort",
                node_port,
                "provided port is not in the valid range. The range of valid ports is 30000-32767",
            )
    if old is not None:
        before = _spec(old)
        old_ip, new_ip = before.get("clusterIP"), spec.get("clusterIP")
        changing_type = "ExternalName" in (kind, before.get("type"))
        if old_ip and new_ip and old_ip != new_ip and not changing_type:
            errs.invalid(
                "spec.clusterIPs[0]",
                as_list(spec.get("clusterIPs")) or [new_ip],
                "may not change once set",
            )
            errs.invalid("spec.clusterIP", new_ip, "field is immutable")


def _config_keys(obj: ObjView, errs: Errors, sections: tuple[str, ...]) -> None:
    seen: dict[str, str] = {}
    size = 0
    for section in sections:
        for key, value in as_dict(obj.get(section)).items():
            if not _CONFIG_KEY.match(key) or key in (".", ".."):
                errs.invalid(f"{section}[{key}]", key, _CONFIG_KEY_MESSAGE)
            if key in seen:
                errs.invalid(f"{section}[{key}]", key, f"duplicate of key present in {seen[key]}")
            seen[key] = section
            size += len(key) + len(str(value or ""))
    if size > _MAX_CONFIG_BYTES:
        errs.too_long("", _MAX_CONFIG_BYTES)


def _immutable_data(
    obj: ObjView, old: ObjView | None, errs: Errors, sections: tuple[str, ...]
) -> None:
    if old is None or not old.get("immutable"):
        return
    if not obj.get("immutable"):
        errs.forbidden("immutable", "field is immutable when `immutable` is set")
    for section in sections:
        if (obj.get(section) or {}) != (old.get(section) or {}):
            errs.forbidden(section, "field is immutable when `immutable` is set")


def configmap(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    _config_keys(obj, errs, ("data", "binaryData"))
    _immutable_data(obj, old, errs, ("data", "binaryData"))


_SECRET_REQUIRED_KEYS = {
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
}


def secret(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    _config_keys(obj, errs, ("data", "stringData"))
    kind = obj.get("type") or "Opaque"
    # stringData is merged into data before validation (the v1 conversion)
    plain = as_dict(obj.get("stringData"))
    data = {**as_dict(obj.get("data")), **plain}
    for key in _SECRET_REQUIRED_KEYS.get(kind, ()):
        if key not in data:
            errs.required(f"data[{key}]")
    for key in (".dockercfg", ".dockerconfigjson"):
        if kind.endswith(key.lstrip(".")) and key in data:
            problem = _json_problem(data[key], encoded=key not in plain)
            if problem:
                errs.invalid(f"data[{key}]", _REDACTED, problem)
    if kind == "kubernetes.io/basic-auth" and not ({"username", "password"} & set(data)):
        errs.required("data[username]")
        errs.required("data[password]")
    if kind == "kubernetes.io/service-account-token":
        annotations = as_dict(as_dict(obj.get("metadata")).get("annotations"))
        if not annotations.get("kubernetes.io/service-account.name"):
            errs.required("metadata.annotations[kubernetes.io/service-account.name]")
    if old is not None:
        _immutable(errs, "type", kind, old.get("type") or "Opaque")
    _immutable_data(obj, old, errs, ("data",))


def _json_problem(value: Any, *, encoded: bool) -> str | None:
    import base64
    import binascii

    try:
        json.loads(base64.b64decode(str(value)) if encoded else str(value))
    except (binascii.Error, ValueError) as exc:
        return f"invalid character in the document: {exc}"
    return None


def persistentvolumeclaim(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    spec = _spec(obj)
    modes = as_list(spec.get("accessModes"))
    if not modes and not spec.get("dataSourceRef"):
        errs.required("spec.accessModes", "at least 1 access mode is required")
    for mode in modes:
        if mode not in ACCESS_MODES:
            errs.not_supported("spec.accessModes", mode, ACCESS_MODES)
    errs.enum("spec.volumeMode", spec.get("volumeMode"), VOLUME_MODES)
    class_name = spec.get("storageClassName")
    if isinstance(class_name, str) and class_name:
        errs.dns_subdomain("spec.storageClassName", class_name)
    errs.label_selector("spec.selector", spec.get("selector"))
    requests = as_dict(as_dict(spec.get("resources")).get("requests"))
    storage = requests.get("storage")
    if storage is None:
        errs.required("spec.resources[storage]")
    else:
        value = quantity(storage)
        if value is not None and value <= 0:
            errs.invalid(
                "spec.resources.requests[storage]", str(storage), "must be greater than zero"
            )
    if old is not None:
        bound = bool(_spec(old).get("volumeName"))
        if _pvc_fixed(_spec(old), bound) != _pvc_fixed(spec, bound):
            errs.forbidden(
                "spec",
                "spec is immutable after creation except resources.requests and "
                "volumeAttributesClassName for bound claims",
            )


def _pvc_fixed(spec: Mapping[str, Any], bound: bool) -> dict[str, Any]:
    """The part of a claim's spec that may not change (binding may set volumeName)."""
    fixed: dict[str, Any] = json.loads(json.dumps(spec))
    fixed.pop("volumeAttributesClassName", None)
    if not bound:
        fixed.pop("volumeName", None)
    requests = as_dict(fixed.get("resources")).get("requests")
    if isinstance(requests, dict):
        requests.pop("storage", None)
    return fixed


# --------------------------------------------------------------------------- autoscaling, policy


def horizontalpodautoscaler(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    validate_hpa(_spec(obj), errs)


def poddisruptionbudget(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    spec = _spec(obj)
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        errs.invalid("spec", dict(spec), "minAvailable and maxUnavailable cannot be both set")
    for key in ("minAvailable", "maxUnavailable"):
        _rolling_amount(errs, f"spec.{key}", spec.get(key))
    policy = spec.get("unhealthyPodEvictionPolicy")
    errs.enum("spec.unhealthyPodEvictionPolicy", policy, ("AlwaysAllow", "IfHealthyBudget"))


def pod(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    validate_pod_spec(_spec(obj), "spec", errs)


def podtemplate(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    _template_metadata(as_dict(obj.get("template")), "template", errs)
    validate_pod_spec(as_dict(as_dict(obj.get("template")).get("spec")), "template.spec", errs)


VALIDATORS: Mapping[tuple[str, str], Validator] = {
    ("apps", "Deployment"): deployment,
    ("apps", "ReplicaSet"): replicaset,
    ("apps", "StatefulSet"): statefulset,
    ("apps", "DaemonSet"): daemonset,
    ("batch", "Job"): job,
    ("batch", "CronJob"): cronjob,
    ("", "Pod"): pod,
    ("", "PodTemplate"): podtemplate,
    ("", "Service"): service,
    ("", "ConfigMap"): configmap,
    ("", "Secret"): secret,
    ("", "PersistentVolumeClaim"): persistentvolumeclaim,
    ("networking.k8s.io", "Ingress"): ingress,
    ("autoscaling", "HorizontalPodAutoscaler"): horizontalpodautoscaler,
    ("policy", "PodDisruptionBudget"): poddisruptionbudget,
}


def check(group: str, kind: str, obj: ObjView, old: ObjView | None) -> None:
    """Raise kube-apiserver's 422 ``Invalid`` when :func:`validate` finds causes."""
    from . import errors

    causes = validate(group, kind, obj, old)
    if causes:
        name = str(as_dict(obj.get("metadata")).get("name", ""))
        raise errors.invalid(group, kind, name, causes)
