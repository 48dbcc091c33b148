"""Every NVIDIA sample (their config/samples, kept in tests/fixtures/nvidia_samples)
and every docs example gets the same verdict from ``kubectl apply`` against our
CRDs on localcluster as NVIDIA's CRDs give it (decided from the facts of NVIDIA's
CRDs, tests/unit/api/sample_verdicts.py): accepted, or refused."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from api.serialize import yaml_dump_all
from tests.conftest import Kubectl
from tests.integration.kubectl_crds import install_crds
from tests.unit.api.sample_verdicts import (
    NAMESPACE,
    Sample,
    docs_samples,
    nvidia_samples,
    nvidia_verdict,
)

pytestmark = pytest.mark.kubectl


def _write(samples: tuple[Sample, ...], directory: Path) -> dict[str, Sample]:
    directory.mkdir()
    files: dict[str, Sample] = {}
    for sample in samples:
        path = directory / f"{sample.slug}.yaml"
        text = sample.unparsable if sample.unparsable is not None else yaml_dump_all([sample.obj])
        path.write_text(text, encoding="utf-8")
        files[str(path)] = sample
    return files


async def test_nvidia_samples_and_docs_examples_get_nvidias_verdict(
    kubectl: Kubectl, tmp_path: Path
) -> None:
    await install_crds(kubectl, tmp_path)
    namespace = f"apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n"
    await kubectl.run("apply", "-f", "-", input=namespace)
    samples = nvidia_samples() + docs_samples()
    files = _write(samples, tmp_path / "samples")
    out = await kubectl.run("apply", "-f", str(tmp_path / "samples"), check=False)
    created = set(re.findall(r"^\S+/(\S+) created$", out.stdout, re.MULTILINE))
    wrong: list[str] = []
    for path, sample in files.items():
        expected = nvidia_verdict(sample)
        ours = [line for line in out.stderr.splitlines() if path in line or sample.slug in line]
        accepted = sample.slug in created and not ours
        if accepted != (expected is None):
            said = "accepted" if accepted else f"refused: {' '.join(ours)[:300]}"
            wrong.append(f"{sample.id}: NVIDIA's CRDs: {expected or 'accepted'}; ours: {said}")
    assert wrong == [], "\n".join(wrong)
    refused = sum(1 for s in samples if nvidia_verdict(s) is not None)
    assert 0 < refused < len(samples), "both verdicts must be exercised"
