"""e2e: ``nimctl local --gpu-cluster`` driven as a user would, then looked at with kubectl.

GPU nodes with a host driver; NVIDIA's sample GPUCluster brings up the DRA stack
and the nodes publish their GPUs as ResourceSlices; the demo NIMService reaches
Ready on a pod holding an allocated ResourceClaim (no ``nvidia.com/gpu`` is ever
advertised). ``kubectl get gpuclusters``, ``resourceslices`` and
``resourceclaims`` show it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from .local import MARKS, kubectl, nimctl_local

pytestmark = MARKS


def test_local_gpu_cluster_publishes_gpus_and_runs_the_nim_on_a_claim(tmp_path: Path) -> None:
    with nimctl_local(tmp_path, "--gpu-cluster") as (proc, kubeconfig):
        deadline = time.monotonic() + 150
        cluster_state = nim_state = ""
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"nimctl local exited early: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            if kubeconfig.is_file():
                cluster_state = kubectl(
                    kubeconfig, "get", "gc", "gpu-cluster", "-o", "jsonpath={.status.state}"
                ).stdout.strip()
                nim_state = kubectl(
                    kubeconfig, "-n", "nim-demo", "get", "nimservice",
                    "-o", "jsonpath={.items[0].status.state}",
                ).stdout.strip()  # fmt: skip
                if cluster_state == "ready" and nim_state == "Ready":
                    break
            time.sleep(1)
        assert (cluster_state, nim_state) == ("ready", "Ready")

        table = kubectl(kubeconfig, "get", "gpuclusters")
        assert table.returncode == 0, table.stderr
        header, row = table.stdout.splitlines()[:2]
        assert header.split() == ["NAME", "STATUS", "AGE"]
        assert row.split()[:2] == ["gpu-cluster", "ready"]

        slices = kubectl(kubeconfig, "get", "resourceslices")
        assert slices.returncode == 0, slices.stderr
        names = {line.split()[0] for line in slices.stdout.splitlines()[1:]}
        assert {"gpu-node-0-gpu.nvidia.com", "gpu-node-1-gpu.nvidia.com"} <= names

        claims = json.loads(
            kubectl(kubeconfig, "-n", "nim-demo", "get", "resourceclaims", "-o", "json").stdout
        )["items"]
        (claim,) = claims
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == "gpu.nvidia.com" and "adminAccess" not in result
        holder = claim["status"]["reservedFor"][0]["name"]
        pod = json.loads(
            kubectl(kubeconfig, "-n", "nim-demo", "get", "pod", holder, "-o", "json").stdout
        )
        assert pod["status"]["phase"] == "Running"
        assert pod["metadata"]["labels"]["app"] == "meta-llama-3-1-8b-instruct"
        listed = kubectl(kubeconfig, "-n", "nim-demo", "get", "resourceclaims")
        assert claim["metadata"]["name"] in listed.stdout

        gpus = kubectl(
            kubeconfig, "get", "node", "gpu-node-0",
            "-o", "jsonpath={.status.allocatable.nvidia\\.com/gpu}",
        )  # fmt: skip
        assert gpus.stdout.strip() in ("", "0"), "no device plugin: nvidia.com/gpu is not advertised"
