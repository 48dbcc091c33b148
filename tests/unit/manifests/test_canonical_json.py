"""The hash text is json's, byte for byte, whichever encoder wrote it.

``canonical_json`` takes orjson's text where it equals ``json.dumps(sort_keys=True,
separators=(",", ":"), ensure_ascii=False, default=str)`` (about 4x faster on a
rendered Deployment) and json's everywhere else. A byte of difference would give
every object the operator stamped before a new hash, and one needless update each.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from manifests import hashing


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
    | st.text(alphabet=st.characters(max_codepoint=0x7F))
)
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(alphabet=st.characters(max_codepoint=0x7F)), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=600, deadline=None)
@given(_values)
def test_canonical_json_is_jsons_text(value: Any) -> None:
    assert hashing.canonical_json(value) == _json(value)
    assert hashing.canonical_json_bytes(value) == _json(value).encode()


class _Word(enum.StrEnum):
    HELLO = "hello"


@dataclasses.dataclass
class _Point:
    x: int


@pytest.mark.parametrize(
    "value",
    [
        {"a": [1e-5, 1.5e-05, 9.99e-05, 1e-7, 1e16, 1e22, -2.5e-300, 1e300, 0.1, 100.0]},
        {"image": "repo/llama-3.1:1.3.3", "digest": "sha256:4e5e-7", "v": "0.00001"},
        {"ctl": "".join(chr(c) for c in range(0x80)), "\x7f": "\x00"},
        {"b": 1, "a": {"z": [], "y": {}}, "A": None},
        {"big": 2**70, "neg": -(2**64)},
        {"when": datetime.datetime(2026, 11, 28, 8, 0, 0), "day": datetime.date(2026, 11, 28)},
        {"word": _Word.HELLO, "point": _Point(1), "tuple": (1, 2)},
        {"unicode": "naïve ☃", "ключ": "значение"},
        {1: "int key"},
    ],
)
def test_canonical_json_of_values_orjson_writes_differently(value: Any) -> None:
    assert hashing.canonical_json(value) == _json(value)


def test_a_rendered_deployment_is_hashed_without_json_dumps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast path is taken for what the operator renders (counted: no json.dumps)."""
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "labels": {"app": "llm"}, "annotations": {}},
        "spec": {
            "replicas": 1,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "llm",
                            "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                }
            },
        },
    }
    without_annotations = {
        **deployment,
        "metadata": {k: v for k, v in deployment["metadata"].items() if k != "annotations"},
    }
    digest = hashlib.sha256(_json(without_annotations).encode()).hexdigest()[:16]
    expected = hashing._safe_encode(digest)
    calls: list[Any] = []
    real = json.dumps

    def counted(*args: Any, **kwargs: Any) -> str:
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(json, "dumps", counted)
    stamped = hashing.stamped_copy(deployment)
    assert calls == []
    assert stamped["metadata"]["annotations"][hashing.LAST_APPLIED_HASH_ANNOTATION] == expected


@pytest.mark.parametrize(
    "uid", ["5f0e3a1e-4b2c-4d1e-9e2f-0a1b2c3d4e5f", "0000000e-0000-0e-1-2e+3", "a1e-5"]
)
def test_an_owner_uid_that_looks_like_an_exponent_is_hashed_without_json(
    uid: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A digit, ``e``, a sign and a digit inside a string (a UID: about one
    NIMService in ten) is not a float: the object is hashed from orjson's text, which
    is json's byte for byte; a number in exponent form still goes to json."""
    obj = {
        "metadata": {"name": "x", "ownerReferences": [{"uid": uid, "controller": True}]},
        "spec": {"replicas": 1, "ratio": "1e-5", "b": ["2e-5"]},
    }
    # A string after a ":" that reads as a number goes to json (only slower).
    odd = {"a:1e-5": "b"}
    assert hashing.canonical_json_bytes(odd) == _json(odd).encode()
    calls: list[Any] = []
    real = json.dumps

    def counted(*args: Any, **kwargs: Any) -> str:
        calls.append(args)
        return real(*args, **kwargs)

    floats = {"x": 1e-5, "y": [-2.5e-7]}
    want, want_floats = _json(obj).encode(), _json(floats).encode()
    monkeypatch.setattr(json, "dumps", counted)
    assert hashing.canonical_json_bytes(obj) == want
    assert calls == []
    assert hashing.canonical_json_bytes(floats) == want_floats
    assert len(calls) == 1
