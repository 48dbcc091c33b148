"""Server-side apply: ownership in managedFields, conflicts, force and field removal."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from localcluster.patch import ApplyConflict, apply, track_update
from localcluster.patch_apply import fields_v1, parse_fields_v1

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
KEY = ("apps/v1", "Deployment")


def _deploy(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "ns", **meta}, "spec": spec}


def _managers(obj: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["manager"], m["operation"]) for m in obj["metadata"].get("managedFields", [])]


def test_apply_create_records_fields_v1() -> None:
    applied = _deploy(
        {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}},
        labels={"app": "x"},
    )
    obj = apply(None, applied, field_manager="me", force=False, schema_hint=KEY, now=NOW)
    assert obj["spec"]["replicas"] == 2
    (entry,) = obj["metadata"]["managedFields"]
    assert entry == {
        "manager": "me",
        "operation": "Apply",
        "apiVersion": "apps/v1",
        "time": "2026-01-02T03:04:05Z",
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {".": {}, "f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {
                    'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {}}}}},
            },
        },
    }


def test_applying_the_same_config_twice_changes_nothing() -> None:
    applied = _deploy({"replicas": 2})
    first = apply(None, applied, field_manager="me", force=False, schema_hint=KEY, now=NOW)
    second = apply(first, applied, field_manager="me", force=False, schema_hint=KEY, now=NOW)
    assert second == first


def test_conflict_with_another_manager_on_a_different_value() -> None:
    live = apply(None, _deploy({"replicas": 2}), field_manager="a", force=False,
                 schema_hint=KEY, now=NOW)
    with pytest.raises(ApplyConflict) as info:
        apply(live, _deploy({"replicas": 3}), field_manager="b", force=False, schema_hint=KEY)
    assert str(info.value) == (
        'Apply failed with 1 conflict: conflict with "a" using apps/v1: .spec.replicas'
    )
    assert info.value.causes == [
        {"reason": "FieldManagerConflict", "message": 'conflict with "a" using apps/v1',
         "field": ".spec.replicas"}
    ]


def test_same_value_is_shared_without_conflict() -> None:
    live = apply(None, _deploy({"replicas": 2}), field_manager="a", force=False,
                 schema_hint=KEY, now=NOW)
    shared = apply(live, _deploy({"replicas": 2}), field_manager="b", force=False,
                   schema_hint=KEY, now=NOW)
    assert _managers(shared) == [("a", "Apply"), ("b", "Apply")]


def test_force_takes_ownership() -> None:
    live = apply(None, _deploy({"replicas": 2, "paused": False}), field_manager="a",
                 force=False, schema_hint=KEY, now=NOW)
    forced = apply(live, _deploy({"replicas": 3}), field_manager="b", force=True,
                   schema_hint=KEY, now=NOW)
    assert forced["spec"] == {"replicas": 3, "paused": False}
    entries = {m["manager"]: m["fieldsV1"] for m in forced["metadata"]["managedFields"]}
    assert entries == {"a": {"f:spec": {"f:paused": {}}}, "b": {"f:spec": {"f:replicas": {}}}}


def test_conflicts_with_fields_set_by_an_update() -> None:
    created = track_update(None, _deploy({"replicas": 1}), field_manager="kubectl-create",
                           now=NOW)
    assert _managers(created) == [("kubectl-create", "Update")]
    with pytest.raises(ApplyConflict) as info:
        apply(created, _deploy({"replicas": 5}), field_manager="kubectl", force=False,
              schema_hint=KEY)
    assert '"kubectl-create"' in str(info.value)


def test_fields_dropped_from_the_config_are_removed_unless_owned_elsewhere() -> None:
    first = apply(None, _deploy({"replicas": 2, "paused": True}, labels={"a": "1", "b": "2"}),
                  field_manager="me", force=False, schema_hint=KEY, now=NOW)
    # someone else also sets label b
    other = track_update(first, {**first, "metadata": {**first["metadata"],
                                                       "labels": {"a": "1", "b": "3"}}},
                         field_manager="other", now=NOW)
    second = apply(other, _deploy({"replicas": 2}), field_manager="me", force=False,
                   schema_hint=KEY, now=NOW)
    assert second["spec"] == {"replicas": 2}
    assert second["metadata"]["labels"] == {"b": "3"}


def test_map_list_items_merge_by_key_and_unowned_items_go() -> None:
    base = {"template": {"spec": {"containers": [{"name": "a", "image": "1"},
                                                 {"name": "b", "image": "2"}]}}}
    first = apply(None, _deploy(base), field_manager="me", force=False, schema_hint=KEY, now=NOW)
    fewer = {"template": {"spec": {"containers": [{"name": "b", "image": "3"}]}}}
    second = apply(first, _deploy(fewer), field_manager="me", force=False, schema_hint=KEY,
                   now=NOW)
    assert second["spec"]["template"]["spec"]["containers"] == [{"name": "b", "image": "3"}]


def test_other_managers_list_items_survive() -> None:
    mine = {"template": {"spec": {"containers": [{"name": "a", "image": "1"}]}}}
    first = apply(None, _deploy(mine), field_manager="me", force=False, schema_hint=KEY, now=NOW)
    theirs = {"template": {"spec": {"containers": [{"name": "sidecar", "image": "s"}]}}}
    both = apply(first, _deploy(theirs), field_manager="injector", force=False, schema_hint=KEY,
                 now=NOW)
    names = [c["name"] for c in both["spec"]["template"]["spec"]["containers"]]
    assert names == ["a", "sidecar"]


def test_crd_schema_hint_list_types() -> None:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {
        "type": "object", "properties": {
            "items": {"type": "array", "x-kubernetes-list-type": "map",
                      "x-kubernetes-list-map-keys": ["name"],
                      "items": {"type": "object", "properties": {
                          "name": {"type": "string"}, "v": {"type": "integer"}}}},
            "tags": {"type": "array", "x-kubernetes-list-type": "set",
                     "items": {"type": "string"}},
            "args": {"type": "array", "items": {"type": "string"}},
        }}}}}
    cr = {"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"},
          "spec": {"items": [{"name": "a", "v": 1}], "tags": ["t1"], "args": ["x"]}}
    first = apply(None, cr, field_manager="a", force=False, schema_hint=schema, now=NOW)
    second_cfg = {"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"},
                  "spec": {"items": [{"name": "b", "v": 2}], "tags": ["t2"]}}
    second = apply(first, second_cfg, field_manager="b", force=False, schema_hint=schema, now=NOW)
    assert second["spec"] == {"items": [{"name": "a", "v": 1}, {"name": "b", "v": 2}],
                              "tags": ["t1", "t2"], "args": ["x"]}
    fields = second["metadata"]["managedFields"][1]["fieldsV1"]
    assert fields == {"f:spec": {"f:items": {'k:{"name":"b"}': {".": {}, "f:name": {}, "f:v": {}}},
                                 "f:tags": {'v:"t2"': {}}}}
    with pytest.raises(ApplyConflict):
        apply(second, {**second_cfg, "spec": {"args": ["y"]}}, field_manager="b", force=False,
              schema_hint=schema)


def test_fields_v1_round_trip() -> None:
    paths = {("f:spec", "f:replicas"), ("f:spec", "f:c", 'k:{"name":"a"}'),
             ("f:spec", "f:c", 'k:{"name":"a"}', "f:image")}
    assert parse_fields_v1(fields_v1(paths)) == paths


def test_field_manager_is_required() -> None:
    with pytest.raises(ValueError, match="fieldManager is required"):
        apply(None, _deploy({}), field_manager="", force=False)


def test_ignored_fields_are_neither_applied_nor_owned() -> None:
    live = {"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"},
            "spec": {"a": 1}, "status": {"state": "Ready"}}
    applied = {"apiVersion": "x.io/v1", "kind": "W", "metadata": {"name": "w"},
               "spec": {"a": 2}, "status": {"state": "Hacked"}}
    result = apply(live, applied, field_manager="m", force=False, ignored_fields=("status",),
                   now=NOW)
    assert result["status"] == {"state": "Ready"}
    assert result["spec"] == {"a": 2}
    assert result["metadata"]["managedFields"][0]["fieldsV1"] == {"f:spec": {"f:a": {}}}
    updated = track_update(result, {**result, "status": {"state": "x"}}, field_manager="u",
                           ignored_fields=("status",), now=NOW)
    assert _managers(updated) == [("m", "Apply")]


def test_ports_are_keyed_with_the_default_protocol() -> None:
    def cfg(image: str) -> dict[str, Any]:
        return _deploy({"template": {"spec": {"containers": [
            {"name": "c", "image": image, "ports": [{"containerPort": 80}]}]}}})

    live = apply(None, cfg("a"), field_manager="m", force=False, schema_hint=KEY, now=NOW)
    fields = live["metadata"]["managedFields"][0]["fieldsV1"]
    ports = fields["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"c"}']["f:ports"]
    assert list(ports) == ['k:{"containerPort":80,"protocol":"TCP"}']
    # The server defaulted the protocol; re-applying without it matches that port.
    live["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"] = "TCP"
    again = apply(live, cfg("b"), field_manager="m", force=False, schema_hint=KEY, now=NOW)
    assert again["spec"]["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP"}
    ]
