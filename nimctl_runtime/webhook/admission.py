"""AdmissionReview v1: decoding requests, building responses, JSONPatch.

Mirrors controller-runtime's ``pkg/webhook/admission``: a request is decoded
into :class:`AdmissionRequest` (v1 and v1beta1 bodies alike); handlers answer
with an :class:`AdmissionResponse` made by :func:`allowed`, :func:`denied`,
:func:`errored` or :func:`patched`; :func:`review_body` wraps it in an
AdmissionReview that echoes the request's apiVersion and uid. Errors are still
HTTP 200 with ``allowed: false`` and the code in ``response.status``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

ADMISSION_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")


class AdmissionDecodeError(ValueError):
    """The body is not an AdmissionReview this server can answer."""


@dataclass(frozen=True)
class AdmissionRequest:
    """The ``request`` part of an AdmissionReview, with the fields handlers use."""

    uid: str
    api_version: str
    kind: dict[str, str]
    resource: dict[str, str]
    sub_resource: str
    name: str
    namespace: str
    operation: str
    user_info: dict[str, Any]
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    dry_run: bool
    raw: dict[str, Any] = field(repr=False)


@dataclass
class AdmissionResponse:
    """What a handler decides; :func:`review_body` turns it into JSON."""

    allowed: bool
    code: int = 200
    reason: str = ""
    message: str = ""
    patch: list[dict[str, Any]] | None = None
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)

    def with_warnings(self, warnings: list[str]) -> AdmissionResponse:
        """Add warnings (kept in order, duplicates dropped)."""
        for w in warnings:
            if w not in self.warnings:
                self.warnings.append(w)
        return self


def decode_review(body: bytes) -> AdmissionRequest:
    """Parse an AdmissionReview body; raise AdmissionDecodeError saying what is wrong."""
    if not body:
        raise AdmissionDecodeError("request body is empty")
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise AdmissionDecodeError(f"request body is not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise AdmissionDecodeError("request body must be a JSON object (an AdmissionReview)")
    api_version = doc.get("apiVersion")
    if doc.get("kind") != "AdmissionReview" or api_version not in ADMISSION_API_VERSIONS:
        raise AdmissionDecodeError(
            f"expected kind AdmissionReview in {' or '.join(ADMISSION_API_VERSIONS)}, "
            f"got kind {doc.get('kind')!r} apiVersion {api_version!r}"
        )
    req = doc.get("request")
    if not isinstance(req, dict):
        raise AdmissionDecodeError("AdmissionReview has no request")
    uid = req.get("uid")
    if not isinstance(uid, str) or not uid:
        raise AdmissionDecodeError("AdmissionReview request.uid is missing")
    operation = req.get("operation", "")
    if operation not in OPERATIONS:
        raise AdmissionDecodeError(
            f"request.operation {operation!r} is not one of {', '.join(OPERATIONS)}"
        )
    obj, old = req.get("object"), req.get("oldObject")
    for label, value in (("object", obj), ("oldObject", old)):
        if value is not None and not isinstance(value, dict):
            raise AdmissionDecodeError(f"request.{label} must be an object or null")
    return AdmissionRequest(
        uid=uid,
        api_version=str(api_version),
        kind=dict(req.get("kind") or {}),
        resource=dict(req.get("resource") or {}),
        sub_resource=str(req.get("subResource") or ""),
        name=str(req.get("name") or ""),
        namespace=str(req.get("namespace") or ""),
        operation=operation,
        user_info=dict(req.get("userInfo") or {}),
        object=obj,
        old_object=old,
        dry_run=bool(req.get("dryRun", False)),
        raw=req,
    )


def allowed(message: str = "") -> AdmissionResponse:
    """Admit the request."""
    return AdmissionResponse(allowed=True, message=message)


def denied(message: str, *, code: int = 403, reason: str = "Forbidden") -> AdmissionResponse:
    """Reject the request with a message the user sees (kubectl prints it)."""
    return AdmissionResponse(allowed=False, code=code, reason=reason, message=message)


def errored(code: int, message: str) -> AdmissionResponse:
    """Reject because the webhook itself failed (bad request, timeout, bug)."""
    reasons = {400: "BadRequest", 413: "RequestEntityTooLarge", 422: "Invalid", 504: "Timeout"}
    return AdmissionResponse(
        allowed=False, code=code, reason=reasons.get(code, "InternalError"), message=message
    )


def patched(original: dict[str, Any], mutated: dict[str, Any]) -> AdmissionResponse:
    """Admit with the RFC 6902 patch that turns *original* into *mutated* (may be empty)."""
    ops: list[dict[str, Any]] = list(jsonpatch.make_patch(original, mutated))
    return AdmissionResponse(allowed=True, patch=ops or None)


def review_body(request_api_version: str, uid: str, resp: AdmissionResponse) -> dict[str, Any]:
    """The AdmissionReview JSON answering a request (echoes apiVersion and uid)."""
    status: dict[str, Any] = {"code": resp.code}
    if resp.message:
        status["message"] = resp.message
    if resp.reason:
        status["reason"] = resp.reason
    if not resp.allowed:
        status["status"] = "Failure"
    out: dict[str, Any] = {"uid": uid, "allowed": resp.allowed, "status": status}
    if resp.patch:
        out["patchType"] = "JSONPatch"
        out["patch"] = base64.b64encode(json.dumps(resp.patch).encode()).decode()
    if resp.warnings:
        out["warnings"] = list(resp.warnings)
    if resp.audit_annotations:
        out["auditAnnotations"] = dict(resp.audit_annotations)
    return {"apiVersion": request_api_version, "kind": "AdmissionReview", "response": out}
