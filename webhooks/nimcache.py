"""Admission rules for NIMCache, as NVIDIA's validating webhook applies them.

The reference's §6.2: NGC model selection (``all`` alone; explicit profiles
exclude the selectors), required NGC secrets, storage, proxy settings, and the
whole spec immutable after creation. Paths start with ``nimcache.spec``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from typing import Any

from nimctl_runtime import field
from nimctl_runtime.field import FieldError, ValidationFailed
from webhooks.ranges import integer_range_errors, quantity_errors, spec_schema

API_VERSION = "apps.nvidia.com/v1alpha1"
P = "nimcache.spec"
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
QOS_PROFILES = ("latency", "throughput")
PROFILE_EXCLUSIVE = (
    "precision",
    "engine",
    "tensorParallelism",
    "qosProfile",
    "gpus",
    "lora",
    "buildable",
)
_HOSTNAME = re.compile(r"^\.?[a-zA-Z0-9.-]+$")
_IPV4_PORT = re.compile(r"^(\d{1,3}(?:\.\d{1,3}){3})(?::(\d{1,5}))?$")
_IPV6_PORT = re.compile(r"^\[([0-9a-fA-F:.]+)\](?::(\d{1,5}))?$")
_IPV6_CIDR = re.compile(r"^\[([0-9a-fA-F:.]+)\]/(\d{1,3})$")


def _m(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _empty(value: Any) -> bool:
    if value is None or value in ("", [], {}):
        return True
    if isinstance(value, Mapping):
        return all(_empty(v) for v in value.values())
    return False


def valid_no_proxy_token(token: str) -> bool:
    """Hostname/domain, IPv4[:port], [IPv6][:port], IPv4 CIDR or [IPv6]/n."""
    try:
        if "/" in token and not token.startswith("["):
            ipaddress.IPv4Network(token, strict=False)
            return True
        m6 = _IPV6_CIDR.match(token)
        if m6:
            ipaddress.IPv6Network(f"{m6.group(1)}/{m6.group(2)}", strict=False)
            return True
        m = _IPV6_PORT.match(token)
        if m:
            ipaddress.IPv6Address(m.group(1))
            return m.group(2) is None or 0 < int(m.group(2)) < 65536
        m = _IPV4_PORT.match(token)
        if m:
            ipaddress.IPv4Address(m.group(1))
            return m.group(2) is None or 0 < int(m.group(2)) < 65536
    except ValueError:
        return False
    return bool(_HOSTNAME.match(token))


def _ngc(source: Mapping[str, Any]) -> list[FieldError]:
    ngc = source.get("ngc")
    if ngc is None:
        return []
    ngc = _m(ngc)
    errs: list[FieldError] = []
    base = f"{P}.source.ngc"
    model = _m(ngc.get("model"))
    profiles = model.get("profiles") or []
    if "all" in profiles and len(profiles) > 1:
        errs.append(
            field.invalid(
                f"{base}.model.profiles",
                profiles,
                "must only have a single entry when it contains 'all'",
            )
        )
    if profiles:
        for key in PROFILE_EXCLUSIVE:
            if model.get(key) not in (None, "", []):
                errs.append(
                    field.forbidden(
                        f"{base}.model.{key}",
                        f"must be empty if {base}.model.profiles is provided",
                    )
                )
    qos = model.get("qosProfile")
    if qos and qos not in QOS_PROFILES:
        errs.append(field.not_supported(f"{base}.model.qosProfile", qos, QOS_PROFILES))
    if not ngc.get("authSecret"):
        errs.append(field.required(f"{base}.authSecret", "must be non-empty"))
    if not ngc.get("modelPuller"):
        errs.append(field.required(f"{base}.modelPuller", "must be non-empty"))
    return errs


def _storage(spec: Mapping[str, Any]) -> list[FieldError]:
    pvc = _m(_m(spec.get("storage")).get("pvc"))
    if _empty(pvc):
        return [field.required(f"{P}.storage", "must not be empty")]
    errs: list[FieldError] = []
    if not pvc.get("create") and not pvc.get("name"):
        errs.append(
            field.required(
                f"{P}.storage.pvc.name", f"must be provided when {P}.storage.pvc.create is false"
            )
        )
    mode = pvc.get("volumeAccessMode")
    if mode and mode not in ACCESS_MODES:
        errs.append(
            field.invalid(
                f"{P}.storage.pvc.volumeAccessMode", mode, "unrecognized volumeAccessMode"
            )
        )
    return errs


def _proxy(spec: Mapping[str, Any]) -> list[FieldError]:
    proxy = _m(spec.get("proxy"))
    errs: list[FieldError] = []
    for raw in str(proxy.get("noProxy") or "").split(","):
        token = raw.strip()
        if token and not valid_no_proxy_token(token):
            errs.append(field.invalid(f"{P}.proxy.noProxy", token, "invalid token"))
    for key in ("httpsProxy", "httpProxy"):
        value = proxy.get(key)
        if value and not str(value).startswith(("http://", "https://")):
            errs.append(
                field.invalid(f"{P}.proxy.{key}", value, "must start with http:// or https://")
            )
    return errs


class NIMCacheValidator:
    """The NIMCache admission Validator."""

    def __init__(self) -> None:
        spec_schema(API_VERSION, "NIMCache")  # built now, not during the first review

    def check(self, obj: dict[str, Any]) -> list[FieldError]:
        spec = _m(obj.get("spec"))
        # What Go's decode would refuse comes first: the rules expect decoded types.
        schema = spec_schema(API_VERSION, "NIMCache")
        decode_errs = integer_range_errors(obj.get("spec"), schema, P)
        if decode_errs:
            return decode_errs
        pvc = _m(_m(spec.get("storage")).get("pvc"))
        return (
            _ngc(_m(spec.get("source")))
            + _storage(spec)
            + _proxy(spec)
            + quantity_errors(pvc.get("size"), f"{P}.storage.pvc.size")
        )

    async def validate_create(self, obj: dict[str, Any]) -> list[str]:
        errs = self.check(obj)
        if errs:
            raise ValidationFailed(errs)
        return []

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        errs = self.check(new)
        if old.get("spec") != new.get("spec"):
            errs.append(field.forbidden(P, "is immutable once the object is created"))
        if errs:
            raise ValidationFailed(errs)
        return []

    async def validate_delete(self, obj: dict[str, Any]) -> list[str]:
        return []
