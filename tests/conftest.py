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
# They start first, so pytest-xdist's work stealing fills the end of the run with short
# tests instead of leaving one worker alone with a minute-long test. A module moves as a
# whole: its tests keep their order and module-scoped fixtures their one set-up.
SLOW_FIRST = (
    "tests/integration/chart/test_each_rule_is_needed.py",
    "tests/integration/gpu_upgrade/test_upgrade_rollout.py",
    "tests/integration/runtime_controller/test_fencing.py",
    "tests/integration/runtime_controller/test_slow_server.py",
    "tests/integration/gpu_nvidiadriver/test_upgrade.py",
    "tests/integration/gpu_nvidiadriver/test_pools.py",
    "tests/integration/gpu/test_clusterpolicy.py",
    "tests/integration/controllers/test_why_not_ready.py",
    "tests/integration/fuzz/test_fuzz.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(SLOW_FIRST)))
