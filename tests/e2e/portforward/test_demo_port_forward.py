"""``nimctl local --demo`` ends with the two lines a NIM user runs next; run as printed
(only the local port is left to kubectl, so a busy 8000 on the test machine cannot
fail it), they answer with the demo's model."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


def _read_until(proc: subprocess.Popen[str], pattern: str, deadline: float) -> list[str]:
    assert proc.stdout is not None
    lines: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if re.search(pattern, line):
            return lines
    pytest.fail(f"no line matching {pattern!r} in:\n{''.join(lines)}")


def test_the_demos_last_lines_reach_the_nim(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[3]
    demo = subprocess.Popen(
        [sys.executable, "-m", "nimctl", "--log-level", "warning", "local", "--demo"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    forward: subprocess.Popen[str] | None = None
    try:
        lines = _read_until(demo, r"^\s+curl ", time.monotonic() + 120)
        tail = [line.strip() for line in lines[-2:]]
        assert tail[0] == (
            "kubectl -n nim-demo port-forward service/meta-llama-3-1-8b-instruct 8000:8000"
        )
        assert tail[1] == "curl -s http://localhost:8000/v1/models"
        env = {**os.environ, "KUBECONFIG": str(tmp_path / ".nimctl" / "kubeconfig")}
        forward = subprocess.Popen(
            tail[0].replace(" 8000:8000", " :8000").split(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        first = _read_until(forward, r"Forwarding from", time.monotonic() + 30)[-1]
        port = re.findall(r"127\.0\.0\.1:(\d+)", first)[0]
        url = tail[1].split()[-1].replace("localhost:8000", f"127.0.0.1:{port}")
        with urllib.request.urlopen(url, timeout=10) as resp:
            models = json.loads(resp.read())
        assert [m["id"] for m in models["data"]] == ["meta/llama-3.1-8b-instruct"]
    finally:
        if forward is not None:
            forward.terminate()
            forward.communicate(timeout=20)
        demo.send_signal(signal.SIGINT)
        demo.communicate(timeout=30)
    assert demo.returncode == 0
