"""ServiceAccounts on localcluster as on a real cluster: every namespace has ``default``, and a
pod naming a ServiceAccount that does not exist is refused (a Deployment's ReplicaSet says so
in a FailedCreate Event, and creates its pods once the ServiceAccount exists)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster
from tests.conftest import Kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


@pytest.fixture
async def sim_cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(bookmark_interval=0.5) as c:
        yield c


@pytest.fixture
def kc(sim_cluster: LocalCluster, kubectl_binary: str, tmp_path: Path) -> Kubectl:
    home = tmp_path / "home"
    home.mkdir()
    return Kubectl(kubectl_binary, sim_cluster.kubeconfig_path, home)


POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "llm"},
    "spec": {"serviceAccountName": "nim", "containers": [{"name": "c", "image": "nginx:1.27"}]},
}


async def _until(check: Callable[[], Awaitable[bool]], timeout: float = 30.0) -> None:
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(0.2)


async def test_new_namespaces_have_a_default_service_account(kc: Kubectl) -> None:
    await kc.run("create", "namespace", "nim")

    async def has_default() -> bool:
        out = await kc.run("get", "serviceaccount", "default", "-n", "nim", check=False)
        return out.returncode == 0

    await _until(has_default)
    token = await kc.run("create", "token", "default", "-n", "nim")
    assert token.stdout.count(".") == 2
    await kc.run("run", "shell", "--image=busybox", "-n", "nim", "--", "sleep", "3600")
    pod = json.loads((await kc.run("get", "pod", "shell", "-n", "nim", "-o", "json")).stdout)
    assert pod["spec"]["serviceAccountName"] == "default"  # set on admission when none is named


async def test_a_pod_naming_a_missing_service_account_is_refused(kc: Kubectl) -> None:
    out = await kc.run("apply", "-f", "-", input=json.dumps(POD), check=False)
    assert out.returncode == 1
    assert (
        'pods "llm" is forbidden: error looking up service account default/nim: '
        'serviceaccount "nim" not found'
    ) in out.stderr
    await kc.run("create", "deployment", "llm", "--image=nginx:1.27", "--replicas=1")
    await kc.run(
        "patch",
        "deployment",
        "llm",
        "--type=merge",
        "-p",
        '{"spec":{"template":{"spec":{"serviceAccountName":"nim"}}}}',
    )

    async def failed_create() -> bool:
        events = json.loads((await kc.run("get", "events", "-o", "json")).stdout)["items"]
        return any(
            e["reason"] == "FailedCreate"
            and 'error looking up service account default/nim: serviceaccount "nim" not found'
            in e["message"]
            for e in events
        )

    await _until(failed_create)
    await kc.run("create", "serviceaccount", "nim")
    rollout = await kc.run("rollout", "status", "deployment/llm", "--timeout=60s")
    assert 'deployment "llm" successfully rolled out' in rollout.stdout
