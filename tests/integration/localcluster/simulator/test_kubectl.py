"""What a kubectl user sees of the simulated cluster: rollouts, job completion, logs."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess

import pytest

from localcluster.cluster import LocalCluster
from localcluster.extensions import Extensions

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


async def kubectl(cluster: LocalCluster, *args: str, stdin: str | None = None) -> tuple[int, str]:
    def run() -> tuple[int, str]:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(cluster.kubeconfig_path), *args],
            capture_output=True,
            text=True,
            timeout=60,
            input=stdin,
            check=False,
        )
        return done.returncode, done.stdout + done.stderr

    return await asyncio.to_thread(run)


async def test_kubectl_rollout_status_wait_and_logs(cluster: LocalCluster, ext: Extensions) -> None:
    ext.catalog.set("example.com/report:*", logs="42 rows exported\n", exit_code=0, run_seconds=0.2)
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1"}]},
            },
        },
    }
    code, out = await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(deploy))
    assert code == 0, out
    code, out = await kubectl(cluster, "rollout", "status", "deployment/web", "--timeout=30s")
    assert code == 0 and 'deployment "web" successfully rolled out' in out, out
    deploy["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:2"
    await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(deploy))
    code, out = await kubectl(cluster, "rollout", "status", "deployment/web", "--timeout=30s")
    assert code == 0 and 'deployment "web" successfully rolled out' in out, out
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "report", "namespace": "default"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "example.com/report:3"}],
                }
            }
        },
    }
    await kubectl(cluster, "apply", "-f", "-", stdin=json.dumps(job))
    code, out = await kubectl(
        cluster, "wait", "--for=condition=complete", "job/report", "--timeout=30s"
    )
    assert code == 0, out
    code, out = await kubectl(cluster, "logs", "job/report")
    assert (code, out) == (0, "42 rows exported\n")
