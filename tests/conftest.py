"""Shared fixtures: a fresh LocalCluster per test and a kubectl runner bound to it."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    """A LocalCluster without the simulator: objects are stored, nothing reconciles them."""
    async with LocalCluster(simulator=False, bookmark_interval=0.5) as c:
        yield c


@dataclass
class KubectlResult:
    returncode: int
    stdout: str
    stderr: str


class Kubectl:
    """Runs the kubectl binary against one cluster (its own HOME, so no discovery cache leaks)."""

    def __init__(self, binary: str, kubeconfig: Path, home: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.env = dict(os.environ, KUBECONFIG=str(kubeconfig), HOME=str(home))
        self.env.pop("KUBECTL_EXTERNAL_DIFF", None)

    async def run(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> KubectlResult:
        proc = await asyncio.create_subprocess_exec(
            self.binary,
            *args,
            env=self.env,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(
                proc.communicate(input.encode() if input is not None else None), timeout
            )
        except TimeoutError:
            proc.kill()
            await proc.wait()
            raise
        result = KubectlResult(proc.returncode or 0, out.decode(), err.decode())
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n{result.stderr}"
            )
        return result


@pytest.fixture
def kubectl_binary() -> str:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip(
            "kubectl is not installed (install kubectl v1.32, or Debian's kubernetes-client)"
        )
    return binary


@pytest.fixture
async def kubectl(cluster: LocalCluster, kubectl_binary: str, tmp_path: Path) -> Kubectl:
    """kubectl bound to the ``cluster`` fixture; skips when kubectl is missing."""
    home = tmp_path / "home"
    home.mkdir()
    return Kubectl(kubectl_binary, cluster.kubeconfig_path, home)


# The modules that take longest on two cores (a loaded CI run, issue 28), longest first.
# Their tests start first, dealt in turn to the xdist workers: worksteal hands each
# worker a contiguous chunk of the collection and later steals from the chunks' ends,
# so each worker begins with its share of the slow tests and the run ends on short
# ones, instead of one worker left alone with a minute-long test.
SLOW_FIRST = (
    "tests/integration/chart/test_each_rule_is_needed.py",
    "tests/integration/gpu_upgrade/test_upgrade_rollout.py",
    "tests/integration/runtime_controller/test_fencing.py",
    "tests/integration/runtime_controller/test_slow_server.py",
    "tests/integration/gpu_nvidiadriver/test_upgrade.py",
    "tests/integration/gpu_nvidiadriver/test_pools.py",
    "tests/e2e/gpu_upgrade/test_driver_upgrade_kubectl.py",
    "tests/e2e/gpu_nvidiadriver/test_nvidiadriver_kubectl.py",
    "tests/integration/chart/test_crd_hook.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}

    def module(item: pytest.Item) -> str:
        return item.nodeid.split("::")[0]

    slow = sorted((i for i in items if module(i) in rank), key=lambda i: rank[module(i)])
    rest = [i for i in items if module(i) not in rank]
    shares: list[list[pytest.Item]] = [[] for _ in range(workers)]
    for n, item in enumerate(slow):
        shares[n % workers].append(item)
    # The chunks worksteal's first distribution cuts: len(pending) // nodes_remaining each.
    ordered: list[pytest.Item] = []
    remaining = len(items)
    rest_at = 0
    for n, share in enumerate(shares):
        size = remaining // (workers - n)
        remaining -= size
        fill = max(size - len(share), 0)
        ordered += share + rest[rest_at : rest_at + fill]
        rest_at += fill
    ordered += rest[rest_at:]
    items[:] = ordered
