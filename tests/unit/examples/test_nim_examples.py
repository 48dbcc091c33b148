"""Every NIM-kind example in docs/examples parses into its model and renders.

NIMService and NIMPipeline examples render on the standalone platform (their
NIMCache taken from the same file or assumed Ready); NIMCache examples render
their caching objects. Built-in objects validate against Kubernetes' schemas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from api.serialize import load_all
from platforms import kserve
from platforms.cli import pipeline_services
from platforms.objects import as_dict
from platforms.standalone import RenderContext, UnsupportedSpec, render
from platforms.standalone import nimcache as nc
from tests.unit.platforms.helpers import assert_valid_k8s

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
NIM_KINDS = {"NIMService", "NIMCache", "NIMPipeline"}
NIM_FILES = sorted(
    p
    for p in EXAMPLES.glob("*.yaml")
    if p.name.startswith(("nim-", "nimservice-", "nimcache-", "nimpipeline-"))
)


def _docs(path: Path) -> list[dict[str, Any]]:
    return [as_dict(m) for m in load_all(path.read_text())]


def _ready_cache(cache: dict[str, Any]) -> dict[str, Any]:
    name = cache["metadata"]["name"]
    pvc = cache["spec"]["storage"].get("pvc", {}).get("name") or f"{name}-pvc"
    return {**cache, "status": {"state": "Ready", "pvc": pvc}}


def _context_for(svc: dict[str, Any], caches: dict[str, dict[str, Any]]) -> RenderContext:
    name = svc["spec"].get("storage", {}).get("nimCache", {}).get("name")
    if not name:
        return RenderContext()
    ns = svc["metadata"].get("namespace", "default")
    cache = caches.get(name) or {
        "metadata": {"name": name, "namespace": ns},
        "spec": {"storage": {"pvc": {"name": f"{name}-pvc"}}},
        "status": {"state": "Ready", "pvc": f"{name}-pvc"},
    }
    return RenderContext(nimcache=cache)


def test_the_scenarios_are_all_there() -> None:
    names = {p.name for p in NIM_FILES}
    assert len(names) >= 30
    for required in (
        "nim-minimal.yaml",
        "nimservice-autoscaling.yaml",
        "nimservice-gateway-grpcroute.yaml",
        "nimservice-multinode-mpi.yaml",
        "nimpipeline-rag.yaml",
        "nimcache-ngc-mirror-s3.yaml",
    ):
        assert required in names


@pytest.mark.parametrize("path", NIM_FILES, ids=lambda p: p.name)
def test_example_parses_and_renders(path: Path) -> None:
    docs = _docs(path)
    assert docs and all(d["kind"] in NIM_KINDS for d in docs)
    caches = {d["metadata"]["name"]: _ready_cache(d) for d in docs if d["kind"] == "NIMCache"}
    rendered: list[dict[str, Any]] = []
    for doc in docs:
        services = [doc] if doc["kind"] == "NIMService" else []
        if doc["kind"] == "NIMPipeline":
            services = pipeline_services(doc)
            assert services, "a pipeline example deploys at least one service"
        for svc in services:
            if svc["spec"].get("inferencePlatform") == "kserve":
                with pytest.raises(UnsupportedSpec, match="inferencePlatform"):
                    render(svc, _context_for(svc, caches))
                objs = kserve.render(svc, _context_for(svc, caches))
                assert objs[-1]["kind"] == "InferenceService"
            else:
                objs = render(svc, _context_for(svc, caches))
                assert objs[-1]["kind"] in ("Deployment", "LeaderWorkerSet")
            for obj in objs:
                # What the operator's label-filtered cache and GC rely on.
                meta = obj["metadata"]
                assert meta["labels"]["app.kubernetes.io/managed-by"] == "k8s-nim-operator"
                (owner,) = meta["ownerReferences"]
                assert owner["kind"] == "NIMService" and owner["controller"] is True
                assert owner["name"] == svc["metadata"]["name"]
                assert meta["annotations"]["nvidia.com/last-applied-hash"]
            rendered.extend(objs)
        if doc["kind"] == "NIMCache":
            rendered.append(nc.manifest_pod(doc))
            claim = nc.build_pvc(doc)
            if claim is not None:
                rendered.append(claim)
            rendered.append(nc.caching_job(doc, selected_profiles=["all"]))
    assert_valid_k8s(rendered)


@pytest.mark.parametrize("path", NIM_FILES, ids=lambda p: p.name)
async def test_example_passes_the_admission_webhooks(path: Path) -> None:
    from webhooks.facts import StaticClusterFacts
    from webhooks.nimcache import NIMCacheValidator
    from webhooks.nimservice import NIMServiceValidator

    services = NIMServiceValidator(StaticClusterFacts(version="v1.34.0"))
    caches = NIMCacheValidator()
    for doc in _docs(path):
        if doc["kind"] == "NIMCache":
            assert [str(e) for e in caches.check(doc)] == []
        for svc in pipeline_services(doc) if doc["kind"] == "NIMPipeline" else [doc]:
            if svc["kind"] != "NIMService":
                continue
            errors, warnings = await services.check(svc)
            assert [str(e) for e in errors] == []
            if path.name != "nimservice-deprecated-ingress.yaml":
                assert warnings == []
