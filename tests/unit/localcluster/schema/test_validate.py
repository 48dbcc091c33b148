"""Structural-schema validation: each keyword yields Kubernetes' cause wording."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.schema import (
    cause_error_text,
    invalid_message,
    validate,
    validate_custom_resource,
)


def _spec_schema(prop: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"x": prop}}},
    }


CASES: list[tuple[str, dict[str, Any], Any, list[tuple[str, str, str]]]] = [
    (
        "type integer given string",
        {"type": "integer"},
        "string",
        [
            (
                "FieldValueTypeInvalid",
                "spec.x",
                'Invalid value: "string": spec.x in body must be of type integer: "string"',
            )
        ],
    ),
    (
        "type string given number",
        {"type": "string"},
        1.5,
        [
            (
                "FieldValueTypeInvalid",
                "spec.x",
                'Invalid value: "number": spec.x in body must be of type string: "number"',
            )
        ],
    ),
    (
        "type object given array",
        {"type": "object"},
        [1],
        [
            (
                "FieldValueTypeInvalid",
                "spec.x",
                'Invalid value: "array": spec.x in body must be of type object: "array"',
            )
        ],
    ),
    (
        "type boolean given null",
        {"type": "boolean"},
        None,
        [
            (
                "FieldValueTypeInvalid",
                "spec.x",
                'Invalid value: "null": spec.x in body must be of type boolean: "null"',
            )
        ],
    ),
    ("nullable accepts null", {"type": "string", "nullable": True}, None, []),
    ("integer accepts integral float", {"type": "integer"}, 3.0, []),
    ("number accepts integer", {"type": "number"}, 3, []),
    ("boolean is not an integer", {"type": "integer"}, True, [
        (
            "FieldValueTypeInvalid",
            "spec.x",
            'Invalid value: "boolean": spec.x in body must be of type integer: "boolean"',
        )
    ]),
    (
        "enum",
        {"type": "string", "enum": ["a", "b"]},
        "c",
        [("FieldValueNotSupported", "spec.x", 'Unsupported value: "c": supported values: "a", "b"')],
    ),
    (
        "numeric enum",
        {"type": "integer", "enum": [1, 2]},
        3,
        [("FieldValueNotSupported", "spec.x", 'Unsupported value: 3: supported values: "1", "2"')],
    ),
    (
        "maximum",
        {"type": "integer", "maximum": 10},
        11,
        [
            (
                "FieldValueInvalid",
                "spec.x",
                "Invalid value: 11: spec.x in body should be less than or equal to 10",
            )
        ],
    ),
    (
        "exclusiveMaximum",
        {"type": "integer", "maximum": 10, "exclusiveMaximum": True},
        10,
        [("FieldValueInvalid", "spec.x", "Invalid value: 10: spec.x in body should be less than 10")],
    ),
    (
        "minimum",
        {"type": "integer", "minimum": 0},
        -1,
        [
            (
                "FieldValueInvalid",
                "spec.x",
                "Invalid value: -1: spec.x in body should be greater than or equal to 0",
            )
        ],
    ),
    (
        "exclusiveMinimum",
        {"type": "number", "minimum": 0.5, "exclusiveMinimum": True},
        0.5,
        [
            (
                "FieldValueInvalid",
                "spec.x",
                "Invalid value: 0.5: spec.x in body should be greater than 0.5",
            )
        ],
    ),
    (
        "multipleOf",
        {"type": "integer", "multipleOf": 5},
        7,
        [("FieldValueInvalid", "spec.x", "Invalid value: 7: spec.x in body should be a multiple of 5")],
    ),
    (
        "maxLength",
        {"type": "string", "maxLength": 3},
        "abcd",
        [("FieldValueTooLong", "spec.x", "Too long: must have at most 3 bytes")],
    ),
    (
        "minLength",
        {"type": "string", "minLength": 1},
        "",
        [
            (
                "FieldValueInvalid",
                "spec.x",
                'Invalid value: "": spec.x in body should be at least 1 chars long',
            )
        ],
    ),
    (
        "pattern",
        {"type": "string", "pattern": "^[a-z]+$"},
        "ABC",
        [
            (
                "FieldValueInvalid",
                "spec.x",
                "Invalid value: \"ABC\": spec.x in body should match '^[a-z]+$'",
            )
        ],
    ),
    ("pattern is unanchored", {"type": "string", "pattern": "b"}, "abc", []),
    (
        "format date-time",
        {"type": "string", "format": "date-time"},
        "yesterday",
        [
            (
                "FieldValueTypeInvalid",
                "spec.x",
                'Invalid value: "yesterday": spec.x in body must be of type date-time: "yesterday"',
            )
        ],
    ),
    ("format date-time ok", {"type": "string", "format": "date-time"}, "2024-01-02T03:04:05Z", []),
    ("format int32 is not a string format", {"type": "integer", "format": "int32"}, 5, []),
    ("unknown format passes", {"type": "string", "format": "whatever"}, "x", []),
    (
        "format uuid",
        {"type": "string", "format": "uuid"},
        "nope",
        [
            (
                "FieldValueTypeInvalid",
                "spec.x",
                'Invalid value: "nope": spec.x in body must be of type uuid: "nope"',
            )
        ],
    ),
    (
        "maxItems",
        {"type": "array", "maxItems": 2, "items": {"type": "integer"}},
        [1, 2, 3],
        [("FieldValueTooMany", "spec.x", "Too many: 3: must have at most 2 items")],
    ),
    (
        "minItems",
        {"type": "array", "minItems": 1, "items": {"type": "integer"}},
        [],
        [
            (
                "FieldValueInvalid",
                "spec.x",
                "Invalid value: []interface {}{}: spec.x in body should have at least 1 items",
            )
        ],
    ),
    (
        "uniqueItems",
        {"type": "array", "uniqueItems": True, "items": {"type": "integer"}},
        [1, 1],
        [
            (
                "FieldValueInvalid",
                "spec.x",
                "Invalid value: []interface {}{1, 1}: spec.x in body shouldn't contain duplicates",
            )
        ],
    ),
    (
        "item type with index path",
        {"type": "array", "items": {"type": "string"}},
        ["a", 2],
        [
            (
                "FieldValueTypeInvalid",
                "spec.x[1]",
                'Invalid value: "integer": spec.x[1] in body must be of type string: "integer"',
            )
        ],
    ),
    (
        "maxProperties",
        {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "string"}},
        {"a": "1", "b": "2"},
        [("FieldValueTooMany", "spec.x", "Too many: 2: must have at most 1 item")],
    ),
    (
        "minProperties",
        {"type": "object", "minProperties": 1, "additionalProperties": {"type": "string"}},
        {},
        [
            (
                "FieldValueInvalid",
                "spec.x",
                "Invalid value: map[string]interface {}{}: spec.x in body should have at least "
                "1 properties",
            )
        ],
    ),
    (
        "additionalProperties values",
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"a": 1, "b": "no"},
        [
            (
                "FieldValueTypeInvalid",
                "spec.x.b",
                'Invalid value: "string": spec.x.b in body must be of type integer: "string"',
            )
        ],
    ),
    (
        "required",
        {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}},
        {},
        [("FieldValueRequired", "spec.x.name", "Required value")],
    ),
    ("int-or-string int", {"x-kubernetes-int-or-string": True}, 3, []),
    ("int-or-string string", {"x-kubernetes-int-or-string": True}, "50%", []),
    (
        "int-or-string rejects bool",
        {"x-kubernetes-int-or-string": True},
        True,
        [
            (
                "FieldValueTypeInvalid",
                "spec.x",
                'Invalid value: "boolean": spec.x in body must be of type integer,string: '
                '"boolean"',
            )
        ],
    ),
    (
        "preserve-unknown-fields without type accepts anything",
        {"x-kubernetes-preserve-unknown-fields": True},
        {"deep": [1, {"a": None}]},
        [],
    ),
    (
        "list-type set duplicates",
        {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        ["a", "b", "a"],
        [("FieldValueDuplicate", "spec.x[2]", 'Duplicate value: "a"')],
    ),
    (
        "list-type map duplicate keys",
        {
            "type": "array",
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name", "proto"],
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "proto": {"type": "string", "default": "TCP"},
                },
            },
        },
        [{"name": "a"}, {"name": "a", "proto": "UDP"}, {"name": "a", "proto": "TCP"}],
        [
            (
                "FieldValueDuplicate",
                "spec.x[2]",
                'Duplicate value: map[string]interface {}{"name":"a", "proto":"TCP"}',
            )
        ],
    ),
    ("list-type atomic allows duplicates", {
        "type": "array", "x-kubernetes-list-type": "atomic", "items": {"type": "string"}
    }, ["a", "a"], []),
    (
        "embedded resource needs apiVersion and kind",
        {"type": "object", "x-kubernetes-embedded-resource": True,
         "x-kubernetes-preserve-unknown-fields": True},
        {"metadata": {"name": "x"}},
        [
            ("FieldValueRequired", "spec.x.apiVersion", "Required value: must not be empty"),
            ("FieldValueRequired", "spec.x.kind", "Required value: must not be empty"),
        ],
    ),
    (
        "anyOf",
        {"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 0}]},
        5,
        [
            (
                "FieldValueInvalid",
                "spec.x",
                "Invalid value: 5: spec.x in body must validate at least one schema (anyOf)",
            )
        ],
    ),
    (
        "oneOf",
        {"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]},
        5,
        [
            (
                "FieldValueInvalid",
                "spec.x",
                "Invalid value: 5: spec.x in body must validate one and only one schema (oneOf)",
            )
        ],
    ),
    (
        "allOf",
        {"type": "string", "allOf": [{"maxLength": 2}]},
        "abc",
        [("FieldValueTooLong", "spec.x", "Too long: must have at most 2 bytes")],
    ),
    (
        "not",
        {"type": "string", "not": {"enum": ["forbidden"]}},
        "forbidden",
        [
            (
                "FieldValueInvalid",
                "spec.x",
                'Invalid value: "forbidden": spec.x in body must not validate the schema (not)',
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [pytest.param(s, v, e, id=name) for name, s, v, e in CASES],
)
def test_keyword(schema: dict[str, Any], value: Any, expected: list[tuple[str, str, str]]) -> None:
    obj = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"}, "spec": {"x": value}}
    causes = validate(_spec_schema(schema), obj)
    assert [(c["reason"], c["field"], c["message"]) for c in causes] == expected


def test_root_prefix_applies_to_paths() -> None:
    causes = validate({"type": "integer", "maximum": 1}, 2, root="spec.replicas")
    assert causes == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 2: spec.replicas in body should be less than or equal to 1",
            "field": "spec.replicas",
        }
    ]


def test_root_metadata_is_not_validated_against_properties() -> None:
    schema = {"type": "object", "properties": {"spec": {"type": "object"}}}
    obj = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}}}
    assert validate(schema, obj) == []


def test_metadata_name_restriction_from_schema() -> None:
    schema = {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {
                "metadata": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "maxLength": 5}},
                }
            },
        }
    }
    obj = {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "toolongname"}}
    causes = validate_custom_resource(schema, obj, None)
    assert [(c["field"], c["message"]) for c in causes] == [
        ("metadata.name", "Too long: must have at most 5 bytes")
    ]


def test_invalid_message_summarises_causes() -> None:
    causes = validate(_spec_schema({"type": "integer", "maximum": 1}), {"spec": {"x": 2}})
    assert cause_error_text(causes[0]) == (
        "spec.x: Invalid value: 2: spec.x in body should be less than or equal to 1"
    )
    assert invalid_message("Widget.example.com", "w", causes) == (
        'Widget.example.com "w" is invalid: '
        "spec.x: Invalid value: 2: spec.x in body should be less than or equal to 1"
    )
    two = causes + causes
    assert invalid_message("Widget.example.com", "w", two).endswith("]")


RATCHET_SCHEMA: dict[str, Any] = {
    "openAPIV3Schema": {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["image"],
                "properties": {
                    "image": {"type": "string"},
                    "name": {"type": "string", "maxLength": 3},
                    "replicas": {"type": "integer"},
                    "ports": {
                        "type": "array",
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {
                            "type": "object",
                            "properties": {
                                "name": {"type": "string"},
                                "port": {"type": "integer", "maximum": 100},
                            },
                        },
                    },
                    "router": {
                        "type": "object",
                        "x-kubernetes-validations": [
                            {"rule": "!(has(self.a) && has(self.b))", "message": "a xor b"}
                        ],
                        "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                    },
                },
            }
        },
    }
}


def _obj(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"}, "spec": spec}


def test_unchanged_invalid_values_are_ratcheted_on_update() -> None:
    old = _obj({"image": "i", "name": "toolong", "ports": [{"name": "a", "port": 500}],
                "router": {"a": "1", "b": "2"}})
    new = _obj({"image": "i", "name": "toolong", "replicas": 2,
                "ports": [{"name": "z", "port": 1}, {"name": "a", "port": 500}],
                "router": {"a": "1", "b": "2"}})
    assert validate_custom_resource(RATCHET_SCHEMA, new, old) == []
    assert len(validate_custom_resource(RATCHET_SCHEMA, new, None)) == 3


def test_changed_invalid_values_are_still_rejected() -> None:
    old = _obj({"image": "i", "name": "toolong", "router": {"a": "1", "b": "2"},
                "ports": [{"name": "a", "port": 500}]})
    new = _obj({"image": "i", "name": "toolong2", "router": {"a": "1", "b": "3"},
                "ports": [{"name": "a", "port": 501}]})
    fields = [c["field"] for c in validate_custom_resource(RATCHET_SCHEMA, new, old)]
    assert fields == ["spec.name", "spec.ports[0].port", "spec.router"]


def test_missing_required_field_ratchets_only_with_an_unchanged_parent() -> None:
    old = _obj({"replicas": 1})
    assert validate_custom_resource(RATCHET_SCHEMA, _obj({"replicas": 1}), old) == []
    causes = validate_custom_resource(RATCHET_SCHEMA, _obj({"replicas": 2}), old)
    assert [c["field"] for c in causes] == ["spec.image"]
