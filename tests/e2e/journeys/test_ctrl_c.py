"""Starting ``nimctl localcluster`` / ``nimctl local`` in a fresh directory and stopping them with Ctrl-C."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.journeys.harness import READY_LINE, Kubectl, NimctlProcess, kubectl_binary, wait_for

pytestmark = pytest.mark.kubectl


def test_localcluster_serves_kubectl_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    binary = kubectl_binary()
    kubeconfig = tmp_path / "kc" / "config"
    proc = NimctlProcess(tmp_path, "localcluster", "--kubeconfig", str(kubeconfig))
    try:
        proc.wait_for_output("kubeconfig written to", 60)
        kubectl = Kubectl(binary, kubeconfig, proc.home)
        nodes = kubectl.run(
            "get", "nodes", "-l", "feature.node.kubernetes.io/pci-10de.present=true"
        )
        assert nodes.stdout.count("Ready") == 2, nodes.stdout
        wait_for(
            lambda: "customresourcedefinitions" in kubectl.run("api-resources").stdout,
            30,
            "api-resources to list CRDs",
        )
        explained = kubectl.run("explain", "deployment.spec.replicas")
        assert "replicas" in explained.stdout
    finally:
        code = proc.interrupt()
    assert code == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout


def test_local_prints_how_to_use_it_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    binary = kubectl_binary()
    proc = NimctlProcess(
        tmp_path,
        "local",
        "--metrics-bind-address",
        "0",
        "--health-probe-bind-address",
        "0",
    )
    try:
        proc.wait_for_output(READY_LINE, 100)
        kubeconfig = tmp_path / ".nimctl" / "kubeconfig"
        assert f"export KUBECONFIG={kubeconfig}" in proc.stdout
        kubectl = Kubectl(binary, kubeconfig, proc.home)
        crds = kubectl.run("get", "crd", "-o", "name").stdout
        assert "nimservices.apps.nvidia.com" in crds and "nimcaches.apps.nvidia.com" in crds
        assert "No resources found" in kubectl.run("get", "nimservices", "-A").stderr
    finally:
        code = proc.interrupt()
    assert code == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr + proc.stdout
