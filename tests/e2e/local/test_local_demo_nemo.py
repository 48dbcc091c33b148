"""e2e: ``nimctl local --demo nemo`` applies NVIDIA's NeMo samples and all five reach Ready."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

KINDS = ("NemoDatastore", "NemoEntitystore", "NemoEvaluator", "NemoGuardrail", "NemoCustomizer")


def test_local_demo_nemo_reaches_ready(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nimctl",
            "--log-level",
            "warning",
            "local",
            "--demo",
            "nemo",
            "--exit-when-ready",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])},
    )
    try:
        out, err = proc.communicate(timeout=100)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        pytest.fail(
            f"NeMo demo did not reach Ready in time\nstdout:\n{out}\nstderr:\n{err[-3000:]}"
        )
    assert proc.returncode == 0, err[-3000:]
    assert "Demo ready: the five NeMo services are Ready." in out
    assert "kubectl -n nemo get nemodatastores" in out
    # Piped, the table prints its header once and then one line per changed row:
    # each kind's last line is its final state.
    for kind in KINDS:
        line = [ln for ln in out.splitlines() if ln.startswith(kind)][-1]
        assert " Ready " in line and "1/1" in line, line
