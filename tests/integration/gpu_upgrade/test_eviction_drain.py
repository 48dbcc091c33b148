"""localcluster's eviction subresource, PodDisruptionBudget status and kubectl cordon/drain."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from typing import Any

import pytest

from localcluster.cluster import LocalCluster
from nimctl_runtime.client import Client
from nimctl_runtime.client.errors import ApiError
from tests.integration.controllers.harness import wait_for

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster() as c:
        yield c


@pytest.fixture
async def admin(cluster: LocalCluster) -> AsyncIterator[Client]:
    async with Client(str(cluster.kubeconfig_path)) as c:
        yield c


def deployment(name: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "nginx:1"}]},
            },
        },
    }


def pdb(name: str, min_available: int | str) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": name}}},
    }


async def ready_pods(admin: Client, app: str, count: int) -> list[dict[str, Any]]:
    async def check() -> list[dict[str, Any]] | None:
        items = (await admin.list("v1", "Pod", "default", label_selector=f"app={app}"))["items"]
        ready = [
            p
            for p in items
            if not p["metadata"].get("deletionTimestamp")
            and any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
        ]
        return ready if len(ready) == count else None

    result: list[dict[str, Any]] = await wait_for(check, timeout=30, interval=0.1)
    return result


async def pdb_status(admin: Client, name: str, allowed: int) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        status = (await admin.get("policy/v1", "PodDisruptionBudget", name, "default")).get(
            "status"
        ) or {}
        return status if status.get("disruptionsAllowed") == allowed else None

    result: dict[str, Any] = await wait_for(check, timeout=30, interval=0.1)
    return result


async def evict(admin: Client, name: str) -> Any:
    body = {"apiVersion": "policy/v1", "kind": "Eviction",
            "metadata": {"name": name, "namespace": "default"}}  # fmt: skip
    return await admin.request(
        "POST", f"/api/v1/namespaces/default/pods/{name}/eviction", body=body, retries=0
    )


async def test_pdb_status_and_eviction(admin: Client) -> None:
    await admin.create(deployment("web", 2))
    await admin.create(pdb("web", 2))
    pods = await ready_pods(admin, "web", 2)
    status = await pdb_status(admin, "web", 0)
    assert (status["currentHealthy"], status["desiredHealthy"], status["expectedPods"]) == (2, 2, 2)
    assert status["conditions"][0]["reason"] == "InsufficientPods"

    victim = pods[0]["metadata"]["name"]
    with pytest.raises(ApiError) as info:
        await evict(admin, victim)
    assert info.value.status == 429
    assert "Cannot evict pod as it would violate the pod's disruption budget." in str(info.value)
    assert (await admin.get("v1", "Pod", victim, "default"))["metadata"]["name"] == victim

    await admin.patch("policy/v1", "PodDisruptionBudget", "web", {"spec": {"minAvailable": 1}},
                      namespace="default")  # fmt: skip
    await pdb_status(admin, "web", 1)
    answer = await evict(admin, victim)
    assert answer["status"] == "Success" and answer["code"] == 201
    second = pods[1]["metadata"]["name"]
    with pytest.raises(ApiError) as info:
        await evict(admin, second)  # the one allowed disruption is used up
    assert info.value.status == 429
    await ready_pods(admin, "web", 2)  # the Deployment replaced the evicted pod


async def test_eviction_without_a_pdb_deletes_and_bad_names_are_refused(admin: Client) -> None:
    await admin.create(deployment("solo", 1))
    pod = (await ready_pods(admin, "solo", 1))[0]["metadata"]["name"]
    with pytest.raises(ApiError) as info:
        await admin.request(
            "POST", f"/api/v1/namespaces/default/pods/{pod}/eviction",
            body={"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}},
            retries=0,
        )  # fmt: skip
    assert info.value.status == 400
    assert "name in URL does not match name in Eviction object" in str(info.value)
    await evict(admin, pod)

    async def gone() -> bool:
        names = [p["metadata"]["name"] for p in (await admin.list("v1", "Pod", "default"))["items"]]
        return pod not in names

    await wait_for(gone, timeout=30, interval=0.1)


def run_kubectl(cluster: LocalCluster, *args: str) -> tuple[int, str]:
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(cluster.kubeconfig_path), *args],
        capture_output=True, text=True, timeout=90, check=False,
    )  # fmt: skip
    return done.returncode, done.stdout + done.stderr


async def kubectl(cluster: LocalCluster, *args: str) -> tuple[int, str]:
    return await asyncio.to_thread(run_kubectl, cluster, *args)


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_kubectl_cordon_and_drain(cluster: LocalCluster, admin: Client) -> None:
    await admin.create(deployment("web", 2))
    pods = await ready_pods(admin, "web", 2)
    node = pods[0]["spec"]["nodeName"]
    code, out = await kubectl(cluster, "cordon", node)
    assert code == 0 and f"node/{node} cordoned" in out, out
    code, out = await kubectl(cluster, "get", "node", node, "-o", "json")
    assert json.loads(out)["spec"]["unschedulable"] is True

    await admin.create(pdb("web", 2))
    await pdb_status(admin, "web", 0)
    code, out = await kubectl(cluster, "drain", node, "--ignore-daemonsets", "--timeout=3s")
    assert code != 0, out
    assert "Cannot evict pod as it would violate the pod's disruption budget." in out, out

    await admin.patch("policy/v1", "PodDisruptionBudget", "web", {"spec": {"minAvailable": 1}},
                      namespace="default")  # fmt: skip
    await pdb_status(admin, "web", 1)
    code, out = await kubectl(
        cluster, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=60s"
    )
    assert code == 0, out
    assert f"node/{node} drained" in out, out
    after = await ready_pods(admin, "web", 2)
    assert all(p["spec"]["nodeName"] != node for p in after), (
        "the scheduler skips the cordoned node"
    )
    code, out = await kubectl(cluster, "uncordon", node)
    assert code == 0 and f"node/{node} uncordoned" in out, out
