"""Admission rules for NIMService, as NVIDIA's validating webhook applies them.

Every rule of the reference's §6.1, on create and update, with NVIDIA's field
paths (``nimservice.spec.…``), messages and error types; warnings stay warnings.
Unlike NVIDIA's webhook, image errors are reported once, not twice. Rules run
on the raw object (a dict), so even objects the typed model would reject get
precise paths. Cluster facts (server version for DRA, KServe's mode) are read
through :class:`~webhooks.facts.ClusterFacts`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nimctl_runtime import field
from nimctl_runtime.field import FieldError, ValidationFailed
from nimctl_runtime.quantity import QuantityError, parse_quantity
from platforms.standalone.dra_checks import semver_error
from webhooks.facts import (
    ClusterFacts,
    FactUnavailable,
    is_knative,
    kserve_deployment_mode,
    version_tuple,
)
from webhooks.ranges import integer_range_errors, quantity_errors, spec_schema

API_VERSION = "apps.nvidia.com/v1alpha1"
P = "nimservice.spec"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
DRA_MIN_VERSION = (1, 34, 0)
SELECTOR_OPS = (
    "Equal",
    "NotEqual",
    "GreaterThan",
    "GreaterThanOrEqual",
    "LessThan",
    "LessThanOrEqual",
)
AUTH_SECRET_WARNING = (
    "nimservice.spec.authSecret is empty: NGC_API_KEY will not be injected. Omit this only "
    "for air-gapped deployments with a pre-populated local model cache"
)
DEPRECATED_INGRESS_WARNING = ".spec.expose.ingress is deprecated, use .spec.expose.router instead."
LOADBALANCER_WARNING = (
    "spec.expose.service.type is set to LoadBalancer, but spec.expose.router.gateway or "
    "spec.expose.router.ingress is also set. This creates two entry points for the service. "
    "Consider only using one of them."
)
STORAGE_SOURCES = (
    f"{P}.storage.nimCache, {P}.storage.pvc, {P}.storage.emptyDir or {P}.storage.hostPath"
)


def _m(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _empty(value: Any) -> bool:
    """Go's "all fields zero": None, empty, or a mapping of empty values."""
    if value is None or value in ("", [], {}):
        return True
    if isinstance(value, Mapping):
        return all(_empty(v) for v in value.values())
    return False


def _image(spec: Mapping[str, Any]) -> list[FieldError]:
    image = _m(spec.get("image"))
    errs = []
    if not image.get("repository"):
        errs.append(field.required(f"{P}.image.repository", "is required"))
    if not image.get("tag"):
        errs.append(field.required(f"{P}.image.tag", "is required"))
    return errs


def _pvc(pvc: Mapping[str, Any], path: str, parent: str) -> list[FieldError]:
    errs = []
    if not pvc.get("create") and not pvc.get("name"):
        errs.append(
            field.required(f"{path}.name", f"must be provided when {parent}.create is false")
        )
    mode = pvc.get("volumeAccessMode")
    if mode and mode not in ACCESS_MODES:
        errs.append(
            field.invalid(f"{path}.volumeAccessMode", mode, "unrecognized volumeAccessMode")
        )
    return errs


def _storage(spec: Mapping[str, Any]) -> list[FieldError]:
    storage = _m(spec.get("storage"))
    errs: list[FieldError] = []
    shm = storage.get("sharedMemorySizeLimit")
    if shm is not None:
        try:
            if parse_quantity(shm) <= 0:
                errs.append(field.invalid(f"{P}.storage.sharedMemorySizeLimit", shm, "must be > 0"))
        except QuantityError as e:
            errs.append(field.invalid(f"{P}.storage.sharedMemorySizeLimit", shm, str(e)))
    sources = [
        not _empty(storage.get("nimCache")),
        not _empty(storage.get("pvc")),
        storage.get("emptyDir") is not None,
        bool(storage.get("hostPath")),
    ]
    if not any(sources):
        errs.append(field.required(f"{P}.storage", f"one of {STORAGE_SOURCES}, must be defined"))
    elif sum(sources) > 1:
        errs.append(
            field.invalid(
                f"{P}.storage",
                "multiple storage sources defined",
                f"only one of {STORAGE_SOURCES}, must be defined",
            )
        )
    cache = _m(storage.get("nimCache"))
    if cache.get("profile") and not cache.get("name"):
        errs.append(
            field.required(
                f"{P}.storage.nimCache.name", f"is required when {P}.storage.nimCache is defined"
            )
        )
    if not _empty(storage.get("pvc")):
        errs += _pvc(_m(storage.get("pvc")), f"{P}.storage.pvc", f"{P}.storage.pvc")
    return errs


def _expose(spec: Mapping[str, Any]) -> tuple[list[FieldError], list[str]]:
    expose = _m(spec.get("expose"))
    router = _m(expose.get("router"))
    service = _m(expose.get("service"))
    errs: list[FieldError] = []
    warnings: list[str] = []
    has_ingress, has_gateway = router.get("ingress") is not None, router.get("gateway") is not None
    if (has_ingress or has_gateway) and not router.get("hostDomainName"):
        errs.append(field.required(f"{P}.expose.router.hostDomainName", "is required"))
    if has_ingress and has_gateway:
        errs.append(
            field.forbidden(
                f"{P}.expose.router", "ingress and gateway cannot be specified together"
            )
        )
    if _m(expose.get("ingress")).get("enabled"):
        warnings.append(DEPRECATED_INGRESS_WARNING)
        if has_ingress:
            errs.append(
                field.forbidden(
                    f"{P}.expose.ingress",
                    f"{P}.expose.ingress is deprecated. Omit the field if you use "
                    ".spec.expose.router instead",
                )
            )
    if service.get("type") == "LoadBalancer" and (has_ingress or has_gateway):
        warnings.append(LOADBALANCER_WARNING)
    if _m(router.get("gateway")).get("grpcRoutesEnabled") and service.get("grpcPort") is None:
        errs.append(
            field.required(
                f"{P}.expose.service.grpcPort",
                "must be set when .spec.expose.router.gateway.grpcRoutesEnabled is true",
            )
        )
    return errs, warnings


def _metrics_scale_resources(spec: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    metrics = _m(spec.get("metrics"))
    if metrics.get("enabled") and _empty(metrics.get("serviceMonitor")):
        errs.append(
            field.required(
                f"{P}.metrics.serviceMonitor", f"must be defined if {P}.metrics.enabled is true"
            )
        )
    scale = _m(spec.get("scale"))
    if scale.get("enabled"):
        if _empty(scale.get("hpa")):
            errs.append(
                field.required(f"{P}.scale.hpa", f"must be defined if {P}.scale.enabled is true")
            )
        if spec.get("replicas") is not None:
            errs.append(
                field.forbidden(
                    f"{P}.replicas",
                    "cannot be set when autoscaling is enabled; configure min/max replicas in "
                    "spec.scale.hpa instead",
                )
            )
    if _m(spec.get("resources")).get("claims") is not None:
        errs.append(field.forbidden(f"{P}.resources.claims", "must be empty"))
    return errs


def _dra_device(device: Mapping[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    if not device.get("name"):
        errs.append(field.required(f"{path}.name", "is required"))
    count = device.get("count")
    if count is not None and isinstance(count, int) and count <= 0:
        errs.append(field.invalid(f"{path}.count", count, "must be > 0"))
    for key in ("deviceClassName", "driverName"):
        if key in device and not device.get(key):
            errs.append(field.required(f"{path}.{key}", "is required"))
    driver = device.get("driverName") or "gpu.nvidia.com"
    seen: set[str] = set()
    for kind in ("attributeSelectors", "capacitySelectors"):
        for i, raw_sel in enumerate(device.get(kind) or []):
            sel = _m(raw_sel)
            sp = f"{path}.{kind}[{i}]"
            key = str(sel.get("key", ""))
            norm = key if "/" in key else f"{driver}/{key}"
            if norm in seen:
                errs.append(field.duplicate(sp, norm))
            seen.add(norm)
            op = sel.get("op")
            if kind == "attributeSelectors" and not op:
                errs.append(field.required(f"{sp}.op", "is required"))
            elif op and op not in SELECTOR_OPS:
                errs.append(
                    field.invalid(f"{sp}.op", op, f"must be one of [{' '.join(SELECTOR_OPS)}]")
                )
            if kind == "attributeSelectors":
                errs += _dra_attribute_value(_m(sel.get("value")), f"{sp}.value", sel.get("value"))
            elif sel.get("value") is None:
                errs.append(field.required(f"{sp}.value", "is required"))
    return errs


def _dra_attribute_value(value: Mapping[str, Any], path: str, raw: Any) -> list[FieldError]:
    keys = [
        k
        for k in ("boolValue", "intValue", "stringValue", "versionValue")
        if value.get(k) is not None
    ]
    if not keys:
        return [
            field.required(
                path, "one of boolValue, intValue, stringValue or versionValue must be provided"
            )
        ]
    if len(keys) > 1:
        return [
            field.invalid(
                path,
                "multiple attribute values defined",
                "only one of boolValue, intValue, stringValue or versionValue must be provided",
            )
        ]
    version = value.get("versionValue")
    problem = semver_error(str(version)) if version is not None else None
    if problem is not None:
        return [field.invalid(path, version, f"must be a valid semantic version: {problem}")]
    return []


async def _dra(spec: Mapping[str, Any], facts: ClusterFacts) -> list[FieldError]:
    resources = spec.get("draResources") or []
    if not resources:
        return []
    errs: list[FieldError] = []
    try:
        version = await facts.server_version()
        too_old = version_tuple(version) < DRA_MIN_VERSION
    except FactUnavailable as e:
        return [field.internal(f"{P}.draResources", f"cannot check the cluster version: {e}")]
    if too_old:
        errs.append(
            field.forbidden(
                f"{P}.draResources",
                "is not supported by NIM-Operator on this cluster, please upgrade to k8s version "
                "'v1.34.0' or higher",
            )
        )
    replicas = spec.get("replicas")
    scale_enabled = bool(_m(spec.get("scale")).get("enabled"))
    names: set[str] = set()
    for i, raw_res in enumerate(resources):
        res = _m(raw_res)
        path = f"{P}.draResources[{i}]"
        sources = [
            k
            for k in ("resourceClaimName", "resourceClaimTemplateName", "claimCreationSpec")
            if res.get(k)
        ]
        choices = (
            f"{path}.resourceClaimName, {path}.resourceClaimTemplateName"
            f" or {path}.claimCreationSpec"
        )
        if not sources:
            errs.append(field.required(path, f"one of {choices} must be provided"))
        elif len(sources) > 1:
            errs.append(
                field.invalid(
                    path,
                    "multiple dra resource sources defined",
                    f"only one of {choices} must be provided",
                )
            )
        claim_name = res.get("resourceClaimName")
        if claim_name:
            if isinstance(replicas, int) and replicas > 1:
                errs.append(
                    field.forbidden(
                        f"{path}.resourceClaimName",
                        f"must not be set when {P}.replicas > 1, use "
                        f"{path}.resourceClaimTemplateName instead",
                    )
                )
            if scale_enabled:
                errs.append(
                    field.forbidden(
                        f"{path}.resourceClaimName",
                        f"must not be set when {P}.scale.enabled is true, use "
                        f"{path}.resourceClaimTemplateName instead",
                    )
                )
        if claim_name:
            # NVIDIA's rule: a claim name once (a template may serve several entries).
            if claim_name in names:
                errs.append(field.duplicate(f"{path}.resourceClaimName", claim_name))
            names.add(claim_name)
        spec_ = res.get("claimCreationSpec")
        if spec_ is not None:
            devices = _m(spec_).get("devices") or []
            if not devices:
                errs.append(
                    field.required(f"{path}.claimCreationSpec.devices", "must be non-empty")
                )
            for j, device in enumerate(devices):
                errs += _dra_device(_m(device), f"{path}.claimCreationSpec.devices[{j}]")
    return errs


async def _kserve(
    spec: Mapping[str, Any], obj: dict[str, Any], facts: ClusterFacts
) -> list[FieldError]:
    if spec.get("inferencePlatform") != "kserve":
        return []
    errs: list[FieldError] = []
    if spec.get("multiNode") is not None:
        errs.append(
            field.forbidden(f"{P}.multiNode", "cannot be set when the inferencePlatform is KServe")
        )
    try:
        mode = await kserve_deployment_mode(facts, obj)
    except FactUnavailable as e:
        return [*errs, field.internal(f"{P}.inferencePlatform", str(e))]
    if not is_knative(mode):
        return errs
    knative = "cannot be set when KServe runs in knative mode"
    expose = _m(spec.get("expose"))
    router = _m(expose.get("router"))
    if _m(spec.get("scale")).get("enabled"):
        errs.append(field.forbidden(f"{P}.scale", f"{P}.scale (autoscaling) {knative}"))
    if _m(expose.get("ingress")).get("enabled"):
        errs.append(field.forbidden(f"{P}.expose.ingress", f"{P}.expose.ingress {knative}"))
    if router.get("ingress") is not None:
        errs.append(
            field.forbidden(f"{P}.expose.router.ingress", f"{P}.expose.router.ingress {knative}")
        )
    if router.get("gateway") is not None:
        errs.append(
            field.forbidden(f"{P}.expose.router.gateway", f"{P}.expose.router.gateway {knative}")
        )
    if _m(spec.get("metrics")).get("enabled"):
        errs.append(field.forbidden(f"{P}.metrics", f"{P}.metrics {knative}"))
    return errs


def _immutable(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldError]:
    errs: list[FieldError] = []
    if old.get("multiNode") != new.get("multiNode"):
        errs.append(field.forbidden("spec.multiNode", "is immutable once the resource is created"))
    old_pvc = _m(_m(old.get("storage")).get("pvc"))
    new_pvc = _m(_m(new.get("storage")).get("pvc"))
    if old_pvc.get("create") is True and dict(old_pvc) != dict(new_pvc):
        errs.append(
            field.forbidden(
                "spec.storage.pvc",
                "is immutable once it is created with spec.storage.pvc.create = true",
            )
        )
    if old.get("draResources") and old.get("draResources") != new.get("draResources"):
        errs.append(field.forbidden("spec.draResources", "is immutable"))
    return errs


class NIMServiceValidator:
    """The NIMService admission Validator (create, update; delete is a no-op)."""

    def __init__(self, facts: ClusterFacts) -> None:
        self.facts = facts
        spec_schema(API_VERSION, "NIMService")  # built now, not during the first review

    async def check(self, obj: dict[str, Any]) -> tuple[list[FieldError], list[str]]:
        spec = _m(obj.get("spec"))
        # What Go's decode would refuse comes first: the rules expect decoded types.
        decode_errs = integer_range_errors(
            obj.get("spec"), spec_schema(API_VERSION, "NIMService"), P
        )
        if decode_errs:
            return decode_errs, []
        errs = _image(spec)
        warnings: list[str] = []
        if not spec.get("authSecret"):
            warnings.append(AUTH_SECRET_WARNING)
        errs += _storage(spec)
        expose_errs, expose_warnings = _expose(spec)
        errs += expose_errs
        warnings += expose_warnings
        errs += _metrics_scale_resources(spec)
        errs += await _dra(spec, self.facts)
        errs += await _kserve(spec, obj, self.facts)
        pvc = _m(_m(spec.get("storage")).get("pvc"))
        errs += quantity_errors(pvc.get("size"), f"{P}.storage.pvc.size")
        return errs, warnings

    async def validate_create(self, obj: dict[str, Any]) -> list[str]:
        errs, warnings = await self.check(obj)
        if errs:
            raise ValidationFailed(errs, warnings)
        return warnings

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        errs, warnings = await self.check(new)
        errs += _immutable(_m(old.get("spec")), _m(new.get("spec")))
        if errs:
            raise ValidationFailed(errs, warnings)
        return warnings

    async def validate_delete(self, obj: dict[str, Any]) -> list[str]:
        return []
