"""Deleting a namespace: Terminating, pods first, then the rest, and creates refused meanwhile."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes_asyncio import client as k8s

from localcluster.cluster import LocalCluster
from localcluster.errors import StatusError
from localcluster.extensions import extensions_of

NS = "nim"


async def _until(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    async with asyncio.timeout(timeout):
        while True:
            value = check()
            if value:
                return value
            await asyncio.sleep(0.02)


def _deployment() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": NS},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
            },
        },
    }


async def test_namespace_terminates_pods_first_and_refuses_new_content(
    cluster: LocalCluster,
) -> None:
    store = cluster.storage
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    store.create(_deployment())
    held = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "held", "namespace": NS, "finalizers": ["example.com/hold"]},
    }
    store.create(held)
    await _until(lambda: len(store.list("v1", "Pod", NS)) == 2)
    deleted_order: list[str] = []

    def record(event: Any) -> None:
        if event.type == "DELETED" and event.namespace == NS and event.resource != "events":
            deleted_order.append(event.resource)

    unsubscribe = store.subscribe(record)
    try:
        store.delete("v1", "Namespace", NS)
        ns = store.get("v1", "Namespace", NS)
        assert ns["status"]["phase"] == "Terminating"
        with pytest.raises(StatusError) as refused:
            store.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": "late", "namespace": NS},
                }
            )
        assert refused.value.code == 403
        assert refused.value.message == (
            'configmaps "late" is forbidden: unable to create new content in namespace nim '
            "because it is being terminated"
        )
        assert refused.value.details is not None
        assert refused.value.details["causes"] == [
            {
                "reason": "NamespaceTerminating",
                "message": "namespace nim is being terminated",
                "field": "metadata.namespace",
            }
        ]

        def condition(type_: str) -> str:
            conds = store.get("v1", "Namespace", NS)["status"].get("conditions") or []
            return next((c["message"] for c in conds if c["type"] == type_), "")

        # the pods terminate gracefully first, then the rest goes; the held one stays
        await _until(
            lambda: condition("NamespaceContentRemaining")
            == "Some resources are remaining: configmaps. has 1 resource instances"
        )
        assert condition("NamespaceFinalizersRemaining") == (
            "Some content in the namespace has finalizers remaining: example.com/hold in 1 "
            "resource instances"
        )
        assert deleted_order[:2] == ["pods", "pods"]  # the pods went before anything else
        assert "deployments" in deleted_order and "replicasets" in deleted_order
        cm = store.get("v1", "ConfigMap", "held", NS)
        cm["metadata"]["finalizers"] = []
        store.update(cm)
        await _until(
            lambda: not [n for n in store.list("v1", "Namespace") if n["metadata"]["name"] == NS]
        )
    finally:
        unsubscribe()


async def test_pvc_protection_keeps_a_claim_while_a_pod_uses_it(
    cluster: LocalCluster, api: k8s.ApiClient
) -> None:
    store = cluster.storage
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "cache", "namespace": "default"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    created = await k8s.CoreV1Api(api).create_namespaced_persistent_volume_claim("default", claim)
    assert created.metadata.finalizers == ["kubernetes.io/pvc-protection"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "user", "namespace": "default"},
        "spec": {
            "containers": [{"name": "c", "image": "nginx:1.27"}],
            "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "cache"}}],
        },
    }
    store.create(pod)
    await _until(lambda: store.get("v1", "Pod", "user", "default")["status"]["phase"] == "Running")
    store.delete("v1", "PersistentVolumeClaim", "cache", "default")
    simulator = extensions_of(cluster).simulator
    assert simulator is not None
    assert await simulator.wait_idle(), "the simulator handled the claim's deletion"
    held = store.get("v1", "PersistentVolumeClaim", "cache", "default")
    assert held["metadata"]["deletionTimestamp"]  # Terminating while the pod runs
    store.delete("v1", "Pod", "user", "default")
    await _until(lambda: not store.list("v1", "PersistentVolumeClaim", "default"))
