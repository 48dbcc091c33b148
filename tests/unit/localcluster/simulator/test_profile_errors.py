"""A bad --profile is one clear line naming the file, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcluster.simulator.nodes import load_profile
from localcluster.standalone import main
from nimctl.cli import build_parser


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("nodes: [\n", "cannot read it as YAML"),
        ("- a\n- b\n", "expected a mapping with 'pools'"),
    ],
)
def test_bad_profile_files_name_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(content)
    with pytest.raises(ValueError, match=message) as info:
        load_profile(str(path))
    assert str(path) in str(info.value)


def test_localcluster_command_reports_a_missing_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(
        [
            "localcluster",
            "--kubeconfig",
            str(tmp_path / "kc"),
            "--profile",
            str(tmp_path / "none.yaml"),
        ]
    )
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("nimctl localcluster: cannot start: unknown node profile")
    assert "Traceback" not in err


def test_the_rdma_profile_offers_the_device_the_mpi_example_asks_for() -> None:
    from localcluster.simulator.nodes import build_nodes

    nodes = build_nodes(load_profile("gpu-rdma"))
    gpu = [n for n in nodes if "nvidia.com/gpu" in n["status"]["allocatable"]]
    assert len(gpu) == 2
    for node in gpu:
        assert node["status"]["allocatable"]["rdma/rdma_shared_device_a"] == "1000"
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "8"
    cpu = [n for n in nodes if n not in gpu]
    assert all("rdma/rdma_shared_device_a" not in n["status"]["allocatable"] for n in cpu)


def test_an_extended_resource_without_a_domain_is_refused() -> None:
    data = {"pools": [{"namePrefix": "n", "extendedResources": {"rdma": "1"}}]}
    with pytest.raises(ValueError, match="'rdma' is not an extended resource name"):
        load_profile(data)


def test_local_command_reports_a_missing_profile(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from nimctl.local import cmd_local

    args = build_parser().parse_args(
        ["local", "--kubeconfig", str(tmp_path / "kc"), "--profile", "nope"]
    )
    assert cmd_local(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("nimctl local: --profile: unknown node profile 'nope'")
