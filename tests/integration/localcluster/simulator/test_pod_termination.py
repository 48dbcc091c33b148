"""Deleting a pod is graceful: Terminating with a grace period, then gone once its containers stop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kubernetes_asyncio import client as k8s

from localcluster.cluster import LocalCluster


async def _until(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    async with asyncio.timeout(timeout):
        while True:
            value = check()
            if value:
                return value
            await asyncio.sleep(0.02)


def _pod(name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "nim", "image": "nginx:1.27", **spec.pop("container", {})}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [container], **spec},
    }


def _gone(cluster: LocalCluster, name: str) -> bool:
    return not [
        p for p in cluster.storage.list("v1", "Pod", "default") if p["metadata"]["name"] == name
    ]


async def test_a_running_pod_terminates_gracefully(
    cluster: LocalCluster, api: k8s.ApiClient
) -> None:
    store = cluster.storage
    core = k8s.CoreV1Api(api)
    store.create(
        _pod(
            "llm",
            terminationGracePeriodSeconds=45,
            container={"lifecycle": {"preStop": {"exec": {"command": ["sleep", "1"]}}}},
        )
    )
    await _until(lambda: store.get("v1", "Pod", "llm", "default")["status"]["phase"] == "Running")
    deleted = await core.delete_namespaced_pod("llm", "default")
    assert deleted.metadata.deletion_grace_period_seconds == 45
    assert deleted.metadata.deletion_timestamp is not None  # Terminating, still there
    assert not _gone(cluster, "llm")
    await _until(lambda: _gone(cluster, "llm"))
    events = [(e["reason"], e["message"]) for e in store.list("v1", "Event", "default")]
    assert ("Killing", "Stopping container nim") in events


async def test_grace_period_zero_and_unbound_pods_go_at_once(
    cluster: LocalCluster, api: k8s.ApiClient
) -> None:
    store = cluster.storage
    core = k8s.CoreV1Api(api)
    store.create(_pod("forced"))
    await _until(
        lambda: store.get("v1", "Pod", "forced", "default")["status"]["phase"] == "Running"
    )
    await core.delete_namespaced_pod("forced", "default", grace_period_seconds=0)
    assert _gone(cluster, "forced")
    store.create(_pod("unschedulable", nodeSelector={"no-such": "node"}))
    await core.delete_namespaced_pod("unschedulable", "default")  # no kubelet runs it
    assert _gone(cluster, "unschedulable")
