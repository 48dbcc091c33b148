"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster.patch import (
    PatchError,
    create_merge_patch,
    json_patch,
    merge_patch,
)

# RFC 7386 appendix A.
RFC7386: list[tuple[Any, Any, Any]] = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("orig", "patch", "expected"), RFC7386)
def test_merge_patch_rfc7386_examples(orig: Any, patch: Any, expected: Any) -> None:
    before = copy.deepcopy(orig)
    assert merge_patch(orig, patch) == expected
    assert orig == before


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(st.text(max_size=3), children, max_size=3),
    max_leaves=12,
)
json_objects = st.dictionaries(st.text(max_size=3), json_values, max_size=4)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


@settings(max_examples=100, deadline=None)
@given(json_objects, json_objects)
def test_merge_patch_of_a_diff_reproduces_the_target(orig: dict[str, Any], target: Any) -> None:
    # Merge patch cannot express null values inside objects; compare without them.
    target = _without_nulls(target)
    orig = _without_nulls(orig)
    assert merge_patch(orig, create_merge_patch(orig, target)) == target


DOC: dict[str, Any] = {"spec": {"replicas": 1, "list": ["a", "b"]}, "a/b": {"m~n": 1}}

JSON_PATCH_OK: list[tuple[str, list[dict[str, Any]], Any]] = [
    ("add member", [{"op": "add", "path": "/spec/x", "value": 1}],
     {"spec": {"replicas": 1, "list": ["a", "b"], "x": 1}, "a/b": {"m~n": 1}}),
    ("add to end", [{"op": "add", "path": "/spec/list/-", "value": "c"}],
     {"spec": {"replicas": 1, "list": ["a", "b", "c"]}, "a/b": {"m~n": 1}}),
    ("insert", [{"op": "add", "path": "/spec/list/0", "value": "z"}],
     {"spec": {"replicas": 1, "list": ["z", "a", "b"]}, "a/b": {"m~n": 1}}),
    ("remove", [{"op": "remove", "path": "/spec/list/0"}],
     {"spec": {"replicas": 1, "list": ["b"]}, "a/b": {"m~n": 1}}),
    ("replace", [{"op": "replace", "path": "/spec/replicas", "value": 3}],
     {"spec": {"replicas": 3, "list": ["a", "b"]}, "a/b": {"m~n": 1}}),
    ("escaped pointer", [{"op": "replace", "path": "/a~1b/m~0n", "value": 2}],
     {"spec": {"replicas": 1, "list": ["a", "b"]}, "a/b": {"m~n": 2}}),
    ("move", [{"op": "move", "from": "/spec/replicas", "path": "/r"}],
     {"spec": {"list": ["a", "b"]}, "a/b": {"m~n": 1}, "r": 1}),
    ("copy", [{"op": "copy", "from": "/spec/list", "path": "/l"}],
     {"spec": {"replicas": 1, "list": ["a", "b"]}, "a/b": {"m~n": 1}, "l": ["a", "b"]}),
    ("test then replace", [{"op": "test", "path": "/spec/replicas", "value": 1},
                           {"op": "replace", "path": "/spec/replicas", "value": 2}],
     {"spec": {"replicas": 2, "list": ["a", "b"]}, "a/b": {"m~n": 1}}),
    ("whole document", [{"op": "replace", "path": "", "value": {"x": 1}}], {"x": 1}),
]


@pytest.mark.parametrize(
    ("ops", "expected"), [pytest.param(o, e, id=n) for n, o, e in JSON_PATCH_OK]
)
def test_json_patch_applies(ops: list[dict[str, Any]], expected: Any) -> None:
    before = copy.deepcopy(DOC)
    assert json_patch(DOC, ops) == expected
    assert before == DOC


JSON_PATCH_BAD: list[tuple[str, Any, int, str]] = [
    ("not a list", {"op": "add"}, 400, "json patch must be a list of operations"),
    ("unknown op", [{"op": "frob", "path": "/a"}], 400, "Unexpected kind: frob"),
    ("missing value", [{"op": "add", "path": "/a"}], 400, "operation 0 (add) is missing value"),
    ("missing path", [{"op": "remove"}], 400, "operation 0 (remove) is missing path"),
    ("failed test", [{"op": "test", "path": "/spec/replicas", "value": 2}], 422,
     "testing value /spec/replicas failed: test failed"),
    ("remove missing", [{"op": "remove", "path": "/spec/nope"}], 422,
     "error in remove for path: '/spec/nope': Unable to remove nonexistent key: nope: "
     "missing value"),
    ("replace missing", [{"op": "replace", "path": "/nope/x", "value": 1}], 422,
     "doc is missing path: '/nope/x': missing value"),
    ("index out of range", [{"op": "add", "path": "/spec/list/5", "value": 1}], 422,
     "array index 5 out of bounds in /spec/list/5"),
]


@pytest.mark.parametrize(
    ("ops", "status", "message"), [pytest.param(o, s, m, id=n) for n, o, s, m in JSON_PATCH_BAD]
)
def test_json_patch_errors(ops: Any, status: int, message: str) -> None:
    with pytest.raises(PatchError) as info:
        json_patch(DOC, ops)
    assert info.value.status == status
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)
