"""The shared kubectl scenario (``scenario.STEPS``) on localcluster: every step prints what
kubectl prints against kube-apiserver. The k3s parity test runs the same steps on k3s."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster
from tests.e2e.kubectl.scenario import STEPS, run_step

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


@pytest.fixture
async def sim_cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(bookmark_interval=0.5) as c:
        yield c


async def test_scenario_prints_what_kube_apiserver_prints(
    sim_cluster: LocalCluster, kubectl_binary: str, tmp_path: Path
) -> None:
    env = dict(os.environ, KUBECONFIG=str(sim_cluster.kubeconfig_path), HOME=str(tmp_path))

    def run(args: tuple[str, ...], stdin: str | None) -> tuple[int, str, str]:
        res = subprocess.run(
            [kubectl_binary, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=150,
            check=False,
        )
        return res.returncode, res.stdout, res.stderr

    for step in STEPS:
        code, printed = await asyncio.to_thread(run_step, step, run)
        assert (code, printed) == (step.code, step.expect), step.name
