"""NVIDIA's samples and our docs examples, and the verdict NVIDIA's CRDs give them.

The samples are the documents of NVIDIA's ``config/samples`` kept in
tests/fixtures/nvidia_samples (comments dropped) and every document of a kind we
serve in docs/examples. :func:`nvidia_verdict` decides, from the facts of NVIDIA's
CRDs (tests/fixtures/nvidia_crd_paths), what kube-apiserver with NVIDIA's CRDs
answers to ``kubectl apply`` (strict field validation, kubectl's default): an
unknown kind, an unknown field, a wrong type, a value outside an enum or a missing
required field, a number or string outside its bounds or a string not matching its
pattern is refused. Rules those facts do not carry (CEL) are listed per sample in
:data:`NVIDIA_RULE_VERDICTS`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from tests.unit.api.crd_paths import parse_facts

ROOT: Final = Path(__file__).resolve().parents[3]
NVIDIA_SAMPLES: Final = ROOT / "tests" / "fixtures" / "nvidia_samples"
FACTS: Final = ROOT / "tests" / "fixtures" / "nvidia_crd_paths"
EXAMPLES: Final = ROOT / "docs" / "examples"
NAMESPACE: Final = "samples"
CLUSTER_SCOPED: Final = frozenset({"ClusterPolicy", "NVIDIADriver"})
SERVED: Final = {
    ("apps.nvidia.com/v1alpha1", kind)
    for kind in (
        "NIMService",
        "NIMCache",
        "NIMPipeline",
        "NIMBuild",
        "NemoCustomizer",
        "NemoDatastore",
        "NemoEntitystore",
        "NemoEvaluator",
        "NemoGuardrail",
    )
} | {("nvidia.com/v1", "ClusterPolicy"), ("nvidia.com/v1alpha1", "NVIDIADriver")}

# Verdicts of NVIDIA's CRDs that rest on rules the path facts do not carry:
# sample id -> the refusal (None: accepted). Empty while no sample needs one.
NVIDIA_RULE_VERDICTS: Final[dict[str, str | None]] = {}


@dataclass(frozen=True)
class Sample:
    """One document, named ``<file>#<index>``, renamed for a shared namespace; or a
    file that is not valid YAML (``unparsable``: its text, sent as it is)."""

    id: str
    obj: dict[str, Any]
    unparsable: str | None = None

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def slug(self) -> str:
        """A DNS label unique per sample (the object's name on the cluster)."""
        text = re.sub(r"[^a-z0-9]+", "-", self.id.lower().removesuffix(".yaml"))
        return text.strip("-")[-63:].strip("-")


def _documents(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    yaml = YAML(typ="safe", pure=True)
    for index, doc in enumerate(yaml.load_all(path.read_text(encoding="utf-8"))):
        if isinstance(doc, dict):
            yield index, doc


def _nvidia_file(path: Path) -> Iterator[Sample]:
    try:
        docs = list(_documents(path))
    except YAMLError:
        yield Sample(f"nvidia/{path.name}", {}, path.read_text(encoding="utf-8"))
        return
    for index, doc in docs:
        yield _renamed(f"nvidia/{path.name}#{index}", doc)


def _renamed(sample_id: str, doc: Mapping[str, Any]) -> Sample:
    obj = copy.deepcopy(dict(doc))
    sample = Sample(sample_id, obj)
    meta = obj.setdefault("metadata", {})
    meta["name"] = sample.slug
    if sample.kind in CLUSTER_SCOPED:
        meta.pop("namespace", None)
    else:
        meta["namespace"] = NAMESPACE
    return sample


@cache
def nvidia_samples() -> tuple[Sample, ...]:
    """Every document of NVIDIA's samples kept in the fixtures."""
    return tuple(
        sample for path in sorted(NVIDIA_SAMPLES.glob("*.yaml")) for sample in _nvidia_file(path)
    )


@cache
def docs_samples() -> tuple[Sample, ...]:
    """Every document of a served kind in docs/examples."""
    return tuple(
        _renamed(f"docs/{path.name}#{index}", doc)
        for path in sorted(EXAMPLES.glob("*.yaml"))
        for index, doc in _documents(path)
        if (doc.get("apiVersion"), doc.get("kind")) in SERVED
    )


@cache
def _facts(kind: str) -> Mapping[str, tuple[str, ...]]:
    text = (FACTS / f"{kind}.txt").read_text(encoding="utf-8")
    return {path: tuple(fact.split("\t")) for path, fact in parse_facts(text).items()}


_TYPES: Final[dict[str, Callable[[Any], bool]]] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "int-or-string": lambda v: isinstance(v, int | str) and not isinstance(v, bool),
    "any": lambda v: True,
}


def _fact(fact: tuple[str, ...], key: str) -> Any:
    """The JSON value of ``key=`` in a path's facts, or None."""
    raw = next((f for f in fact if f.startswith(f"{key}=")), None)
    return None if raw is None else json.loads(raw.removeprefix(f"{key}="))


def _bounds(fact: tuple[str, ...], path: str, value: Any) -> str | None:
    """Numeric bounds, string lengths and pattern (Kubernetes searches unanchored)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = _fact(fact, "minimum"), _fact(fact, "maximum")
        if low is not None and value < low:
            return f"{path}: should be greater than or equal to {low}"
        if high is not None and value > high:
            return f"{path}: should be less than or equal to {high}"
    if isinstance(value, str):
        shortest, longest = _fact(fact, "minLength"), _fact(fact, "maxLength")
        if shortest is not None and len(value) < shortest:
            return f"{path}: should be at least {shortest} chars long"
        if longest is not None and len(value) > longest:
            return f"{path}: may not be more than {longest} chars long"
        pattern = _fact(fact, "pattern")
        if pattern is not None and re.search(pattern, value) is None:
            return f"{path}: should match '{pattern}'"
    return None


def _check(facts: Mapping[str, tuple[str, ...]], path: str, value: Any) -> str | None:
    fact = facts[path]
    if not _TYPES[fact[0]](value):
        return f"{path}: must be of type {fact[0]}"
    enum = _fact(fact, "enum")
    if enum is not None and value not in enum:
        return f"{path}: Unsupported value: {value!r}"
    problem = _bounds(fact, path, value)
    if problem:
        return problem
    if isinstance(value, dict):
        return _check_object(facts, path, value, "preserve-unknown-fields" in fact)
    if isinstance(value, list):
        for item in value:
            problem = _check(facts, f"{path}[]", item) if f"{path}[]" in facts else None
            if problem:
                return problem
    return None


def _check_object(
    facts: Mapping[str, tuple[str, ...]], path: str, value: dict[str, Any], keep: bool
) -> str | None:
    for key, item in value.items():
        if item is None:
            continue  # a null in a non-nullable field is dropped before validation
        child = f"{path}.{key}"
        if child in facts:
            problem = _check(facts, child, item)
        elif f"{path}{{}}" in facts:
            problem = _check(facts, f"{path}{{}}", item)
        elif keep or facts[path][0] == "any":
            problem = None
        else:
            problem = f'unknown field "{child}"'
        if problem:
            return problem
    prefix = f"{path}."
    for child, fact in facts.items():
        name = child.removeprefix(prefix)
        direct = child.startswith(prefix) and re.fullmatch(r"\w+", name) is not None
        defaulted = any(f.startswith("default=") for f in fact)  # filled in before validation
        if direct and "required" in fact and not defaulted and value.get(name) is None:
            return f"{child}: Required value"
    return None


def nvidia_verdict(sample: Sample) -> str | None:
    """What NVIDIA's CRDs answer to ``kubectl apply`` of the sample: None when
    accepted, else the first refusal."""
    if sample.unparsable is not None:
        return "error parsing the file as YAML (kubectl refuses it before sending)"
    if sample.id in NVIDIA_RULE_VERDICTS:
        return NVIDIA_RULE_VERDICTS[sample.id]
    if (sample.obj.get("apiVersion"), sample.kind) not in SERVED:
        return f'no matches for kind "{sample.kind}" in {sample.obj.get("apiVersion")}'
    facts = _facts(sample.kind)
    for top in ("spec", "status"):
        value = sample.obj.get(top)
        if value is not None:
            problem = _check(facts, top, value)
            if problem:
                return problem
    return None
