"""One ``nimctl local --enable-webhooks`` for the journeys in this package, and kubectl bound to it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.journeys.harness import READY_LINE, Kubectl, NimctlProcess, kubectl_binary

STARTUP_TIMEOUT = 100


@pytest.fixture(scope="package")
def local_nimctl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NimctlProcess]:
    """``nimctl local`` with webhooks, as a user starts it in a fresh directory."""
    kubectl_binary()
    workdir = tmp_path_factory.mktemp("nimctl-local")
    proc = NimctlProcess(
        workdir,
        "--log-level",
        "warning",
        "local",
        "--enable-webhooks",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
    )
    try:
        proc.wait_for_output(READY_LINE, STARTUP_TIMEOUT)
        yield proc
    finally:
        proc.interrupt()
        proc.kill()


@pytest.fixture
def kubectl(local_nimctl: NimctlProcess, tmp_path: Path) -> Kubectl:
    home = tmp_path / "kubectl-home"
    home.mkdir()
    return Kubectl(kubectl_binary(), local_nimctl.workdir / ".nimctl" / "kubeconfig", home)
