"""The generated CRDs installed in localcluster with kubectl: NVIDIA-shaped
manifests are accepted unchanged by ``kubectl apply``, every negative row is
rejected with NVIDIA's message at its field path, the immutable fields refuse an
update, and ``kubectl get`` prints NVIDIA's columns."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from api.serialize import yaml_dump_all
from tests.conftest import Kubectl
from tests.integration.kubectl_crds import error_blocks, install_crds
from tests.unit.api.negative_cases import BASES, CASES, set_path

pytestmark = pytest.mark.kubectl

MANIFESTS = sorted((Path(__file__).resolve().parents[2] / "unit/api/manifests").glob("*.yaml"))
APPLY = ("apply", "-f")


async def test_nvidia_shaped_manifests_apply_unchanged(kubectl: Kubectl, tmp_path: Path) -> None:
    await install_crds(kubectl, tmp_path)
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: nim-service}\n"
    await kubectl.run(*APPLY, "-", input=namespace)
    for path in MANIFESTS:
        await kubectl.run(*APPLY, str(path))
    out = await kubectl.run("get", "nimservices,nimcaches,nimpipelines,nimbuilds", "-A",
                            "-o", "name")
    assert len(out.stdout.split()) == len(MANIFESTS)
    got = await kubectl.run("get", "nimservice", "meta-llama3-8b-instruct", "-n", "nim-service",
                            "-o", "jsonpath={.spec.expose.router.ingress.ingressClass}")
    assert got.stdout == "nginx"
    table = await kubectl.run("get", "nimcaches", "-A")
    assert table.stdout.split("\n")[0].split() == ["NAMESPACE", "NAME", "STATUS", "PVC", "AGE"]


async def test_invalid_manifests_are_rejected_with_nvidia_messages(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    await install_crds(kubectl, tmp_path)
    cases = [c for c in CASES if not c.status]
    docs: list[dict[str, Any]] = []
    for case in cases:
        obj = case.manifest()
        obj["metadata"]["name"] = case.id
        docs.append(obj)
    result = await kubectl.run(*APPLY, "-", input=yaml_dump_all(docs), check=False)
    assert result.returncode != 0
    blocks = error_blocks(result.stderr)
    for case in cases:
        block = blocks.get(case.id)
        assert block is not None, f"{case.id} was accepted:\n{result.stdout}"
        assert f"{case.path}:" in block, f"{case.id}: no error at {case.path}:\n{block}"
        assert case.message in block, f"{case.id}: {case.message!r} not in:\n{block}"


@pytest.mark.parametrize(
    ("kind", "path", "old_value", "new_value", "message"),
    [
        ("NIMService", "spec.draResources", [{"resourceClaimName": "a"}],
         [{"resourceClaimName": "b"}], "spec.draResources is immutable"),
        ("NIMCache", "spec.source.ngc.modelPuller", "nvcr.io/nim/x:1", "nvcr.io/nim/x:2",
         "modelPuller is an immutable field. Please create a new NIMCache resource instead "
         "when you want to change this container."),
        ("NIMBuild", "spec.modelName", "a", "b", "spec is immutable"),
    ],
)
async def test_immutable_fields_refuse_updates(
    kubectl: Kubectl, tmp_path: Path, kind: str, path: str, old_value: Any, new_value: Any,
    message: str,
) -> None:
    await install_crds(kubectl, tmp_path)
    obj = copy.deepcopy(BASES[kind])
    set_path(obj, path, old_value)
    await kubectl.run(*APPLY, "-", input=yaml_dump_all([obj]))
    set_path(obj, path, new_value)
    result = await kubectl.run(*APPLY, "-", input=yaml_dump_all([obj]), check=False)
    assert result.returncode != 0
    assert message in result.stderr


async def test_invalid_status_is_rejected_through_the_status_subresource(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    await install_crds(kubectl, tmp_path)
    for case in (c for c in CASES if c.status):
        obj = copy.deepcopy(BASES[case.kind])
        obj["metadata"]["name"] = case.id
        await kubectl.run(*APPLY, "-", input=yaml_dump_all([obj]))
        status = case.manifest()["status"]
        result = await kubectl.run(
            "patch", case.kind.lower(), case.id, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}), check=False,
        )
        assert result.returncode != 0, f"{case.id}: status accepted"
        assert f"{case.path}:" in result.stderr and case.message in result.stderr, result.stderr
