"""The container image: constraints.txt is current, the Dockerfile builds what the
chart runs (multi-stage, non-root, every package copied, no pip at run time), and
it builds for real where a container engine exists."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.integration.chart import lockfile

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"


def stages() -> list[list[str]]:
    """The Dockerfile's instructions (continuations joined), one list per stage."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            out.append([])
        out[-1].append(line)
    return out


def test_constraints_are_current_with_pyproject() -> None:
    assert lockfile.problems() == []


def test_lockfile_check_catches_a_dependency_change(monkeypatch: pytest.MonkeyPatch) -> None:
    real = lockfile.dependencies()
    monkeypatch.setattr(lockfile, "dependencies", lambda: [*real, "left-pad>=1"])
    found = lockfile.problems()
    assert any("changed since constraints.txt was generated" in p for p in found)
    assert "constraints.txt does not pin left-pad" in found


def test_image_is_multi_stage_and_runs_nimctl_as_non_root() -> None:
    build, final = stages()[0], stages()[-1]
    assert len(stages()) >= 2
    assert any("--constraint constraints.txt" in i for i in build)
    user = next(i for i in final if i.startswith("USER "))
    uid = user.split()[1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    assert 'ENTRYPOINT ["nimctl"]' in final
    assert 'CMD ["run"]' in final
    # nothing to build software with at run time
    assert any("pip uninstall --yes pip" in i for i in final)
    assert not any(re.search(r"apt-get install|gcc|build-essential", i) for i in final)
    # the chart runs the image as the same user
    values = (ROOT / "charts/nimctl/values.yaml").read_text()
    assert f"runAsUser: {uid}" in values


def test_every_python_package_is_copied_into_the_image() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    packages = [p.removesuffix(".*").rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]]
    copied = {i.split()[1] for i in stages()[0] if i.startswith("COPY ") and "--from" not in i}
    assert set(packages) <= copied, f"not copied: {set(packages) - copied}"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", "tests"} <= set(ignored)
    assert not set(packages) & set(ignored)


def _engine() -> str:
    for name in ("docker", "podman"):
        binary = shutil.which(name)
        if binary and subprocess.run([binary, "info"], check=False, capture_output=True, timeout=30).returncode == 0:
            return binary
    pytest.skip("no container engine (docker or podman) is running: the image is not built here")


@pytest.mark.timeout(1800)
def test_image_builds_and_prints_its_help() -> None:
    engine = _engine()
    tag = "nimctl:test"
    subprocess.run([engine, "build", "-t", tag, str(ROOT)], check=True, timeout=1700)
    out = subprocess.run([engine, "run", "--rm", tag, "run", "--help"], capture_output=True, text=True, check=True)
    assert "--disable-gpu-lifecycle" in out.stdout
    who = subprocess.run([engine, "run", "--rm", "--entrypoint", "id", tag, "-u"], capture_output=True, text=True, check=True)
    assert who.stdout.strip() == "65532"
