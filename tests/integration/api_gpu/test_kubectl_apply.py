"""The generated NeMo, ClusterPolicy and NVIDIADriver CRDs installed in
localcluster with kubectl: the docs examples are accepted unchanged by
``kubectl apply`` (and read back as written), every negative row is rejected
with NVIDIA's message at its field path, NVIDIADriver's immutable fields refuse
an update, invalid statuses are refused through the status subresource, and
``kubectl get`` prints NVIDIA's columns and knows the short names."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from api.nvidia.v1alpha1.nvidiadriver import (
    DRIVER_TYPE_IMMUTABLE_MESSAGE,
    USE_PRECOMPILED_IMMUTABLE_MESSAGE,
)
from api.serialize import to_plain, yaml_dump_all
from tests.conftest import Kubectl
from tests.integration.kubectl_crds import error_blocks, install_crds
from tests.unit.api.negative_cases import set_path
from tests.unit.api_gpu import cases as gpu_cases
from tests.unit.api_nemo import cases as nemo_cases

pytestmark = pytest.mark.kubectl

EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "docs" / "examples"
EXAMPLES = sorted(
    p
    for p in EXAMPLES_DIR.glob("*.yaml")
    if p.name.startswith(("nemo-", "clusterpolicy", "nvidiadriver"))
)
APPLY = ("apply", "-f")
RESOURCES = "nemocustomizers,nemodatastores,nemoentitystores,nemoevaluators,nemoguardrails"


def _docs(path: Path) -> list[dict[str, Any]]:
    yaml = YAML(typ="safe", pure=True)
    return [to_plain(d) for d in yaml.load_all(path.read_text()) if d is not None]


def _contains(stored: Any, written: Any) -> bool:
    """Everything the user wrote is stored as written (the server may add more)."""
    if isinstance(written, dict):
        return isinstance(stored, dict) and all(
            k in stored and _contains(stored[k], v) for k, v in written.items()
        )
    return bool(stored == written)


async def test_examples_apply_unchanged_and_read_back(kubectl: Kubectl, tmp_path: Path) -> None:
    await install_crds(kubectl, tmp_path)
    await kubectl.run(*APPLY, "-", input="apiVersion: v1\nkind: Namespace\nmetadata: {name: nemo}\n")
    for path in EXAMPLES:
        await kubectl.run(*APPLY, str(path))
    for path in EXAMPLES:
        for doc in _docs(path):
            args = ["get", doc["kind"].lower(), doc["metadata"]["name"], "-o", "json"]
            if "namespace" in doc["metadata"]:
                args += ["-n", doc["metadata"]["namespace"]]
            stored = json.loads((await kubectl.run(*args)).stdout)
            assert _contains(stored["spec"], doc["spec"]), f"{path.name}: spec changed"
    names = await kubectl.run("get", RESOURCES, "-n", "nemo", "-o", "name")
    assert len(names.stdout.split()) == 5
    # NVIDIA's NeMo CRDs store no userID default (the operator runs the pod as 1000);
    # the ClusterPolicy CRD fills cdi.default.
    user_id = await kubectl.run("get", "nemoentitystore", "nemoentitystore-sample", "-n", "nemo",
                                "-o", "jsonpath={.spec.userID}")
    assert user_id.stdout == ""
    cdi = await kubectl.run("get", "clusterpolicy", "cluster-policy",
                            "-o", "jsonpath={.spec.cdi.default}")
    assert cdi.stdout == "false"
    # Short names, and NVIDIA's columns.
    table = await kubectl.run("get", "nvd")
    assert table.stdout.split("\n")[0].split() == ["NAME", "STATUS", "DEFAULT", "AGE"]
    default_row = next(r for r in table.stdout.splitlines() if r.startswith("default "))
    assert "true" in default_row.split()
    cp_table = await kubectl.run("get", "clusterpolicies")
    assert cp_table.stdout.split("\n")[0].split() == ["NAME", "STATUS", "AGE"]
    nemo_table = await kubectl.run("get", "nemoguardrails", "-n", "nemo")
    assert nemo_table.stdout.split("\n")[0].split() == ["NAME", "STATUS", "AGE"]


async def test_invalid_manifests_are_rejected_with_nvidia_messages(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    await install_crds(kubectl, tmp_path)
    await kubectl.run(*APPLY, "-", input="apiVersion: v1\nkind: Namespace\nmetadata: {name: nemo}\n")
    rows: list[Any] = [*nemo_cases.CASES, *(c for c in gpu_cases.CASES if not c.status)]
    docs: list[dict[str, Any]] = []
    for case in rows:
        obj = case.manifest()
        obj["metadata"]["name"] = case.id
        docs.append(obj)
    result = await kubectl.run(*APPLY, "-", input=yaml_dump_all(docs), check=False)
    assert result.returncode != 0
    blocks = error_blocks(result.stderr)
    for case in rows:
        block = blocks.get(case.id)
        assert block is not None, f"{case.id} was accepted:\n{result.stdout}"
        assert f"{case.path}:" in block, f"{case.id}: no error at {case.path}:\n{block}"
        assert case.message in block, f"{case.id}: {case.message!r} not in:\n{block}"


@pytest.mark.parametrize(
    ("path", "old_value", "new_value", "message"),
    [
        ("spec.driverType", "gpu", "vgpu", DRIVER_TYPE_IMMUTABLE_MESSAGE),
        ("spec.usePrecompiled", False, True, USE_PRECOMPILED_IMMUTABLE_MESSAGE),
    ],
)
async def test_nvidiadriver_immutable_fields_refuse_updates(
    kubectl: Kubectl, tmp_path: Path, path: str, old_value: Any, new_value: Any, message: str
) -> None:
    await install_crds(kubectl, tmp_path)
    obj = copy.deepcopy(gpu_cases.BASES["NVIDIADriver"])
    set_path(obj, path, old_value)
    await kubectl.run(*APPLY, "-", input=yaml_dump_all([obj]))
    set_path(obj, path, new_value)
    result = await kubectl.run(*APPLY, "-", input=yaml_dump_all([obj]), check=False)
    assert result.returncode != 0
    assert message in result.stderr
    # Other fields still change.
    set_path(obj, path, old_value)
    set_path(obj, "spec.version", "600.10")
    await kubectl.run(*APPLY, "-", input=yaml_dump_all([obj]))


async def test_invalid_status_is_rejected_through_the_status_subresource(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    await install_crds(kubectl, tmp_path)
    for case in (c for c in gpu_cases.CASES if c.status):
        obj = copy.deepcopy(gpu_cases.BASES[case.kind])
        obj["metadata"]["name"] = case.id
        await kubectl.run(*APPLY, "-", input=yaml_dump_all([obj]))
        status = case.manifest()["status"]
        result = await kubectl.run(
            "patch", case.kind.lower(), case.id, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": status}), check=False,
        )
        assert result.returncode != 0, f"{case.id}: status accepted"
        assert f"{case.path}:" in result.stderr and case.message in result.stderr, result.stderr
        ready = await kubectl.run(
            "patch", case.kind.lower(), case.id, "--subresource=status", "--type=merge",
            "-p", json.dumps({"status": {"state": "ready"}}),
        )
        assert ready.returncode == 0
