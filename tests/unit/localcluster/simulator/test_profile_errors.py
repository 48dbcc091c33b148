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


def test_localcluster_command_reports_a_missing_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(
        ["localcluster", "--kubeconfig", str(tmp_path / "kc"), "--profile", str(tmp_path / "none.yaml")]
    )
    assert main(args) == 1
    err = capsys.readouterr().err
    assert err.startswith("nimctl localcluster: cannot start: unknown node profile")
    assert "Traceback" not in err
