"""The generated CRDs: committed copies are current, every model field is in its
CRD, the field inventory is what the API promises, and the docs are current."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from api.crdgen import crd_file_name, generate_crds, to_yaml
from api.reference import DOC_PATH, field_docs, render_markdown
from api.serialize import kind_registry

ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = ROOT / "charts" / "nimctl" / "crds"
GOLDEN = Path(__file__).parent / "golden"
CRDS = {c["spec"]["names"]["kind"]: c for c in generate_crds()}
STALE = "regenerate with: .venv/bin/python -m nimctl crds --output charts/nimctl/crds"


def test_generation_is_byte_stable() -> None:
    # to_yaml sorts keys, so sorted JSON of two generations differs exactly when their YAML does.
    def canonical() -> str:
        return json.dumps(generate_crds(), sort_keys=True)

    assert canonical() == canonical() == json.dumps(list(CRDS.values()), sort_keys=True)


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_committed_crd_is_current(kind: str) -> None:
    crd = CRDS[kind]
    committed = CRD_DIR / crd_file_name(crd)
    assert committed.exists(), STALE
    assert committed.read_text() == to_yaml([crd]), STALE


def test_no_stray_crd_files() -> None:
    expected = {crd_file_name(c) for c in CRDS.values()}
    present = {p.name for p in CRD_DIR.glob("apps.nvidia.com_*.yaml")}
    assert present <= expected


def _schema_at(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in path.split("."):
        if node is None:
            return None
        array = part.endswith("[]")
        name = part[:-2] if array else part
        node = node.get("properties", {}).get(name)
        if array and node is not None:
            node = node.get("items")
    return node


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_every_model_field_is_in_the_crd_and_the_inventory_is_unchanged(kind: str) -> None:
    crd = CRDS[kind]
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    version = crd["spec"]["versions"][0]["name"]
    model = kind_registry[(f"{crd['spec']['group']}/{version}", kind)]
    docs = list(field_docs(model))
    for doc in docs:
        assert _schema_at(schema, doc.path) is not None, f"{doc.path} missing from the CRD"
    listing = "\n".join(f"{d.path} {d.type}" for d in docs) + "\n"
    golden = GOLDEN / f"{kind}.fields"
    assert golden.exists(), f"write {golden} from field_docs() for a new kind"
    assert listing == golden.read_text(), (
        f"the field inventory of {kind} changed; if intended, update {golden}"
    )


def test_crd_shape_matches_nvidia() -> None:
    ns = CRDS["NIMService"]
    assert ns["metadata"]["name"] == "nimservices.apps.nvidia.com"
    assert ns["spec"]["scope"] == "Namespaced"
    assert "shortNames" not in ns["spec"]["names"]
    version = ns["spec"]["versions"][0]
    assert version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Status", "Age"]
    cache = CRDS["NIMCache"]["spec"]["versions"][0]
    assert [c["jsonPath"] for c in cache["additionalPrinterColumns"]] == [
        ".status.state", ".status.pvc", ".metadata.creationTimestamp"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["required"] == ["image"]
    assert spec["properties"]["expose"]["properties"]["service"]["properties"]["port"][
        "default"] == 8000
    env = spec["properties"]["env"]["items"]
    assert env["required"] == ["name"] and "valueFrom" in env["properties"]
    statuses = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"][
        "draResourceStatuses"]
    assert statuses["x-kubernetes-list-type"] == "map"
    assert statuses["x-kubernetes-list-map-keys"] == ["name"]
    limits = spec["properties"]["resources"]["properties"]["limits"]["additionalProperties"]
    assert limits["x-kubernetes-int-or-string"] is True


def _walk(node: Any) -> Any:
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


@pytest.mark.parametrize("kind", sorted(CRDS))
def test_schemas_are_structural(kind: str) -> None:
    for node in _walk(CRDS[kind]["spec"]["versions"][0]["schema"]):
        assert "$ref" not in node and "title" not in node
        if "properties" in node:
            assert node.get("type") == "object"
            assert "additionalProperties" not in node
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string") is True
        if isinstance(node.get("type"), list):
            pytest.fail(f"type list in {node}")


def test_api_reference_doc_is_current() -> None:
    assert (ROOT / DOC_PATH).read_text() == render_markdown(), (
        "regenerate with: .venv/bin/python -m api.reference"
    )


def test_embedded_core_lists_are_acceptable_list_maps() -> None:
    from api.crdgen import list_map_key_problems
    from api.k8s import structural_schema

    pod = structural_schema("io.k8s.api.core.v1.PodSpec", "v1.34.0")
    assert list_map_key_problems(pod) == []
    ports = pod["properties"]["containers"]["items"]["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert ports["items"]["properties"]["protocol"]["default"] == "TCP"
    for crd in CRDS.values():
        assert list_map_key_problems(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]) == []
