"""``nimctl render -f gpucluster.yaml [--nodes nodes.yaml]``: NVIDIA's sample, offline."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from platforms.cli import main

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
SAMPLE = EXAMPLES / "gpucluster-sample.yaml"


def _render(path: Path, nodes: Path | None = None) -> list[dict[str, object]]:
    out = io.StringIO()
    assert main(str(path), None, nodes=str(nodes) if nodes else None, out=out) == 0
    return [d for d in YAML(typ="safe").load_all(out.getvalue()) if d]


def test_the_sample_renders_its_enabled_states(capsys: pytest.CaptureFixture[str]) -> None:
    objs = _render(SAMPLE, EXAMPLES / "gpu-nodes.yaml")
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}  # type: ignore[index]
    assert ("DaemonSet", "nvidia-dra-driver-kubelet-plugin") in kinds
    assert ("Deployment", "nvidia-dra-driver-controller") in kinds  # computeDomains on
    assert ("DaemonSet", "nvidia-dcgm-exporter-dra") in kinds
    assert ("DaemonSet", "nvidia-dcgm-dra") not in kinds  # dcgm off in the sample
    assert ("DeviceClass", "gpu.nvidia.com") in kinds
    err = capsys.readouterr().err
    assert "# state-dcgm: disabled" in err and "# state-dra-driver: 26 objects" in err


def test_beside_a_clusterpolicy_nothing_is_rendered(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    both = tmp_path / "both.yaml"
    both.write_text(
        (EXAMPLES / "clusterpolicy-defaults.yaml").read_text() + "\n---\n" + SAMPLE.read_text()
    )
    objs = _render(both)
    assert not [o for o in objs if "dra" in str(o["metadata"])]  # type: ignore[index]
    assert 'A ClusterPolicy CR "cluster-policy" exists' in capsys.readouterr().err


def test_a_bad_image_names_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(SAMPLE.read_text().replace("    version: v0.4.0\n", "", 1))
    assert main(str(bad), None, out=io.StringIO()) == 1
    err = capsys.readouterr().err
    assert "GPUCluster gpu-cluster" in err and "spec.draDriver" in err
