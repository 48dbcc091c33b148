"""Rollouts: Deployment rolling updates, DaemonSet RollingUpdate vs OnDelete, Job TTL."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client as k8s

from .test_workloads import deployment, eventually


def daemonset(strategy: dict[str, Any], image: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "agent", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "agent"}},
            "updateStrategy": strategy,
            "template": {
                "metadata": {"labels": {"app": "agent"}},
                "spec": {"containers": [{"name": "agent", "image": image}]},
            },
        },
    }


async def ds_pods(api: k8s.ApiClient) -> list[Any]:
    return (
        await k8s.CoreV1Api(api).list_namespaced_pod("default", label_selector="app=agent")
    ).items


async def settled_ds(api: k8s.ApiClient, generation: int, updated: int) -> Any:
    apps = k8s.AppsV1Api(api)

    async def check() -> Any:
        d = await apps.read_namespaced_daemon_set("agent", "default")
        s = d.status
        ok = (
            s is not None
            and s.observed_generation == generation
            and s.number_ready == 3
            and (s.updated_number_scheduled or 0) == updated
            and len(await ds_pods(api)) == 3
        )
        return d if ok else None

    return await eventually(check)


async def test_daemonset_rolling_update_replaces_every_pod(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    await apps.create_namespaced_daemon_set(
        "default",
        daemonset({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}, "agent:1"),
    )
    await settled_ds(api, 1, 3)
    await apps.patch_namespaced_daemon_set(
        "agent",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "agent:2"}]}}}},
    )
    await settled_ds(api, 2, 3)
    pods = await ds_pods(api)
    assert {p.spec.containers[0].image for p in pods} == {"agent:2"}
    assert {p.metadata.labels["pod-template-generation"] for p in pods} == {"2"}
    revisions = (await apps.list_namespaced_controller_revision("default")).items
    assert sorted(r.revision for r in revisions) == [1, 2]


async def test_daemonset_on_delete_waits_for_the_user(api: k8s.ApiClient) -> None:
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    await apps.create_namespaced_daemon_set("default", daemonset({"type": "OnDelete"}, "agent:1"))
    await settled_ds(api, 1, 3)
    await apps.patch_namespaced_daemon_set(
        "agent",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "agent", "image": "agent:2"}]}}}},
    )
    d = await settled_ds(api, 2, 0)
    assert d.status.updated_number_scheduled in (None, 0)
    assert {p.spec.containers[0].image for p in await ds_pods(api)} == {"agent:1"}
    victim = (await ds_pods(api))[0]
    await core.delete_namespaced_pod(victim.metadata.name, "default")
    await settled_ds(api, 2, 1)
    images = sorted(p.spec.containers[0].image for p in await ds_pods(api))
    assert images == ["agent:1", "agent:1", "agent:2"]


async def test_deployment_rolling_update_moves_all_pods_to_the_new_replicaset(
    api: k8s.ApiClient,
) -> None:
    apps = k8s.AppsV1Api(api)
    body = deployment("roll", replicas=4)
    body["spec"]["strategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    await apps.create_namespaced_deployment("default", body)

    async def done(generation: int) -> Any:
        d = await apps.read_namespaced_deployment("roll", "default")
        s = d.status
        return (
            d
            if (
                s.observed_generation == generation
                and s.updated_replicas == 4
                and s.available_replicas == 4
                and s.replicas == 4
            )
            else None
        )

    await eventually(lambda: done(1))
    await apps.patch_namespaced_deployment(
        "roll",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}},
    )
    d = await eventually(lambda: done(2))
    assert d.metadata.annotations["deployment.kubernetes.io/revision"] == "2"
    sets = {
        r.metadata.annotations["deployment.kubernetes.io/revision"]: r
        for r in (await apps.list_namespaced_replica_set("default")).items
    }
    assert sets["1"].spec.replicas == 0 and sets["2"].spec.replicas == 4
    assert sets["2"].metadata.annotations["deployment.kubernetes.io/max-replicas"] == "5"


async def test_job_is_deleted_after_ttl(api: k8s.ApiClient) -> None:
    batch = k8s.BatchV1Api(api)
    await batch.create_namespaced_job(
        "default",
        {
            "metadata": {"name": "short-lived"},
            "spec": {
                "ttlSecondsAfterFinished": 1,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "x",
                                "command": ["download-to-cache", "--all"],
                            }
                        ],
                    }
                },
            },
        },
    )

    async def gone() -> bool:
        jobs = (await batch.list_namespaced_job("default")).items
        pods = (
            await k8s.CoreV1Api(api).list_namespaced_pod(
                "default", label_selector="batch.kubernetes.io/job-name=short-lived"
            )
        ).items
        return not jobs and not pods

    await eventually(gone, timeout=20)


async def test_statefulset_rolling_update_and_recreate_deployment(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    sts = {
        "metadata": {"name": "ordered"},
        "spec": {
            "replicas": 3,
            "serviceName": "ordered",
            "selector": {"matchLabels": {"app": "ordered"}},
            "template": {
                "metadata": {"labels": {"app": "ordered"}},
                "spec": {"containers": [{"name": "c", "image": "db:1"}]},
            },
        },
    }
    await apps.create_namespaced_stateful_set("default", sts)

    async def rolled(generation: int) -> Any:
        s = (await apps.read_namespaced_stateful_set("ordered", "default")).status
        return (
            s
            if (
                s is not None
                and s.observed_generation == generation
                and s.updated_replicas == 3
                and s.ready_replicas == 3
                and s.current_revision == s.update_revision
            )
            else None
        )

    first = await eventually(lambda: rolled(1))
    await apps.patch_namespaced_stateful_set(
        "ordered",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "db:2"}]}}}},
    )
    second = await eventually(lambda: rolled(2))
    assert second.update_revision != first.update_revision
    pods = (
        await k8s.CoreV1Api(api).list_namespaced_pod("default", label_selector="app=ordered")
    ).items
    assert {p.spec.containers[0].image for p in pods} == {"db:2"}

    body = deployment("recreated", replicas=2)
    body["spec"]["strategy"] = {"type": "Recreate"}
    await apps.create_namespaced_deployment("default", body)

    async def deployed(generation: int) -> Any:
        d = await apps.read_namespaced_deployment("recreated", "default")
        s = d.status
        return (
            d
            if (
                s.observed_generation == generation
                and s.updated_replicas == 2
                and s.available_replicas == 2
                and s.replicas == 2
            )
            else None
        )

    await eventually(lambda: deployed(1))
    await apps.patch_namespaced_deployment(
        "recreated",
        "default",
        {"spec": {"template": {"spec": {"containers": [{"name": "main", "image": "nginx:2"}]}}}},
    )
    await eventually(lambda: deployed(2))
    sets = sorted(
        (r.metadata.annotations["deployment.kubernetes.io/revision"], r.spec.replicas)
        for r in (await apps.list_namespaced_replica_set("default")).items
        if r.metadata.name.startswith("recreated-")
    )
    assert sets == [("1", 0), ("2", 2)]
