"""The operator against a separate cluster: ``nimctl localcluster``, ``nimctl crds | kubectl apply``, ``nimctl run``."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.journeys.harness import (
    Kubectl,
    NimctlProcess,
    example,
    kubectl_binary,
    nimctl_argv,
    subprocess_env,
)

pytestmark = pytest.mark.kubectl

NAME = "meta-llama-3-2-1b-instruct"


def test_crds_then_run_reconciles_the_minimal_example(tmp_path: Path) -> None:
    binary = kubectl_binary()
    kubeconfig = tmp_path / "kubeconfig"
    cluster = NimctlProcess(tmp_path / "cluster", "localcluster", "--kubeconfig", str(kubeconfig))
    operator: NimctlProcess | None = None
    try:
        cluster.wait_for_output("kubeconfig written to", 60)
        kubectl = Kubectl(binary, kubeconfig, cluster.home)
        crds = subprocess.run(
            nimctl_argv("crds"),
            capture_output=True,
            text=True,
            env=subprocess_env(cluster.home),
            timeout=90,
            check=False,
        )
        assert crds.returncode == 0, crds.stderr
        applied = kubectl.run("apply", "--server-side", "-f", "-", input=crds.stdout).stdout
        assert "nimservices.apps.nvidia.com serverside-applied" in applied
        kubectl.run(
            "wait",
            "crd/nimservices.apps.nvidia.com",
            "--for=condition=Established",
            "--timeout=30s",
        )

        operator = NimctlProcess(
            tmp_path / "operator",
            "--log-level",
            "warning",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--metrics-bind-address",
            "0",
            "--health-probe-bind-address",
            "0",
        )
        kubectl.ngc_namespace("nim-service")
        kubectl.run("apply", "-f", "-", input=example("nim-minimal.yaml", "nim-service"))
        kubectl.run(
            "wait",
            f"nimservice/{NAME}",
            "-n",
            "nim-service",
            "--for=jsonpath={.status.state}=Ready",
            "--timeout=90s",
            timeout=105,
        )
        assert kubectl.jsonpath("nimcache", NAME, "-n", "nim-service", path="{.status.state}") == (
            "Ready"
        )
    finally:
        operator_code = operator.interrupt() if operator is not None else 0
        cluster_code = cluster.interrupt()
    assert operator is not None
    assert operator_code == 0, operator.stderr[-3000:]
    assert cluster_code == 0, cluster.stderr[-3000:]
    assert "Traceback" not in operator.stderr + cluster.stderr
