"""The simulated cluster, driven through kubernetes-asyncio like a user's program would."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client as k8s

from localcluster.extensions import Extensions


async def eventually(check: Callable[[], Awaitable[Any]], timeout: float = 15.0) -> Any:
    """Poll *check* until it returns something truthy (it may raise AssertionError meanwhile)."""
    last: BaseException | None = None
    async with asyncio.timeout(timeout):
        while True:
            try:
                result = await check()
                if result:
                    return result
            except AssertionError as exc:
                last = exc
            await asyncio.sleep(0.05)
    raise AssertionError(last)


def deployment(
    name: str, replicas: int = 3, image: str = "nginx:1.27", **pod: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": image}], **pod},
            },
        },
    }


async def test_deployment_becomes_available_with_kubernetes_status(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    await apps.create_namespaced_deployment("default", deployment("web"))

    async def available() -> Any:
        d = await apps.read_namespaced_deployment("web", "default")
        conds = {c.type: c for c in d.status.conditions or []}
        if (
            "Available" in conds
            and conds["Available"].status == "True"
            and d.status.available_replicas == 3
        ):
            return d
        return None

    d = await eventually(available)
    assert d.status.replicas == 3
    assert d.status.ready_replicas == 3
    assert d.status.updated_replicas == 3
    assert d.status.observed_generation == d.metadata.generation
    conds = {c.type: c for c in d.status.conditions}
    assert conds["Available"].reason == "MinimumReplicasAvailable"
    assert conds["Progressing"].reason == "NewReplicaSetAvailable"
    rs = (await apps.list_namespaced_replica_set("default")).items
    assert len(rs) == 1 and rs[0].metadata.name.startswith("web-")
    pods = (await k8s.CoreV1Api(api).list_namespaced_pod("default", label_selector="app=web")).items
    assert len(pods) == 3
    assert all(p.status.phase == "Running" and p.spec.node_name for p in pods)
    assert all(
        p.metadata.labels["pod-template-hash"] == rs[0].metadata.labels["pod-template-hash"]
        for p in pods
    )


async def test_pod_asking_for_too_many_gpus_stays_pending_unschedulable(api: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(api)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "greedy", "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "cuda:12",
                    "resources": {"limits": {"nvidia.com/gpu": "16"}},
                }
            ]
        },
    }
    await core.create_namespaced_pod("default", pod)

    async def unschedulable() -> Any:
        p = await core.read_namespaced_pod("greedy", "default")
        for c in p.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False":
                return p, c
        return None

    p, cond = await eventually(unschedulable)
    assert p.status.phase == "Pending"
    assert p.spec.node_name is None
    assert cond.reason == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in cond.message
    assert cond.message.startswith("0/3 nodes are available")


async def test_daemonset_with_gpu_node_selector_runs_on_gpu_nodes_only(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "gpu-agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "gpu-agent"}},
            "template": {
                "metadata": {"labels": {"app": "gpu-agent"}},
                "spec": {
                    "nodeSelector": {"feature.node.kubernetes.io/pci-10de.present": "true"},
                    "containers": [
                        {
                            "name": "agent",
                            "image": "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless",
                        }
                    ],
                },
            },
        },
    }
    await apps.create_namespaced_daemon_set("default", ds)

    async def ready() -> Any:
        d = await apps.read_namespaced_daemon_set("gpu-agent", "default")
        s = d.status
        return d if s and s.number_ready == 2 and s.number_available == 2 else None

    d = await eventually(ready)
    s = d.status
    assert (s.desired_number_scheduled, s.current_number_scheduled, s.updated_number_scheduled) == (
        2,
        2,
        2,
    )
    assert s.number_misscheduled == 0 and not s.number_unavailable
    assert s.observed_generation == 1
    pods = (
        await k8s.CoreV1Api(api).list_namespaced_pod("default", label_selector="app=gpu-agent")
    ).items
    assert sorted(p.spec.node_name for p in pods) == ["gpu-node-0", "gpu-node-1"]
    revisions = (await apps.list_namespaced_controller_revision("default")).items
    assert len(revisions) == 1
    hash_ = revisions[0].metadata.labels["controller-revision-hash"]
    assert all(p.metadata.labels["controller-revision-hash"] == hash_ for p in pods)


async def test_daemonset_pod_too_big_for_its_node_says_why_for_every_node(
    api: k8s.ApiClient,
) -> None:
    # A DaemonSet pod is pinned to one node; when it does not fit there, its
    # FailedScheduling message still accounts for every node of the cluster.
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "greedy-agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "greedy-agent"}},
            "template": {
                "metadata": {"labels": {"app": "greedy-agent"}},
                "spec": {
                    "nodeSelector": {"feature.node.kubernetes.io/pci-10de.present": "true"},
                    "containers": [
                        {
                            "name": "agent",
                            "image": "nginx:1.27",
                            "resources": {"limits": {"nvidia.com/gpu": "16"}},
                        }
                    ],
                },
            },
        },
    }
    await apps.create_namespaced_daemon_set("default", ds)

    async def pending() -> Any:
        pods = (await core.list_namespaced_pod("default", label_selector="app=greedy-agent")).items
        conds = [
            c
            for p in pods
            for c in p.status.conditions or []
            if c.type == "PodScheduled" and c.status == "False"
        ]
        return (pods, conds) if len(conds) == 2 else None

    pods, conds = await eventually(pending)
    assert all(p.spec.node_name is None for p in pods)
    for cond in conds:
        assert cond.reason == "Unschedulable"
        assert cond.message.startswith("0/3 nodes are available")
        assert "Insufficient nvidia.com/gpu" in cond.message
        assert "didn't match Pod's node affinity/selector" in cond.message


async def test_job_with_catalogued_image_completes_and_serves_its_log(
    api: k8s.ApiClient, ext: Extensions
) -> None:
    ext.catalog.set(
        "example.com/hello:*", logs="hello from the catalog\n", exit_code=0, run_seconds=0.2
    )
    batch = k8s.BatchV1Api(api)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hello", "namespace": "default"},
        "spec": {
            "backoffLimit": 2,
            "template": {
                "metadata": {"labels": {"app": "hello"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "example.com/hello:1"}],
                },
            },
        },
    }
    await batch.create_namespaced_job("default", job)

    async def complete() -> Any:
        j = await batch.read_namespaced_job("hello", "default")
        conds = {c.type: c.status for c in j.status.conditions or []}
        return j if conds.get("Complete") == "True" else None

    j = await eventually(complete)
    assert j.status.succeeded == 1 and not j.status.active and not j.status.failed
    assert j.status.completion_time is not None
    assert j.metadata.labels == {"app": "hello"}  # copied from the pod template, as the API does
    assert j.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": j.metadata.uid}
    core = k8s.CoreV1Api(api)
    pods = (
        await core.list_namespaced_pod(
            "default", label_selector="batch.kubernetes.io/job-name=hello"
        )
    ).items
    assert len(pods) == 1 and pods[0].status.phase == "Succeeded"
    log = await core.read_namespaced_pod_log(pods[0].metadata.name, "default")
    assert log == "hello from the catalog\n"


async def test_failing_job_hits_backoff_limit(api: k8s.ApiClient, ext: Extensions) -> None:
    ext.catalog.set("example.com/broken:*", logs="boom\n", exit_code=3)
    batch = k8s.BatchV1Api(api)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "broken", "namespace": "default"},
        "spec": {
            "backoffLimit": 1,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "example.com/broken:1"}],
                },
            },
        },
    }
    await batch.create_namespaced_job("default", job)

    async def failed() -> Any:
        j = await batch.read_namespaced_job("broken", "default")
        conds = {c.type: c for c in j.status.conditions or []}
        return j if "Failed" in conds and conds["Failed"].status == "True" else None

    j = await eventually(failed)
    assert j.status.failed == 2
    reason = next(c.reason for c in j.status.conditions if c.type == "Failed")
    assert reason == "BackoffLimitExceeded"


async def test_deleting_a_deployment_garbage_collects_replicasets_and_pods(
    api: k8s.ApiClient,
) -> None:
    apps = k8s.AppsV1Api(api)
    core = k8s.CoreV1Api(api)
    await apps.create_namespaced_deployment("default", deployment("doomed", replicas=2))

    async def pods_running() -> bool:
        pods = (await core.list_namespaced_pod("default", label_selector="app=doomed")).items
        return len(pods) == 2

    await eventually(pods_running)
    await apps.delete_namespaced_deployment("doomed", "default")

    async def all_gone() -> bool:
        rs = (await apps.list_namespaced_replica_set("default")).items
        pods = (await core.list_namespaced_pod("default", label_selector="app=doomed")).items
        return not [r for r in rs if r.metadata.name.startswith("doomed-")] and not pods

    await eventually(all_gone)


async def test_existing_anti_affinity_with_a_namespace_selector_keeps_selected_pods_away(
    api: k8s.ApiClient,
) -> None:
    # A bound pod's anti-affinity selects pods by namespace label: pods in a
    # labelled namespace find no node, pods elsewhere schedule.
    core = k8s.CoreV1Api(api)
    for name, labels in (("ml", {"team": "ml"}), ("web", {})):
        await core.create_namespace({"metadata": {"name": name, "labels": labels}})
    guard = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "guard", "namespace": "default"},
        "spec": {
            "containers": [{"name": "main", "image": "nginx:1.27"}],
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": "worker"}},
                            "namespaceSelector": {"matchLabels": {"team": "ml"}},
                            "topologyKey": "kubernetes.io/os",
                        }
                    ]
                }
            },
        },
    }
    await core.create_namespaced_pod("default", guard)

    async def bound(name: str, namespace: str) -> Any:
        return (await core.read_namespaced_pod(name, namespace)).spec.node_name

    await eventually(lambda: bound("guard", "default"))

    def worker(namespace: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "worker", "namespace": namespace, "labels": {"app": "worker"}},
            "spec": {"containers": [{"name": "main", "image": "nginx:1.27"}]},
        }

    await core.create_namespaced_pod("web", worker("web"))
    await eventually(lambda: bound("worker", "web"))
    await core.create_namespaced_pod("ml", worker("ml"))

    async def refused() -> Any:
        p = await core.read_namespaced_pod("worker", "ml")
        for c in p.status.conditions or []:
            if c.type == "PodScheduled" and c.status == "False":
                return c
        return None

    cond = await eventually(refused)
    assert "didn't satisfy existing pods anti-affinity rules" in cond.message
    assert cond.message.startswith("0/3 nodes are available")
