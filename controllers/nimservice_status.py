"""NIMService status as pure functions: readiness, conditions, state, model endpoints.

Only the ``Ready`` and ``Failed`` condition types are written, with NVIDIA's
reasons and messages (nim-operator.md §2.6, §2.10, §11), so tooling written
for NVIDIA's operator reads nimctl's status unchanged.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

from api.apps.v1alpha1.common import STATE_FAILED, STATE_NOT_READY, STATE_PENDING, STATE_READY
from api.apps.v1alpha1.nimservice import CONDITION_FAILED as COND_FAILED
from api.apps.v1alpha1.nimservice import CONDITION_READY as COND_READY
from api.apps.v1alpha1.nimservice import (
    REASON_FAILED,
    REASON_NIMCACHE_FAILED,
    REASON_NIMCACHE_NOT_FOUND,
    REASON_NIMCACHE_NOT_READY,
    REASON_NOT_READY,
    REASON_READY,
    STATE_PVC_CREATED,
)
from nimctl_runtime.meta import set_condition
from platforms.nimservice import deployment_readiness

__all__ = [
    "COND_FAILED",
    "COND_READY",
    "REASON_FAILED",
    "REASON_NIMCACHE_FAILED",
    "REASON_NIMCACHE_NOT_FOUND",
    "REASON_NIMCACHE_NOT_READY",
    "REASON_NOT_READY",
    "REASON_READY",
    "STATE_FAILED",
    "STATE_NOT_READY",
    "STATE_PENDING",
    "STATE_PVC_CREATED",
    "STATE_READY",
    "ModelListError",
    "cluster_endpoint",
    "deployment_readiness",
    "external_endpoint",
    "model_name_from_metadata",
    "model_name_from_models",
    "not_ready_event",
    "ready_event",
    "set_failed",
    "set_not_ready",
    "set_ready",
]


def _copy(status: Mapping[str, Any] | None) -> dict[str, Any]:
    return copy.deepcopy(dict(status or {}))


def set_ready(
    status: Mapping[str, Any] | None, message: str, *, now: str | None = None
) -> dict[str, Any]:
    """``Ready=True/Ready``, ``Failed=False/Ready``, state Ready."""
    out = _copy(status)
    conds = set_condition(out.get("conditions"), COND_READY, "True", REASON_READY, message, now=now)
    out["conditions"] = set_condition(conds, COND_FAILED, "False", REASON_READY, "", now=now)
    out["state"] = STATE_READY
    return out


def set_not_ready(
    status: Mapping[str, Any] | None,
    reason: str,
    message: str,
    *,
    now: str | None = None,
) -> dict[str, Any]:
    """``Ready=False/<reason>``, ``Failed=False/Ready`` with the same message, state NotReady."""
    out = _copy(status)
    conds = set_condition(out.get("conditions"), COND_READY, "False", reason, message, now=now)
    out["conditions"] = set_condition(conds, COND_FAILED, "False", REASON_READY, message, now=now)
    out["state"] = STATE_NOT_READY
    return out


def set_failed(
    status: Mapping[str, Any] | None,
    reason: str,
    message: str,
    *,
    now: str | None = None,
) -> dict[str, Any]:
    """``Ready=False/Failed``, ``Failed=True/<reason>``, state Failed."""
    out = _copy(status)
    conds = set_condition(out.get("conditions"), COND_READY, "False", REASON_FAILED, "", now=now)
    out["conditions"] = set_condition(conds, COND_FAILED, "True", reason, message, now=now)
    out["state"] = STATE_FAILED
    return out


def cluster_endpoint(service: Mapping[str, Any] | None, port: int) -> str:
    """``<clusterIP>:<port>``, empty without a cluster IP."""
    ip = ((service or {}).get("spec") or {}).get("clusterIP") or ""
    if not ip or ip == "None":
        return ""
    return f"{ip}:{port}"


def external_endpoint(
    name: str,
    service: Mapping[str, Any] | None,
    ingress: Mapping[str, Any] | None,
    port: int,
    *,
    ingress_enabled: bool,
) -> str:
    """Where users outside the cluster reach the NIM (§2.10); "" when nowhere."""
    if ingress_enabled and ingress:
        for rule in (ingress.get("spec") or {}).get("rules") or ():
            host = rule.get("host")
            for path in ((rule.get("http") or {}).get("paths")) or ():
                backend = ((path.get("backend") or {}).get("service") or {}).get("name")
                if host and backend == name:
                    return str(host)
        lb = ((ingress.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        if lb:
            return str(lb[0].get("hostname") or lb[0].get("ip") or "")
        return ""
    spec = (service or {}).get("spec") or {}
    if spec.get("type") == "LoadBalancer":
        ip = spec.get("loadBalancerIP") or ""
        if not ip:
            lb = (((service or {}).get("status") or {}).get("loadBalancer") or {}).get("ingress")
            if lb:
                ip = lb[0].get("ip") or lb[0].get("hostname") or ""
        if ip:
            return f"{ip}:{port}"
    return ""


class ModelListError(ValueError):
    """The ``/v1/models`` answer is not an OpenAI-style model list."""


def model_name_from_models(body: str | bytes | Mapping[str, Any]) -> str:
    """The served model's name from a ``/v1/models`` answer (LoRA adapters skipped)."""
    data: Any = body
    if isinstance(body, str | bytes):
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise ModelListError(f"/v1/models did not return JSON: {exc}") from exc
    if not isinstance(data, Mapping) or data.get("object") != "list":
        raise ModelListError('/v1/models did not return an object of type "list"')
    entries = [e for e in data.get("data") or () if isinstance(e, Mapping)]
    if not entries:
        return ""
    if len(entries) == 1:
        return str(entries[0].get("id") or "")
    for e in entries:
        if e.get("object") == "model" and e.get("root") == e.get("id"):
            return str(e.get("id") or "")
    return ""


def model_name_from_metadata(body: str | bytes | Mapping[str, Any]) -> str:
    """The model name from ``/v1/metadata`` (``modelInfo[0].shortName`` before ':')."""
    data: Any = body
    if isinstance(body, str | bytes):
        try:
            data = json.loads(body)
        except ValueError as exc:
            raise ModelListError(f"/v1/metadata did not return JSON: {exc}") from exc
    info = (data or {}).get("modelInfo") or []
    if not info:
        return ""
    return str(info[0].get("shortName") or "").split(":")[0]


def not_ready_event(name: str, message: str) -> tuple[str, str, str]:
    return "Normal", REASON_NOT_READY, f"NIMService {name} not ready, msg: {message}"


def ready_event(name: str, message: str) -> tuple[str, str, str]:
    return "Normal", REASON_READY, f"NIMService {name} ready, msg: {message}"
