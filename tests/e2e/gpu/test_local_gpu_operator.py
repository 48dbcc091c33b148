"""e2e: ``nimctl local --gpu-operator`` driven as a user would, then looked at with kubectl.

The GPU nodes start bare; NVIDIA's sample ClusterPolicy brings them up; the demo
NIMService reaches Ready on the GPUs they now advertise. kubectl shows the
ClusterPolicy's STATUS and AGE columns and the GPU product of every GPU node.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

KUBECTL = "/usr/bin/kubectl"

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed"),
]


def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_local_gpu_operator_brings_gpus_up_and_runs_the_nim(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nimctl",
            "--log-level",
            "warning",
            "local",
            "--gpu-operator",
            "--disable-webhooks",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={
            **os.environ,
            "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
            "HOME": str(tmp_path),
        },
    )
    kubeconfig = tmp_path / ".nimctl" / "kubeconfig"
    try:
        deadline = time.monotonic() + 150
        nim_state = policy_state = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"nimctl local exited early: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            if kubeconfig.is_file():
                policy_state = _kubectl(
                    kubeconfig,
                    "get",
                    "clusterpolicy",
                    "cluster-policy",
                    "-o",
                    "jsonpath={.status.state}",
                ).stdout.strip()
                nim_state = _kubectl(
                    kubeconfig,
                    "-n",
                    "nim-demo",
                    "get",
                    "nimservice",
                    "-o",
                    "jsonpath={.items[0].status.state}",
                ).stdout.strip()
                if policy_state == "ready" and nim_state == "Ready":
                    break
            time.sleep(1)
        assert (policy_state, nim_state) == ("ready", "Ready")

        table = _kubectl(kubeconfig, "get", "clusterpolicy")
        assert table.returncode == 0, table.stderr
        header, row = table.stdout.splitlines()[:2]
        assert header.split() == ["NAME", "STATUS", "AGE"]
        assert row.split()[:2] == ["cluster-policy", "ready"]

        nodes = _kubectl(kubeconfig, "get", "nodes", "-L", "nvidia.com/gpu.product")
        assert nodes.returncode == 0, nodes.stderr
        lines = nodes.stdout.splitlines()
        assert lines[0].split()[-1] == "GPU.PRODUCT"
        products = {line.split()[0]: line.split()[-1] for line in lines[1:]}
        assert products["gpu-node-0"] == "NVIDIA-H100-80GB-HBM3"
        assert products["gpu-node-1"] == "NVIDIA-H100-80GB-HBM3"

        gpus = _kubectl(
            kubeconfig,
            "get",
            "node",
            "gpu-node-0",
            "-o",
            "jsonpath={.status.allocatable.nvidia\\.com/gpu}",
        )
        assert gpus.stdout.strip() == "8"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
