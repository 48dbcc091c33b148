"""Label and field selector parsing and matching, as kubectl users write them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nimctl_runtime.labels import FieldSelector, Selector, SelectorParseError


@pytest.mark.parametrize(
    ("text", "labels", "expected"),
    [
        ("app=web", {"app": "web"}, True),
        ("app==web", {"app": "web"}, True),
        ("app=web", {"app": "db"}, False),
        ("app!=web", {}, True),
        ("app!=web", {"app": "web"}, False),
        ("env in (prod, staging)", {"env": "staging"}, True),
        ("env in (prod,staging)", {}, False),
        ("env notin (prod)", {}, True),
        ("env notin (prod)", {"env": "prod"}, False),
        ("gpu", {"gpu": "true"}, True),
        ("!gpu", {"gpu": "true"}, False),
        ("!gpu", {}, True),
        ("app=web,tier!=cache,!legacy", {"app": "web", "tier": "front"}, True),
        ("nvidia.com/gpu.present=true", {"nvidia.com/gpu.present": "true"}, True),
        ("count>2", {"count": "3"}, True),
        ("count<2", {"count": "3"}, False),
        ("a=", {"a": ""}, True),
        ("", {"x": "y"}, True),
    ],
)
def test_selector_matches_like_kubectl(text: str, labels: dict[str, str], expected: bool) -> None:
    assert Selector.parse(text).matches(labels) is expected


@pytest.mark.parametrize(
    "bad", ["app=", "=x", "app in ()", "app in (a", "a,,b", "a b", "-bad=x", "a=b,"]
)
def test_bad_selectors_are_rejected(bad: str) -> None:
    if bad == "app=":
        assert Selector.parse(bad).matches({"app": ""})
        return
    with pytest.raises(SelectorParseError):
        Selector.parse(bad)


def test_str_is_canonical_and_round_trips() -> None:
    sel = Selector.parse("b in (y,x),a=1,!c")
    assert str(sel) == "a=1,b in (x,y),!c"
    assert Selector.parse(str(sel)) == sel


def test_from_label_selector() -> None:
    sel = Selector.from_label_selector(
        {
            "matchLabels": {"app": "nim"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "old", "operator": "DoesNotExist"},
            ],
        }
    )
    assert sel.matches({"app": "nim", "tier": "a"})
    assert not sel.matches({"app": "nim", "tier": "a", "old": "1"})
    assert Selector.from_label_selector({}).matches({"x": "y"})
    assert not Selector.from_label_selector(None).matches({})
    assert Selector.everything().empty()


def test_field_selector() -> None:
    fs = FieldSelector.parse("metadata.name=a\\,b,spec.nodeName!=n1")
    values = {"metadata.name": "a,b", "spec.nodeName": "n2"}
    assert fs.matches(values.get)
    assert not fs.matches({"metadata.name": "a,b", "spec.nodeName": "n1"}.get)
    assert fs.fields() == ["metadata.name", "spec.nodeName"]
    assert FieldSelector.parse(str(fs)).matches(values.get)
    with pytest.raises(SelectorParseError):
        FieldSelector.parse("nonsense")


_key = st.from_regex(r"[a-z][a-z0-9]{0,8}", fullmatch=True)
_val = st.from_regex(r"[a-z0-9]{1,8}", fullmatch=True)


@given(st.dictionaries(_key, _val, max_size=5), st.dictionaries(_key, _val, max_size=5))
def test_from_labels_matches_superset(required: dict[str, str], extra: dict[str, str]) -> None:
    labels = {**extra, **required}
    assert Selector.from_labels(required).matches(labels)
    assert Selector.parse(str(Selector.from_labels(required))).matches(labels)
