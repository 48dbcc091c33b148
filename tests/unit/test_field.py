"""The shared field-error module: the wording users see from both the API server and webhooks."""

from __future__ import annotations

import pytest

from nimctl_runtime import field


def test_path_builds_kubernetes_field_paths() -> None:
    path = field.Path("spec").child("ports").index(0).child("port")
    assert str(path) == "spec.ports[0].port"
    assert str(field.Path("metadata").child("labels").key("app")) == "metadata.labels[app]"
    assert str(field.Path("spec", "storage", "pvc")) == "spec.storage.pvc"
    assert field.required(path).field == "spec.ports[0].port"


@pytest.mark.parametrize(
    ("error", "text", "reason"),
    [
        (field.required("spec.image"), "spec.image: Required value", "FieldValueRequired"),
        (
            field.invalid("spec.x", None, "must be set"),
            'spec.x: Invalid value: "null": must be set',
            "FieldValueInvalid",
        ),
        (
            field.type_invalid("spec.x", "string", "must be of type integer"),
            'spec.x: Invalid value: "string": must be of type integer',
            "FieldValueTypeInvalid",
        ),
        (
            field.invalid("spec.r", 1.5e300, ""),
            "spec.r: Invalid value: 1.5e+300",
            "FieldValueInvalid",
        ),
        (
            field.too_long("spec.n", 1),
            "spec.n: Too long: must have at most 1 byte",
            "FieldValueTooLong",
        ),
        (
            field.too_many("spec.l", 3, 2),
            "spec.l: Too many: 3: must have at most 2 items",
            "FieldValueTooMany",
        ),
        (
            field.not_supported("spec.q", "x", ["a", 1]),
            'spec.q: Unsupported value: "x": supported values: "a", "1"',
            "FieldValueNotSupported",
        ),
        (field.internal("spec", "boom"), "spec: Internal error: boom", "InternalError"),
        (field.not_found("spec.ref", "n"), 'spec.ref: Not found: "n"', "FieldValueNotFound"),
    ],
)
def test_errors_read_like_apimachinery(error: field.FieldError, text: str, reason: str) -> None:
    assert str(error) == text
    assert error.cause() == {
        "reason": reason,
        "message": text.split(": ", 1)[1],
        "field": error.field,
    }


def test_composite_values_print_as_go_for_unstructured_and_json_otherwise() -> None:
    value = {"b": [1, "x"], "a": None}
    assert field.invalid("spec", field.Unstructured(value), "").body() == (
        'Invalid value: map[string]interface {}{"a":interface {}(nil), "b":[]interface {}{1, "x"}}'
    )
    assert field.invalid("spec", value, "").body() == 'Invalid value: {"a":null,"b":[1,"x"]}'


def test_invalid_message_lists_causes_as_the_api_server_does() -> None:
    causes = [field.required("spec.a").cause(), field.forbidden("spec.b", "no").cause()]
    assert field.invalid_message("Widget.example.com", "w", causes) == (
        'Widget.example.com "w" is invalid: [spec.a: Required value, spec.b: Forbidden: no]'
    )
    assert (
        field.invalid_message("Widget.example.com", "w", []) == 'Widget.example.com "w" is invalid'
    )
