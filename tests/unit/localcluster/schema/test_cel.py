"""x-kubernetes-validations: NVIDIA's rules, transition rules and failure reporting."""

from __future__ import annotations

from typing import Any

import pytest
import structlog

from localcluster import cel
from localcluster.schema import validate_custom_resource


def _cr(spec: Any) -> dict[str, Any]:
    return {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "K", "metadata": {"name": "n"},
            "spec": spec}


def _schema(spec_schema: dict[str, Any]) -> dict[str, Any]:
    return {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}}


NIMSERVICE_SPEC: dict[str, Any] = {
    "type": "object",
    "x-kubernetes-validations": [
        {
            "rule": "!(has(self.multiNode) && has(self.scale) && has(self.scale.enabled) && "
            "self.scale.enabled)",
            "message": "autoScaling must be nil or disabled when multiNode is set",
        },
        {
            "rule": "!(has(self.scale) && has(self.scale.enabled) && self.scale.enabled && "
            "has(self.replicas))",
            "message": "spec.replicas cannot be set when spec.scale.enabled is true",
        },
        {
            "rule": "(has(self.draResources) && has(oldSelf.draResources) && "
            "self.draResources == oldSelf.draResources) || (!has(self.draResources) && "
            "!has(oldSelf.draResources))",
            "message": "spec.draResources is immutable",
        },
    ],
    "properties": {
        "replicas": {"type": "integer"},
        "scale": {"type": "object", "properties": {"enabled": {"type": "boolean"}}},
        "multiNode": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "!(has(self.mpi) && has(self.ray))",
                 "message": "mpi and ray are mutually exclusive"}
            ],
            "properties": {
                "mpi": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "ray": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                "computeDomain": {
                    "type": "object",
                    "x-kubernetes-validations": [
                        {
                            "rule": "(has(self.create) && self.create) ? !has(self.name) : "
                            "(has(self.name) && size(self.name) > 0)",
                            "message": "if create is true, name must not be set; otherwise "
                            "name is required.",
                        }
                    ],
                    "properties": {"create": {"type": "boolean"}, "name": {"type": "string"}},
                },
            },
        },
        "draResources": {
            "type": "array",
            "items": {
                "type": "object",
                "x-kubernetes-validations": [
                    {
                        "rule": "(has(self.resourceClaimName) ? 1 : 0) + "
                        "(has(self.resourceClaimTemplateName) ? 1 : 0) + "
                        "(has(self.claimCreationSpec) ? 1 : 0) == 1",
                        "message": "exactly one of spec.resourceClaimName, "
                        "spec.resourceClaimTemplateName, or spec.claimCreationSpec must be set.",
                    }
                ],
                "properties": {
                    "resourceClaimName": {"type": "string"},
                    "resourceClaimTemplateName": {"type": "string"},
                    "claimCreationSpec": {"type": "object",
                                          "x-kubernetes-preserve-unknown-fields": True},
                },
            },
        },
        "backendRef": {
            "type": "object",
            "x-kubernetes-validations": [
                {
                    "rule": "(size(self.group) == 0 && self.kind == 'Service') ? "
                    "has(self.port) : true",
                    "message": "Must have port for Service reference",
                }
            ],
            "properties": {
                "group": {"type": "string", "default": ""},
                "kind": {"type": "string", "default": "Service"},
                "port": {"type": "integer"},
            },
        },
    },
}


def _messages(spec: Any, old_spec: Any = None) -> list[tuple[str, str]]:
    old = _cr(old_spec) if old_spec is not None else None
    causes = validate_custom_resource(_schema(NIMSERVICE_SPEC), _cr(spec), old)
    return [(c["field"], c["message"]) for c in causes]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"replicas": 1}, []),
        (
            {"replicas": 1, "scale": {"enabled": True}},
            [("spec", 'Invalid value: "object": spec.replicas cannot be set when '
                      "spec.scale.enabled is true")],
        ),
        ({"replicas": 1, "scale": {"enabled": False}}, []),
        (
            {"multiNode": {"mpi": {}, "ray": {}}},
            [("spec.multiNode", 'Invalid value: "object": mpi and ray are mutually exclusive')],
        ),
        (
            {"multiNode": {"computeDomain": {"create": True, "name": "x"}}},
            [("spec.multiNode.computeDomain", 'Invalid value: "object": if create is true, name '
              "must not be set; otherwise name is required.")],
        ),
        ({"multiNode": {"computeDomain": {"name": "x"}}}, []),
        (
            {"draResources": [{"resourceClaimName": "a"}, {}]},
            [("spec.draResources[1]", 'Invalid value: "object": exactly one of '
              "spec.resourceClaimName, spec.resourceClaimTemplateName, or "
              "spec.claimCreationSpec must be set.")],
        ),
        (
            {"backendRef": {"group": "", "kind": "Service"}},
            [("spec.backendRef", 'Invalid value: "object": Must have port for Service reference')],
        ),
        ({"backendRef": {"group": "x.io", "kind": "Gateway"}}, []),
    ],
)
def test_nvidia_rules_on_create(spec: Any, expected: list[tuple[str, str]]) -> None:
    assert _messages(spec) == expected


def test_transition_rule_is_skipped_on_create_and_enforced_on_update() -> None:
    spec = {"draResources": [{"resourceClaimName": "a"}]}
    assert _messages(spec) == []
    assert _messages(spec, old_spec={"draResources": [{"resourceClaimName": "a"}]}) == []
    assert _messages(spec, old_spec={"draResources": [{"resourceClaimName": "b"}]}) == [
        ("spec", 'Invalid value: "object": spec.draResources is immutable')
    ]
    assert _messages({}, old_spec=spec) == [
        ("spec", 'Invalid value: "object": spec.draResources is immutable')
    ]


def _list_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "ports": {
                "type": "array",
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "port": {
                            "type": "integer",
                            "x-kubernetes-validations": [
                                {"rule": "self == oldSelf", "message": "port is immutable"}
                            ],
                        },
                    },
                },
            },
            "atomic": {
                "type": "array",
                "items": {
                    "type": "string",
                    "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "no"}],
                },
            },
            "labels": {
                "type": "object",
                "additionalProperties": {
                    "type": "string",
                    "x-kubernetes-validations": [
                        {"rule": "self == oldSelf", "message": "label values are immutable"}
                    ],
                },
            },
        },
    }


def test_transition_rules_correlate_map_lists_by_key_and_maps_by_name() -> None:
    schema = _schema(_list_schema())
    old = _cr({"ports": [{"name": "a", "port": 1}, {"name": "b", "port": 2}],
               "atomic": ["x"], "labels": {"k": "v"}})
    new = _cr({"ports": [{"name": "b", "port": 2}, {"name": "a", "port": 9},
                         {"name": "c", "port": 3}],
               "atomic": ["y"], "labels": {"k": "w", "new": "z"}})
    causes = validate_custom_resource(schema, new, old)
    assert [(c["field"], c["message"]) for c in causes] == [
        ("spec.ports[1].port", 'Invalid value: "integer": port is immutable'),
        ("spec.labels.k", 'Invalid value: "string": label values are immutable'),
    ]


def test_message_expression_reason_and_field_path() -> None:
    spec_schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
        "x-kubernetes-validations": [
            {
                "rule": "self.size <= 3",
                "messageExpression": "'size ' + string(self.size) + ' is above 3 for ' + self.name",
                "fieldPath": ".size",
                "reason": "FieldValueForbidden",
            },
            {"rule": "self.name.lowerAscii() == self.name", "reason": "FieldValueRequired",
             "message": "lower case"},
            {"rule": "self.name.startsWith('z')"},
            {"rule": "false", "messageExpression": "''", "message": "fallback message"},
        ],
    }
    causes = validate_custom_resource(_schema(spec_schema), _cr({"name": "Ab", "size": 5}), None)
    assert causes == [
        {"reason": "FieldValueForbidden", "message": "Forbidden: size 5 is above 3 for Ab",
         "field": "spec.size"},
        {"reason": "FieldValueRequired", "message": "Required value: lower case", "field": "spec"},
        {"reason": "FieldValueInvalid",
         "message": "Invalid value: \"object\": failed rule: self.name.startsWith('z')",
         "field": "spec"},
        {"reason": "FieldValueInvalid", "message": 'Invalid value: "object": fallback message',
         "field": "spec"},
    ]


def test_optional_old_self_runs_on_create() -> None:
    spec_schema = {
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "x-kubernetes-validations": [
            {"rule": "!oldSelf.hasValue() || self.a == oldSelf.value().a",
             "optionalOldSelf": True, "message": "a is immutable"},
            {"rule": "oldSelf.hasValue()", "optionalOldSelf": True, "message": "update only"},
        ],
    }
    create = validate_custom_resource(_schema(spec_schema), _cr({"a": "x"}), None)
    assert [c["message"] for c in create] == ['Invalid value: "object": update only']
    update = validate_custom_resource(_schema(spec_schema), _cr({"a": "y"}), _cr({"a": "x"}))
    assert [c["message"] for c in update] == ['Invalid value: "object": a is immutable']


def test_rule_that_cannot_be_evaluated_is_reported_and_logged() -> None:
    spec_schema = {
        "type": "object",
        "x-kubernetes-validations": [{"rule": "self.missing == 1"}, {"rule": "self.a =="}],
        "properties": {"a": {"type": "string"}},
    }
    with structlog.testing.capture_logs() as logs:
        causes = validate_custom_resource(_schema(spec_schema), _cr({"a": "x"}), None)
    assert len(causes) == 2
    assert causes[0]["field"] == "spec"
    assert causes[0]["message"] == (
        'Invalid value: "object": no such key: missing evaluating rule: self.missing == 1'
    )
    assert causes[1]["message"].startswith('Invalid value: "object": compilation failed')
    logged = [e for e in logs if e.get("log_level") == "error"]
    assert {e["rule"] for e in logged} == {"self.missing == 1", "self.a =="}
    assert all(e["path"] == "spec" for e in logged)


def test_root_rules_see_only_name_and_generate_name_of_metadata() -> None:
    schema = {
        "openAPIV3Schema": {
            "type": "object",
            "x-kubernetes-validations": [
                {"rule": "self.metadata.name.size() <= 5", "message": "short names"},
                {"rule": "!has(self.metadata.labels)", "message": "labels hidden"},
            ],
        }
    }
    obj = {"apiVersion": "v", "kind": "K", "metadata": {"name": "toolong", "labels": {"a": "b"}}}
    causes = validate_custom_resource(schema, obj, None)
    assert [c["message"] for c in causes] == ['Invalid value: "object": short names']


@pytest.mark.parametrize(
    ("rule", "value"),
    [
        ("self.lowerAscii() == 'abc'", "AbC"),
        ("self.upperAscii() == 'ABC'", "abc"),
        ("self.indexOf('b') == 1", "abc"),
        ("self.lastIndexOf('a') == 2", "aba"),
        ("self.split('-') == ['a', 'b']", "a-b"),
        ("self.replace('a', 'x') == 'xbx'", "aba"),
        ("self.substring(1, 2) == 'b'", "abc"),
        ("self.trim() == 'a'", "  a "),
        ("self.charAt(0) == 'a'", "abc"),
        ("self.matches('^[a-z]+$')", "abc"),
        ("self.find('[0-9]+') == '12'", "ab12c"),
        ("self.findAll('[a-z]') == ['a', 'b']", "a1b"),
        ("['a', 'b'].join('-') == self", "a-b"),
        ("[1, 2, 3].isSorted() && ![2, 1].isSorted()", "x"),
        ("[1, 2, 3].sum() == 6 && [3, 1].min() == 1 && [3, 1].max() == 3", "x"),
        ("[1, 2, 3].indexOf(2) == 1", "x"),
        ("[1, 2, 3].exists(x, x == 2) && [1, 2].all(x, x > 0) && [1].exists_one(x, x == 1)", "x"),
        ("size(self) == 3 && self.size() == 3", "abc"),
    ],
)
def test_kubernetes_library_functions(rule: str, value: str) -> None:
    assert cel.evaluate(rule, {"self": cel.to_cel(value)}) is not None
    assert bool(cel.evaluate(rule, {"self": cel.to_cel(value)})) is True


def test_number_fields_are_doubles_in_cel() -> None:
    schema = {"type": "object", "properties": {"ratio": {"type": "number"}}}
    value = cel.to_cel({"ratio": 1}, schema)
    assert bool(cel.evaluate("self.ratio < 1.5", {"self": value})) is True


def test_compiled_programs_are_cached_per_rule_text() -> None:
    assert cel.compile_rule("self.x == 1") is cel.compile_rule("self.x == 1")


def test_cel_rules_are_skipped_while_type_errors_remain() -> None:
    spec_schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "x-kubernetes-validations": [{"rule": "self.n > 1", "message": "n too small"}],
    }
    causes = validate_custom_resource(_schema(spec_schema), _cr({"n": "one"}), None)
    assert [(c["field"], c["message"]) for c in causes] == [
        ("spec.n", 'Invalid value: "string": spec.n in body must be of type integer: "string"'),
        ("", 'Invalid value: "null": some validation rules were not checked because the object '
             "was invalid; correct the existing errors to complete validation"),
    ]
    causes = validate_custom_resource(_schema(spec_schema), _cr({"n": 0}), None)
    assert [c["message"] for c in causes] == ['Invalid value: "object": n too small']


def test_has_with_a_missing_parent_is_an_error_as_in_kubernetes() -> None:
    spec_schema = {
        "type": "object",
        "properties": {"service": {"type": "object", "properties": {
            "grpcPort": {"type": "integer"}}}},
        "x-kubernetes-validations": [
            {"rule": "!(has(self.service.grpcPort))",
             "message": "unsupported field: spec.expose.service.grpcPort"}
        ],
    }
    causes = validate_custom_resource(_schema(spec_schema), _cr({}), None)
    assert [c["message"] for c in causes] == [
        'Invalid value: "object": no such key: service evaluating rule: '
        "!(has(self.service.grpcPort))"
    ]
    ok = validate_custom_resource(_schema(spec_schema), _cr({"service": {}}), None)
    assert ok == []
