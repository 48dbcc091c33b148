"""The ``nimctl local`` process the GPU e2e tests drive, and kubectl against it.

``nimctl_local(tmp_path, *flags)`` starts ``python -m nimctl local`` with the
flags (webhooks off, logs at warning) in ``tmp_path`` as ``HOME``, yields the
process and the kubeconfig path it will write, and stops it with SIGINT as a
user's Ctrl-C would (kill after 30 s).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

KUBECTL = "/usr/bin/kubectl"
REPO = Path(__file__).resolve().parents[3]

#: every test module of the folder: kubectl-driven, skipped where kubectl is missing
MARKS = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed"),
]


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


@contextmanager
def nimctl_local(
    tmp_path: Path, *flags: str
) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nimctl", "--log-level", "warning", "local", *flags,
         "--disable-webhooks"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "HOME": str(tmp_path)},
    )  # fmt: skip
    try:
        yield proc, tmp_path / ".nimctl" / "kubeconfig"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
