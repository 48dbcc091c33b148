"""e2e: ``nimctl local --demo`` on a fresh directory reaches Ready and says how to look around."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

KUBECTL = "/usr/bin/kubectl"


def _nimctl(
    *args: str, cwd: Path, log_flags: tuple[str, ...] = ("--log-level", "warning")
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "nimctl", *log_flags, *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )


def _log_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.lstrip().startswith('{"')]


def test_local_demo_reaches_ready_and_prints_kubectl_commands(tmp_path: Path) -> None:
    """Without log flags the terminal shows the banner and tables only; the log is a file."""
    proc = _nimctl("local", "--demo", "--exit-when-ready", cwd=tmp_path, log_flags=())
    try:
        out, err = proc.communicate(timeout=100)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        pytest.fail(f"demo did not reach Ready in time\nstdout:\n{out}\nstderr:\n{err[-3000:]}")
    assert proc.returncode == 0, err[-3000:]
    kubeconfig = tmp_path / ".nimctl" / "kubeconfig"
    assert kubeconfig.is_file()
    assert f"export KUBECONFIG={kubeconfig}" in out
    assert "kubectl get nimcaches,nimservices -A" in out
    assert "Demo ready" in out
    assert "NIMService" in out and "Ready" in out
    assert not _log_lines(out), "operator log lines on the terminal"
    assert not _log_lines(err), "operator log lines on the terminal"
    log = tmp_path / ".nimctl" / "operator.log"
    assert f"Operator log: {log}" in out
    lines = _log_lines(log.read_text())
    assert lines and all(json.loads(line)["level"] for line in lines)
    assert any('"component"' in line for line in lines)


@pytest.mark.kubectl
@pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")
def test_kubectl_sees_the_demo_and_ctrl_c_stops_cleanly(tmp_path: Path) -> None:
    proc = _nimctl("local", "--demo", cwd=tmp_path)
    kubeconfig = tmp_path / ".nimctl" / "kubeconfig"
    try:
        deadline = time.monotonic() + 90
        state = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"nimctl local exited early: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            if kubeconfig.is_file():
                res = subprocess.run(
                    [
                        KUBECTL,
                        "--kubeconfig",
                        str(kubeconfig),
                        "-n",
                        "nim-demo",
                        "get",
                        "nimservice",
                        "-o",
                        "jsonpath={.items[0].status.state}",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=20,
                    check=False,
                )
                state = res.stdout.strip()
                if state == "Ready":
                    break
            time.sleep(1)
        assert state == "Ready"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            pytest.fail("nimctl local did not stop on Ctrl-C")
    assert proc.returncode in (0, 130)
