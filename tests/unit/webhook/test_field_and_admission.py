"""Field-error wording and AdmissionReview encoding, as users and the API server see them."""

from __future__ import annotations

import base64
import json

import pytest

from nimctl_runtime import field
from nimctl_runtime.webhook import patched, validate_path
from nimctl_runtime.webhook.admission import AdmissionDecodeError, decode_review, review_body


@pytest.mark.parametrize(
    ("error", "text"),
    [
        (field.required("spec.image.tag", "is required"), "spec.image.tag: Required value: is required"),
        (
            field.invalid("spec.replicas", -1, "must be > 0"),
            "spec.replicas: Invalid value: -1: must be > 0",
        ),
        (
            field.invalid("spec.proxy.httpProxy", "ftp://x", "must start with http:// or https://"),
            'spec.proxy.httpProxy: Invalid value: "ftp://x": must start with http:// or https://',
        ),
        (field.forbidden("spec.multiNode", "is immutable"), "spec.multiNode: Forbidden: is immutable"),
        (field.duplicate("spec.draResources[1].name", "a"), 'spec.draResources[1].name: Duplicate value: "a"'),
        (
            field.not_supported("spec.qos", "fast", ["latency", "throughput"]),
            'spec.qos: Unsupported value: "fast": supported values: "latency", "throughput"',
        ),
    ],
)
def test_field_errors_read_like_kubernetes(error: field.FieldError, text: str) -> None:
    assert str(error) == text


def test_aggregate_brackets_several_errors_and_drops_repeats() -> None:
    a = field.required("spec.image.repository", "is required")
    b = field.required("spec.image.tag", "is required")
    assert field.aggregate([a]) == str(a)
    assert field.aggregate([a, b, a]) == f"[{a}, {b}]"


def test_validation_failed_needs_errors() -> None:
    with pytest.raises(ValueError, match="at least one"):
        field.ValidationFailed([])


def _review(**request: object) -> bytes:
    req = {"uid": "u-1", "operation": "CREATE", "object": {"kind": "X"}, **request}
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}
    ).encode()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "empty"),
        (b"{not json", "not valid JSON"),
        (b"[]", "JSON object"),
        (json.dumps({"apiVersion": "v1", "kind": "Pod"}).encode(), "expected kind AdmissionReview"),
        (
            json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
            "no request",
        ),
        (_review(uid=""), "uid"),
        (_review(operation="PATCH"), "operation"),
        (_review(object=[1]), "request.object"),
    ],
)
def test_bad_reviews_are_rejected_with_a_reason(body: bytes, message: str) -> None:
    with pytest.raises(AdmissionDecodeError, match=message):
        decode_review(body)


def test_response_echoes_uid_and_version_and_encodes_patch() -> None:
    req = decode_review(_review())
    resp = patched({"metadata": {}}, {"metadata": {"labels": {"a": "b"}}})
    body = review_body(req.api_version, req.uid, resp)
    assert body["apiVersion"] == "admission.k8s.io/v1"
    assert body["response"]["uid"] == "u-1"
    assert body["response"]["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(body["response"]["patch"]))
    assert ops == [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]


def test_no_patch_when_nothing_changed() -> None:
    body = review_body("admission.k8s.io/v1", "u", patched({"a": 1}, {"a": 1}))
    assert "patch" not in body["response"]
    assert body["response"]["allowed"] is True


def test_paths_match_controller_runtime_builder() -> None:
    assert validate_path("apps.nvidia.com", "v1alpha1", "NIMService") == (
        "/validate-apps-nvidia-com-v1alpha1-nimservice"
    )
