"""Property tests: JSON patch agrees with the jsonpatch library; apply is idempotent."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import jsonpatch
from hypothesis import given, settings
from hypothesis import strategies as st

from localcluster.patch import PatchError, apply, json_patch

scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(["a", "b", ""])
values = st.recursive(
    scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from("abc"), c, max_size=3),
    max_leaves=8,
)
docs = st.dictionaries(st.sampled_from("abcd"), values, max_size=4)
pointers = st.lists(st.sampled_from(["a", "b", "c", "0", "1", "-"]), min_size=1, max_size=3).map(
    lambda parts: "/" + "/".join(parts)
)
ops = st.one_of(
    st.builds(lambda p, v: {"op": "add", "path": p, "value": v}, pointers, values),
    st.builds(lambda p: {"op": "remove", "path": p}, pointers),
    st.builds(lambda p, v: {"op": "replace", "path": p, "value": v}, pointers, values),
    st.builds(lambda p, f: {"op": "move", "from": f, "path": p}, pointers, pointers),
    st.builds(lambda p, f: {"op": "copy", "from": f, "path": p}, pointers, pointers),
    st.builds(lambda p, v: {"op": "test", "path": p, "value": v}, pointers, values),
)


@settings(max_examples=60, deadline=None)
@given(docs, st.lists(ops, min_size=1, max_size=3))
def test_json_patch_matches_the_jsonpatch_library(doc: dict[str, Any], patch: list[Any]) -> None:
    try:
        expected: Any = jsonpatch.apply_patch(doc, patch)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError,
            TypeError):
        expected = PatchError
    try:
        got: Any = json_patch(doc, patch)
    except PatchError:
        got = PatchError
    assert got == expected


labels = st.dictionaries(st.sampled_from(["app", "tier", "team"]), st.sampled_from(["x", "y"]),
                         max_size=3)
containers = st.lists(
    st.fixed_dictionaries({"name": st.sampled_from(["a", "b", "c"]),
                           "image": st.sampled_from(["i:1", "i:2"])}),
    max_size=3,
    unique_by=lambda c: c["name"],
)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _deploy(lbl: dict[str, str], replicas: int, ctrs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicas": replicas}
    if ctrs:
        spec["template"] = {"spec": {"containers": ctrs}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", **({"labels": lbl} if lbl else {})}, "spec": spec}


@settings(max_examples=30, deadline=None)
@given(labels, st.integers(0, 3), containers, labels, st.integers(0, 3), containers)
def test_apply_is_idempotent_and_a_single_manager_gets_exactly_its_config(
    l1: dict[str, str], r1: int, c1: list[dict[str, Any]],
    l2: dict[str, str], r2: int, c2: list[dict[str, Any]],
) -> None:
    key = ("apps/v1", "Deployment")
    first = apply(None, _deploy(l1, r1, c1), field_manager="m", force=False, schema_hint=key,
                  now=NOW)
    second = apply(first, _deploy(l2, r2, c2), field_manager="m", force=False, schema_hint=key,
                   now=NOW)
    again = apply(second, _deploy(l2, r2, c2), field_manager="m", force=False, schema_hint=key,
                  now=NOW)
    assert again == second
    assert second["spec"]["replicas"] == r2
    assert second["metadata"].get("labels", {}) == l2
    got = second["spec"].get("template", {}).get("spec", {}).get("containers", [])
    assert sorted(got, key=lambda c: c["name"]) == sorted(c2, key=lambda c: c["name"])
