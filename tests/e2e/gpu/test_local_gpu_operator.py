"""e2e: ``nimctl local --gpu-operator`` driven as a user would, then looked at with kubectl.

The GPU nodes start bare; NVIDIA's sample ClusterPolicy brings them up; the demo
NIMService reaches Ready on the GPUs they now advertise. kubectl shows the
ClusterPolicy's STATUS and AGE columns and the GPU product of every GPU node.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .local import MARKS, kubectl, nimctl_local

pytestmark = MARKS


def test_local_gpu_operator_brings_gpus_up_and_runs_the_nim(tmp_path: Path) -> None:
    with nimctl_local(tmp_path, "--gpu-operator") as (proc, kubeconfig):
        deadline = time.monotonic() + 150
        nim_state = policy_state = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"nimctl local exited early: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            if kubeconfig.is_file():
                policy_state = kubectl(
                    kubeconfig,
                    "get",
                    "clusterpolicy",
                    "cluster-policy",
                    "-o",
                    "jsonpath={.status.state}",
                ).stdout.strip()
                nim_state = kubectl(
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

        table = kubectl(kubeconfig, "get", "clusterpolicy")
        assert table.returncode == 0, table.stderr
        header, row = table.stdout.splitlines()[:2]
        assert header.split() == ["NAME", "STATUS", "AGE"]
        assert row.split()[:2] == ["cluster-policy", "ready"]

        nodes = kubectl(kubeconfig, "get", "nodes", "-L", "nvidia.com/gpu.product")
        assert nodes.returncode == 0, nodes.stderr
        lines = nodes.stdout.splitlines()
        assert lines[0].split()[-1] == "GPU.PRODUCT"
        products = {line.split()[0]: line.split()[-1] for line in lines[1:]}
        assert products["gpu-node-0"] == "NVIDIA-H100-80GB-HBM3"
        assert products["gpu-node-1"] == "NVIDIA-H100-80GB-HBM3"

        gpus = kubectl(
            kubeconfig,
            "get",
            "node",
            "gpu-node-0",
            "-o",
            "jsonpath={.status.allocatable.nvidia\\.com/gpu}",
        )
        assert gpus.stdout.strip() == "8"
