"""The field paths of a CRD schema as comparable facts: one line per path with its
type, whether its parent requires it, whether a typed object keeps unknown fields,
and its default, enum, format, bounds and pattern where present. Used to compare our generated CRDs
with NVIDIA's (tests/fixtures/nvidia_crd_paths) and to write those fixtures from
NVIDIA's CRD files (``python -m tests.unit.api.crd_paths CRD.yaml... --out DIR``).

A path names object properties with ``.``, array items with ``[]`` and map
values (``additionalProperties``) with ``{}``; ``apiVersion``, ``kind`` and
``metadata`` are left out (every CRD has them).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

__all__ = ["crd_facts", "format_facts", "main", "parse_facts", "schema_of"]


def _type(node: Mapping[str, Any]) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    if "type" in node:
        return str(node["type"])
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return "any"
    return "object" if "properties" in node else "any"


_BOUNDS = ("format", "minimum", "maximum", "minLength", "maxLength", "pattern")


def _walk(node: Mapping[str, Any], path: str, required: bool = False) -> Iterator[tuple[str, str]]:
    fact = _type(node)
    if required:
        fact += "\trequired"
    if node.get("x-kubernetes-preserve-unknown-fields") and "properties" in node:
        fact += "\tpreserve-unknown-fields"
    if "default" in node:
        fact += "\tdefault=" + json.dumps(node["default"], sort_keys=True)
    if "enum" in node:
        fact += "\tenum=" + json.dumps(sorted(node["enum"], key=json.dumps))
    for key in _BOUNDS:
        if key in node:
            fact += f"\t{key}=" + json.dumps(node[key])
    yield path, fact
    needed = set(node.get("required", []))
    for name, sub in node.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{name}", name in needed)
    items = node.get("items")
    if isinstance(items, Mapping):
        yield from _walk(items, f"{path}[]")
    extra = node.get("additionalProperties")
    if isinstance(extra, Mapping):
        yield from _walk(extra, f"{path}{{}}")


def schema_of(crd: Mapping[str, Any]) -> Mapping[str, Any]:
    """The served storage version's ``openAPIV3Schema`` of a CRD."""
    versions = crd["spec"]["versions"]
    version = next((v for v in versions if v.get("storage")), versions[0])
    schema: Mapping[str, Any] = version["schema"]["openAPIV3Schema"]
    return schema


def crd_facts(crd: Mapping[str, Any]) -> dict[str, str]:
    """Path -> ``type[\\trequired][\\tdefault=..][\\tenum=..][\\tformat=..]...`` of
    ``spec`` and ``status``."""
    props = schema_of(crd).get("properties", {})
    facts: dict[str, str] = {}
    for top in ("spec", "status"):
        if top in props:
            facts.update(_walk(props[top], top))
    return facts


def format_facts(facts: Mapping[str, str]) -> str:
    """The fixture text: sorted ``path<TAB>facts`` lines."""
    return "".join(f"{path}\t{facts[path]}\n" for path in sorted(facts))


def parse_facts(text: str) -> dict[str, str]:
    """Inverse of :func:`format_facts` (``#`` lines are comments)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            path, _, fact = line.partition("\t")
            out[path] = fact
    return out


def main(argv: list[str] | None = None) -> int:
    """Write ``<Kind>.txt`` for every CRD in the given YAML files."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    yaml = YAML(typ="safe", pure=True)
    args.out.mkdir(parents=True, exist_ok=True)
    for path in args.files:
        for doc in yaml.load_all(path.read_text(encoding="utf-8")):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                kind = doc["spec"]["names"]["kind"]
                (args.out / f"{kind}.txt").write_text(format_facts(crd_facts(doc)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
