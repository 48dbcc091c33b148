"""A second ``nimctl local``/``localcluster`` on the same state directory is refused in one line."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localcluster import statedir


def test_claim_is_exclusive_and_names_the_holder(tmp_path: Path) -> None:
    first = statedir.claim(tmp_path / ".nimctl", "nimctl local")
    with pytest.raises(statedir.StateDirBusy) as busy:
        statedir.claim(tmp_path / ".nimctl", "nimctl localcluster")
    assert str(busy.value).startswith(
        f"nimctl localcluster: {tmp_path / '.nimctl'} is in use by nimctl local (pid "
    )
    first.close()
    statedir.claim(tmp_path / ".nimctl", "nimctl localcluster").close()  # free again


def _nimctl(*args: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nimctl", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_second_process_in_the_same_directory_is_refused(tmp_path: Path) -> None:
    first = _nimctl("localcluster", "--no-simulator", cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / ".nimctl" / "kubeconfig").exists():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first localcluster never started"
            time.sleep(0.1)
        second = _nimctl("localcluster", "--no-simulator", cwd=tmp_path)
        _out, err = second.communicate(timeout=60)
        assert second.returncode == 1
        assert err.strip().splitlines() == [
            f"nimctl localcluster: {tmp_path / '.nimctl'} is in use by nimctl localcluster "
            f"(pid {first.pid}); stop it first, or run this one from another directory or "
            "with --kubeconfig pointing into another directory"
        ]
    finally:
        first.terminate()
        first.communicate(timeout=30)


def test_a_busy_port_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        proc = _nimctl("localcluster", "--no-simulator", "--port", str(port), cwd=tmp_path)
        _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nimctl localcluster: cannot start: ")
    assert "address already in use" in lines[0]


def test_second_nimctl_local_in_the_same_directory_is_refused(tmp_path: Path) -> None:
    first = _nimctl("local", "--disable-webhooks", cwd=tmp_path)
    try:
        deadline = time.monotonic() + 90
        while not (tmp_path / ".nimctl" / "kubeconfig").exists():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first nimctl local never started"
            time.sleep(0.1)
        second = _nimctl("local", "--disable-webhooks", cwd=tmp_path)
        _out, err = second.communicate(timeout=60)
        assert second.returncode == 1
        assert err.strip().splitlines() == [
            f"nimctl local: {tmp_path / '.nimctl'} is in use by nimctl local (pid {first.pid}); "
            "stop it first, or run this one from another directory or with --kubeconfig "
            "pointing into another directory"
        ]
        assert first.poll() is None  # the first one is unharmed
    finally:
        first.terminate()
        first.communicate(timeout=30)
