"""Hypothesis strategies that mutate NVIDIA's samples the way careless or hostile users do.

A mutant is a sample with one to three mutations, each at a path drawn from the
sample itself (so they land on real fields): a value of the wrong type, a huge
string, deep nesting, arbitrary unicode, an out-of-range number, a missing field,
a huge list, a bad ``metadata.name``, or an unknown field. Sizes are drawn as
numbers and expanded afterwards, so hypothesis' choice buffer stays small.

``FUZZ_SETTINGS`` makes every run the same (``derandomize``, no example
database): CI sees the same mutants on every machine.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

from tests.integration.fuzz.samples import Sample, samples

Path = tuple[str | int, ...]
Draw = Callable[[st.SearchStrategy[Any]], Any]

FUZZ_SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


@dataclass(frozen=True)
class Mutant:
    """A mutated sample: what it came from, what was done to it, and the object."""

    origin: str
    api_version: str
    kind: str
    mutations: tuple[str, ...]
    obj: dict[str, Any]

    def describe(self) -> str:
        return f"{self.kind} from {self.origin}: {'; '.join(self.mutations)}"


def _paths(node: Any, prefix: Path = ()) -> Iterator[tuple[Path, Any]]:
    yield prefix, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _text(path: Path) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "<root>"


def _set(obj: Any, path: Path, value: Any) -> None:
    node = obj
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value


def _delete(obj: Any, path: Path) -> None:
    node = obj
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]


def _pick(draw: Draw, obj: dict[str, Any], want: Callable[[Path, Any], bool]) -> Path | None:
    choices = [p for p, v in _paths(obj) if p and want(p, v)]
    if not choices:
        return None
    path: Path = draw(st.sampled_from(choices))
    return path


def _is_meta_identity(path: Path) -> bool:
    # apiVersion/kind are mutated too, but less often: they end most stories early.
    return path[0] in ("apiVersion", "kind")


WRONG_TYPES: tuple[Any, ...] = ("x", 7, True, None, [], {}, 1.5, ["a"], {"a": 1}, "")


def _fallback(obj: dict[str, Any], name: str) -> Path:
    """Where to add a field when no existing one fits: under spec, or at the top."""
    return ("spec", name) if isinstance(obj.get("spec"), dict) else (name,)


def wrong_type(draw: Draw, obj: dict[str, Any]) -> str:
    identity_too = draw(st.integers(0, 9)) == 0
    path = _pick(draw, obj, lambda p, v: identity_too or not _is_meta_identity(p))
    if path is None:
        return "wrong_type: nothing to change"
    old = _get(obj, path)
    value = draw(st.sampled_from([v for v in WRONG_TYPES if type(v) is not type(old)]))
    _set(obj, path, copy.deepcopy(value))
    return f"wrong_type {_text(path)} = {value!r}"


def huge_string(draw: Draw, obj: dict[str, Any]) -> str:
    path = _pick(draw, obj, lambda p, v: isinstance(v, str) and not _is_meta_identity(p))
    size = draw(st.sampled_from([300, 5_000, 70_000, 400_000]))
    if path is None:
        path = _fallback(obj, "zzHuge")
    _set(obj, path, "n" * size)
    return f"huge_string {_text(path)} ({size} chars)"


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for i in range(depth):
        value = {"a": value} if i % 2 else [value]
    return value


def deep_nesting(draw: Draw, obj: dict[str, Any]) -> str:
    path = _pick(draw, obj, lambda p, v: p[0] == "spec")
    depth = draw(st.sampled_from([30, 120, 199, 260, 600]))
    if path is None:
        path = _fallback(obj, "zzDeep")
    _set(obj, path, _nested(depth))
    return f"deep_nesting {_text(path)} (depth {depth})"


def unicode(draw: Draw, obj: dict[str, Any]) -> str:
    path = _pick(draw, obj, lambda p, v: isinstance(v, str))
    text = draw(st.text(min_size=1, max_size=24))
    if path is None:
        return "unicode: no string"
    _set(obj, path, text)
    return f"unicode {_text(path)} = {text!r}"


OUT_OF_RANGE: tuple[Any, ...] = (
    2**31,
    -(2**31) - 1,
    2**63,
    18446744073709551616,
    -1,
    -(2**63) - 1,
    10**30,
    1e308,
    -0.5,
    1.5,
    0,
)


def out_of_range(draw: Draw, obj: dict[str, Any]) -> str:
    path = _pick(draw, obj, lambda p, v: isinstance(v, int | float) and not isinstance(v, bool))
    if path is None:
        path = _pick(draw, obj, lambda p, v: p[0] == "spec" and not isinstance(v, dict | list))
    if path is None:
        return "out_of_range: no scalar"
    value = draw(st.sampled_from(OUT_OF_RANGE))
    _set(obj, path, value)
    return f"out_of_range {_text(path)} = {value!r}"


def missing(draw: Draw, obj: dict[str, Any]) -> str:
    path = _pick(draw, obj, lambda p, v: isinstance(p[-1], str))
    if path is None:
        return "missing: nothing to remove"
    _delete(obj, path)
    return f"missing {_text(path)}"


def huge_list(draw: Draw, obj: dict[str, Any]) -> str:
    path = _pick(draw, obj, lambda p, v: isinstance(v, list) or p[0] == "spec")
    count = draw(st.sampled_from([50, 1_000, 5_000]))
    if path is None:
        path = _fallback(obj, "zzList")
    old = _get(obj, path) if _exists(obj, path) else None
    item = copy.deepcopy(old[0]) if isinstance(old, list) and old else {"name": "x", "value": "y"}
    _set(obj, path, [copy.deepcopy(item) for _ in range(count)])
    return f"huge_list {_text(path)} ({count} items)"


BAD_NAMES = (
    "",
    "UPPER",
    "a" * 254,
    "-lead",
    "trail-",
    "under_score",
    "dot..dot",
    "ünï",
    "a/b",
    " ",
)


def bad_name(draw: Draw, obj: dict[str, Any]) -> str:
    name = draw(st.sampled_from(BAD_NAMES))
    if not isinstance(obj.get("metadata"), dict):
        obj["metadata"] = {}
    obj["metadata"]["name"] = name
    return f"bad_name metadata.name = {name[:20]!r}"


UNKNOWN_KEYS = ("zzUnknown", "Spec", "replicas ", "ünknown", "$ref")


def unknown_field(draw: Draw, obj: dict[str, Any]) -> str:
    path = _pick(draw, obj, lambda p, v: isinstance(v, dict))
    key = draw(st.sampled_from(UNKNOWN_KEYS))
    value = draw(st.sampled_from(WRONG_TYPES))
    target: Path = path or ()
    node = _get(obj, target)
    if isinstance(node, dict):
        node[key] = copy.deepcopy(value)
    return f"unknown_field {_text((*target, key))} = {value!r}"


def _exists(obj: Any, path: Path) -> bool:
    try:
        _get(obj, path)
    except (KeyError, IndexError, TypeError):
        return False
    return True


def _get(obj: Any, path: Path) -> Any:
    node = obj
    for part in path:
        node = node[part]
    return node


MUTATIONS: dict[str, Callable[[Draw, dict[str, Any]], str]] = {
    "wrong_type": wrong_type,
    "huge_string": huge_string,
    "deep_nesting": deep_nesting,
    "unicode": unicode,
    "out_of_range": out_of_range,
    "missing": missing,
    "huge_list": huge_list,
    "bad_name": bad_name,
    "unknown_field": unknown_field,
}


@st.composite
def mutants(draw: Draw, kinds: tuple[str, ...] | None = None) -> Mutant:
    """A sample of one of *kinds* (all served kinds by default) with 1-3 mutations."""
    pool = [s for s in samples() if kinds is None or s.kind in kinds]
    kind = draw(st.sampled_from(sorted({s.kind for s in pool})))  # every kind equally often
    sample: Sample = draw(st.sampled_from([s for s in pool if s.kind == kind]))
    obj = copy.deepcopy(sample.obj)
    names = draw(st.lists(st.sampled_from(sorted(MUTATIONS)), min_size=1, max_size=3))
    done = tuple(MUTATIONS[name](draw, obj) for name in names)
    return Mutant(sample.origin, sample.api_version, sample.kind, done, obj)


def draw_mutants(
    count: int, *, kinds: tuple[str, ...] | None = None, start_seed: int = 19
) -> list[Mutant]:
    """*count* mutants, the same ones on every run (fixed seeds, generation only)."""
    out: list[Mutant] = []
    run_seed = start_seed
    while len(out) < count:

        @settings(
            FUZZ_SETTINGS,
            derandomize=False,
            max_examples=min(count - len(out), 1000),
            phases=[Phase.generate],
        )
        @seed(run_seed)
        @given(mutants(kinds))
        def collect(mutant: Mutant) -> None:
            out.append(mutant)

        before = len(out)
        collect()
        if len(out) == before:
            break
        run_seed += 1
    return out[:count]
