"""Defaulting, pruning and the structural-schema check at CRD registration."""

from __future__ import annotations

from typing import Any

from localcluster.schema import (
    apply_defaults,
    check_structural,
    crd_schema_causes,
    prune,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "properties": {
                "port": {"type": "integer", "default": 8000},
                "mode": {"type": "string", "default": "standalone"},
                "nullableField": {"type": "string", "nullable": True, "default": "d"},
                "noDefault": {"type": "string"},
                "gateway": {
                    "type": "object",
                    "default": {},
                    "properties": {
                        "httpRoutesEnabled": {"type": "boolean", "default": True},
                        "grpcRoutesEnabled": {"type": "boolean", "default": False},
                    },
                },
                "devices": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string"},
                            "count": {"type": "integer", "default": 1},
                        },
                    },
                },
                "envs": {
                    "type": "object",
                    "additionalProperties": {
                        "type": "object",
                        "properties": {"key": {"type": "string", "default": "NGC_API_KEY"}},
                    },
                },
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                        "properties": {"known": {"type": "object", "properties": {
                            "a": {"type": "string"}}}}},
                "template": {
                    "type": "object",
                    "x-kubernetes-embedded-resource": True,
                    "properties": {"spec": {"type": "object", "properties": {
                        "x": {"type": "string"}}}},
                },
            },
        }
    },
}


def test_defaults_fill_missing_fields_and_recurse_into_added_values() -> None:
    obj: dict[str, Any] = {"spec": {"mode": "kserve"}}
    apply_defaults(SCHEMA, obj)
    assert obj["spec"]["port"] == 8000
    assert obj["spec"]["mode"] == "kserve"
    assert obj["spec"]["gateway"] == {"httpRoutesEnabled": True, "grpcRoutesEnabled": False}
    assert "noDefault" not in obj["spec"]


def test_defaults_inside_array_items_and_additional_properties() -> None:
    obj: dict[str, Any] = {
        "spec": {"devices": [{"name": "a"}, {"name": "b", "count": 4}], "envs": {"x": {}}}
    }
    apply_defaults(SCHEMA, obj)
    assert obj["spec"]["devices"] == [{"name": "a", "count": 1}, {"name": "b", "count": 4}]
    assert obj["spec"]["envs"] == {"x": {"key": "NGC_API_KEY"}}


def test_null_in_non_nullable_field_takes_default_or_is_dropped() -> None:
    obj: dict[str, Any] = {"spec": {"port": None, "noDefault": None, "nullableField": None}}
    apply_defaults(SCHEMA, obj)
    assert obj["spec"]["port"] == 8000
    assert "noDefault" not in obj["spec"]
    assert obj["spec"]["nullableField"] is None


def test_default_values_are_copies() -> None:
    a: dict[str, Any] = {"spec": {}}
    b: dict[str, Any] = {"spec": {}}
    apply_defaults(SCHEMA, a)
    apply_defaults(SCHEMA, b)
    a["spec"]["gateway"]["httpRoutesEnabled"] = False
    assert b["spec"]["gateway"]["httpRoutesEnabled"] is True


def test_prune_removes_unknown_fields_and_reports_paths() -> None:
    obj: dict[str, Any] = {
        "apiVersion": "x/v1",
        "kind": "K",
        "metadata": {"name": "n"},
        "spec": {"port": 1, "bogus": 2, "devices": [{"name": "a", "extra": True}]},
        "status": {"x": 1},
    }
    pruned = prune(SCHEMA, obj)
    assert sorted(pruned) == ["spec.bogus", "spec.devices[0].extra", "status"]
    assert obj == {
        "apiVersion": "x/v1",
        "kind": "K",
        "metadata": {"name": "n"},
        "spec": {"port": 1, "devices": [{"name": "a"}]},
    }


def test_prune_honours_preserve_unknown_fields_but_prunes_known_children() -> None:
    obj: dict[str, Any] = {"spec": {"raw": {"anything": {"goes": 1}, "known": {"a": "x", "b": 1}}}}
    pruned = prune(SCHEMA, obj)
    assert pruned == ["spec.raw.known.b"]
    assert obj["spec"]["raw"] == {"anything": {"goes": 1}, "known": {"a": "x"}}


def test_prune_keeps_type_meta_at_embedded_roots() -> None:
    obj: dict[str, Any] = {
        "spec": {
            "template": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", "bogusMeta": 1},
                "spec": {"x": "y", "z": 1},
                "other": 1,
            }
        }
    }
    pruned = prune(SCHEMA, obj)
    assert sorted(pruned) == [
        "spec.template.metadata.bogusMeta",
        "spec.template.other",
        "spec.template.spec.z",
    ]
    assert obj["spec"]["template"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"x": "y"},
    }


def test_structural_schema_passes() -> None:
    assert check_structural(SCHEMA) == []


def test_non_structural_schemas_are_explained() -> None:
    bad = {
        "type": "object",
        "properties": {
            "spec": {"properties": {"a": {"type": "string"}}},
            "list": {"type": "array"},
            "both": {
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "additionalProperties": {"type": "string"},
            },
            "closed": {"type": "object", "additionalProperties": False},
            "junctor": {"type": "string", "anyOf": [{"type": "string"}]},
        },
    }
    errors = check_structural(bad)
    assert (
        "openAPIV3Schema.properties[spec].type: Required value: must not be empty for "
        "specified object fields"
    ) in errors
    assert "openAPIV3Schema.properties[list].items: Required value: must be specified" in errors
    assert any(e.startswith("openAPIV3Schema.properties[both].additionalProperties") for e in errors)
    assert any(e.startswith("openAPIV3Schema.properties[closed].additionalProperties") for e in errors)
    assert "openAPIV3Schema.properties[junctor].anyOf[0].type: Forbidden: must be empty to be " \
        "structural" in errors


def test_structural_check_reports_bad_cel() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "x-kubernetes-validations": [{"rule": "self.a =="}]}
        },
    }
    assert check_structural(schema) == []
    causes = crd_schema_causes(schema, root="spec.versions[0].schema.openAPIV3Schema")
    assert len(causes) == 1
    assert causes[0]["reason"] == "FieldValueInvalid"
    assert causes[0]["field"] == (
        "spec.versions[0].schema.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule"
    )
    assert "compilation failed" in causes[0]["message"]


def test_crd_schema_causes_split_field_and_message() -> None:
    causes = crd_schema_causes({"type": "object", "properties": {"a": {}}}, root="r")
    assert causes == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: must not be empty for specified object fields",
            "field": "r.properties[a].type",
        }
    ]


def test_int_or_string_and_preserve_unknown_need_no_type() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"x-kubernetes-int-or-string": True},
            "b": {"x-kubernetes-preserve-unknown-fields": True},
        },
    }
    assert check_structural(schema) == []


def test_map_list_keys_must_be_required_or_defaulted() -> None:
    schema = {
        "type": "object",
        "properties": {
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name", "protocol"],
                "items": {
                    "type": "object",
                    "required": ["name"],
                    "properties": {
                        "name": {"type": "string"},
                        "protocol": {"type": "string"},
                    },
                },
            }
        },
    }
    assert check_structural(schema) == [
        "openAPIV3Schema.properties[ports].items.properties[protocol].default: Required value: "
        "this property is in x-kubernetes-list-map-keys, so it must have a default or be a "
        "required property"
    ]
    schema["properties"]["ports"]["items"]["properties"]["protocol"]["default"] = "TCP"
    assert check_structural(schema) == []


def test_prune_drops_unknown_object_meta_fields_at_the_root() -> None:
    obj: dict[str, Any] = {"apiVersion": "x/v1", "kind": "K",
                           "metadata": {"name": "n", "labels": {"a": "b"}, "colour": "red"}}
    assert prune(SCHEMA, obj) == ["metadata.colour"]
    assert obj["metadata"] == {"name": "n", "labels": {"a": "b"}}


def test_defaults_must_validate_and_have_no_unknown_fields() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "port": {"type": "integer", "default": "8000"},
                    "mode": {"type": "string", "enum": ["a"], "default": "b"},
                    "gw": {"type": "object", "default": {"x": 1},
                           "properties": {"y": {"type": "integer"}}},
                },
            }
        },
    }
    assert check_structural(schema) == [
        'openAPIV3Schema.properties[spec].properties[port].default: Invalid value: "string": '
        'spec.port in body must be of type integer: "string"',
        'openAPIV3Schema.properties[spec].properties[mode].default: Unsupported value: "b": '
        'supported values: "a"',
        'openAPIV3Schema.properties[spec].properties[gw].default: Forbidden: unknown field '
        '"spec.gw.x"',
    ]


def test_nested_defaults_complete_an_object_default_before_it_is_checked() -> None:
    schema = {
        "type": "object",
        "properties": {
            "gw": {
                "type": "object",
                "default": {},
                "required": ["http"],
                "properties": {"http": {"type": "boolean", "default": True}},
            },
            "bad": {
                "type": "object",
                "default": {},
                "required": ["name"],
                "properties": {"name": {"type": "string"}},
            },
        },
    }
    assert check_structural(schema) == [
        "openAPIV3Schema.properties[bad].default.name: Required value"
    ]


def test_transition_rules_below_uncorrelatable_lists_are_rejected() -> None:
    rule = {"rule": "self == oldSelf", "message": "immutable"}
    schema = {
        "type": "object",
        "properties": {
            "atomic": {"type": "array", "items": {"type": "string",
                                                   "x-kubernetes-validations": [rule]}},
            "keyed": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "required": ["name"],
                                "x-kubernetes-validations": [rule],
                                "properties": {"name": {"type": "string"}}}},
        },
    }
    assert crd_schema_causes(schema, root="s") == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "self == oldSelf": oldSelf cannot be used on the '
            "uncorrelatable portion of the schema",
            "field": "s.properties[atomic].items.x-kubernetes-validations[0].rule",
        }
    ]
