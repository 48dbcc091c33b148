"""``nimctl render -f`` as a user runs it: every NIM example renders; broken files get a clear error."""

from __future__ import annotations

import io
import subprocess
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from platforms.cli import main as render_main
from tests.e2e.journeys.harness import EXAMPLES, nimctl_argv, subprocess_env

NIM_KINDS = ("NIMService", "NIMCache", "NIMPipeline")


def _nim_examples() -> list[Path]:
    """The examples whose documents are all NIM kinds (the ones ``render`` handles)."""
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs = [d for d in YAML(typ="safe").load_all(path.read_text()) if d]
        if docs and all(d.get("kind") in NIM_KINDS for d in docs):
            found.append(path)
    return found


def _render(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    return subprocess.run(
        nimctl_argv("render", *args),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env=subprocess_env(home),
        timeout=90,
        check=False,
    )


def _objects(text: str) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe").load_all(text) if d]


def test_the_readme_render_command_prints_the_objects(tmp_path: Path) -> None:
    res = _render(tmp_path, "-f", str(EXAMPLES / "nim-minimal.yaml"))
    assert res.returncode == 0, res.stderr
    kinds = {o["kind"] for o in _objects(res.stdout)}
    assert {"Deployment", "Service", "PersistentVolumeClaim"} <= kinds, kinds
    assert "Traceback" not in res.stderr


@pytest.mark.parametrize("path", _nim_examples(), ids=lambda p: p.name)
def test_every_nim_example_renders(path: Path) -> None:
    out = io.StringIO()
    assert render_main(str(path), None, out=out) == 0
    objects = _objects(out.getvalue())
    assert objects
    for obj in objects:
        assert obj.get("apiVersion") and obj.get("kind") and obj["metadata"].get("name"), obj


BROKEN = {
    "malformed.yaml": (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n data: [\n",
        "not valid YAML",
    ),
    "notag.yaml": (
        "apiVersion: apps.nvidia.com/v1alpha1\nkind: NIMService\nmetadata: {name: a, namespace: b}\n"
        "spec:\n  image: {repository: r}\n  storage: {emptyDir: {}}\n",
        "spec.image.tag: Required value",
    ),
    "unknown.yaml": (
        "apiVersion: apps.nvidia.com/v1alpha1\nkind: NIMService\nmetadata: {name: a, namespace: b}\n"
        "spec:\n  bogus: 1\n  image: {repository: r, tag: t}\n  storage: {emptyDir: {}}\n",
        "spec.bogus: unknown field",
    ),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_broken_file_gets_a_one_line_reason_and_exit_1(tmp_path: Path, name: str) -> None:
    text, reason = BROKEN[name]
    (tmp_path / name).write_text(text)
    res = _render(tmp_path, "-f", name)
    assert res.returncode == 1
    assert res.stderr.startswith(f"error: {name}"), res.stderr
    assert reason in res.stderr
    assert "Traceback" not in res.stderr
    assert res.stdout == ""


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    res = _render(tmp_path, "-f", "nope.yaml")
    assert res.returncode == 1
    assert "nope.yaml: No such file or directory" in res.stderr
    assert "Traceback" not in res.stderr
