"""StatefulSets, Services, PVCs, HPAs, Ingresses, LeaderWorkerSets and failure modes."""

from __future__ import annotations

from typing import Any

from kubernetes_asyncio import client as k8s

from localcluster.cluster import LocalCluster
from localcluster.extensions import Extensions

from .test_workloads import deployment, eventually


async def test_statefulset_gets_ordered_pods_and_bound_claims(api: k8s.ApiClient) -> None:
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {
            "replicas": 2,
            "serviceName": "db",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {"containers": [{"name": "db", "image": "postgres:16"}]},
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "5Gi"}},
                    },
                }
            ],
        },
    }
    await apps.create_namespaced_stateful_set("default", sts)

    async def ready() -> Any:
        s = (await apps.read_namespaced_stateful_set("db", "default")).status
        return s if s and s.ready_replicas == 2 and s.available_replicas == 2 else None

    status = await eventually(ready)
    assert status.current_revision == status.update_revision
    assert status.current_revision.startswith("db-")
    pods = (await core.list_namespaced_pod("default", label_selector="app=db")).items
    assert sorted(p.metadata.name for p in pods) == ["db-0", "db-1"]
    assert all(
        p.metadata.labels["controller-revision-hash"] == status.update_revision for p in pods
    )
    claims = (await core.list_namespaced_persistent_volume_claim("default")).items
    assert sorted(c.metadata.name for c in claims) == ["data-db-0", "data-db-1"]
    assert all(
        c.status.phase == "Bound" and c.spec.storage_class_name == "standard" for c in claims
    )
    volumes = (await core.list_persistent_volume()).items
    assert {v.spec.claim_ref.name for v in volumes} == {"data-db-0", "data-db-1"}


async def test_services_get_cluster_ips_and_load_balancers_get_ingress(api: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(api)
    svc = await core.create_namespaced_service(
        "default",
        {
            "metadata": {"name": "front"},
            "spec": {
                "type": "LoadBalancer",
                "selector": {"app": "x"},
                "ports": [{"port": 80, "targetPort": 8080}],
            },
        },
    )
    assert svc.spec.cluster_ip.startswith("10.9")
    assert 30000 <= svc.spec.ports[0].node_port <= 32767
    internal = await core.create_namespaced_service(
        "default", {"metadata": {"name": "back"}, "spec": {"ports": [{"port": 8000}]}}
    )
    assert internal.spec.cluster_ip != svc.spec.cluster_ip

    async def lb() -> Any:
        s = await core.read_namespaced_service("front", "default")
        ingress = (
            (s.status.load_balancer.ingress or []) if s.status and s.status.load_balancer else []
        )
        return ingress[0].ip if ingress else None

    assert (await eventually(lb)).startswith("172.18.255.")
    net = k8s.NetworkingV1Api(api)
    await net.create_namespaced_ingress(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {
                "rules": [
                    {
                        "host": "web.example.com",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {
                                        "service": {"name": "front", "port": {"number": 80}}
                                    },
                                }
                            ]
                        },
                    }
                ]
            },
        },
    )

    async def ingress_ip() -> Any:
        i = await net.read_namespaced_ingress("web", "default")
        lbs = (i.status.load_balancer.ingress or []) if i.status and i.status.load_balancer else []
        return lbs[0].ip if lbs else None

    assert await eventually(ingress_ip)


async def test_hpa_reports_and_enforces_min_replicas(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    await apps.create_namespaced_deployment("default", deployment("scaled", replicas=1))
    auto = k8s.AutoscalingV2Api(api)
    await auto.create_namespaced_horizontal_pod_autoscaler(
        "default",
        {
            "metadata": {"name": "scaled"},
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "scaled"},
                "minReplicas": 2,
                "maxReplicas": 4,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 80},
                        },
                    }
                ],
            },
        },
    )

    async def scaled() -> Any:
        h = await auto.read_namespaced_horizontal_pod_autoscaler("scaled", "default")
        return (
            h
            if h.status and h.status.current_replicas == 2 and h.status.desired_replicas == 2
            else None
        )

    h = await eventually(scaled)
    assert {c.type for c in h.status.conditions} >= {
        "AbleToScale",
        "ScalingActive",
        "ScalingLimited",
    }
    d = await apps.read_namespaced_deployment("scaled", "default")
    assert d.spec.replicas == 2


async def test_progress_deadline_exceeded_when_pods_cannot_schedule(api: k8s.ApiClient) -> None:
    apps = k8s.AppsV1Api(api)
    body = deployment("hungry", replicas=1)
    body["spec"]["progressDeadlineSeconds"] = 1
    body["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "9"}
    }
    await apps.create_namespaced_deployment("default", body)

    async def exceeded() -> Any:
        d = await apps.read_namespaced_deployment("hungry", "default")
        conds = {c.type: c for c in (d.status.conditions or [])}
        p = conds.get("Progressing")
        return d if p is not None and p.reason == "ProgressDeadlineExceeded" else None

    d = await eventually(exceeded)
    conds = {c.type: c for c in d.status.conditions}
    assert conds["Progressing"].status == "False"
    assert conds["Progressing"].message.endswith("has timed out progressing.")
    assert conds["Available"].status == "False"
    assert d.status.unavailable_replicas == 1


async def test_annotations_make_pods_fail_crash_loop_or_never_ready(api: k8s.ApiClient) -> None:
    core = k8s.CoreV1Api(api)

    def pod(name: str, mode: str, restart: str = "Always") -> dict[str, Any]:
        return {
            "metadata": {"name": name, "annotations": {"localcluster.nimctl.io/simulate": mode}},
            "spec": {"restartPolicy": restart, "containers": [{"name": "main", "image": "app:1"}]},
        }

    await core.create_namespaced_pod("default", pod("fails", "fail", restart="Never"))
    await core.create_namespaced_pod("default", pod("crashes", "crash-loop"))
    await core.create_namespaced_pod("default", pod("lazy", "never-ready"))

    async def settled() -> Any:
        pods = {p.metadata.name: p for p in (await core.list_namespaced_pod("default")).items}
        crash = pods["crashes"].status.container_statuses
        lazy = pods["lazy"].status.container_statuses
        return (
            pods
            if (
                pods["fails"].status.phase == "Failed"
                and crash
                and crash[0].state.waiting
                and crash[0].state.waiting.reason == "CrashLoopBackOff"
                and lazy
                and lazy[0].state.running
            )
            else None
        )

    pods = await eventually(settled)
    assert pods["crashes"].status.container_statuses[0].restart_count >= 1
    assert pods["crashes"].status.container_statuses[0].last_state.terminated.exit_code == 1
    ready = {c.type: c.status for c in pods["lazy"].status.conditions}
    assert ready["Ready"] == "False" and pods["lazy"].status.phase == "Running"

    async def kubelet_events() -> Any:
        events = (await core.list_namespaced_event("default")).items
        reasons = {(e.involved_object.name, e.reason) for e in events}
        wanted = {("crashes", "BackOff"), ("lazy", "Started"), ("lazy", "Scheduled")}
        return reasons if wanted <= reasons else None

    await eventually(kubelet_events)


LWS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "leaderworkersets.leaderworkerset.x-k8s.io"},
    "spec": {
        "group": "leaderworkerset.x-k8s.io",
        "scope": "Namespaced",
        "names": {
            "plural": "leaderworkersets",
            "singular": "leaderworkerset",
            "kind": "LeaderWorkerSet",
            "listKind": "LeaderWorkerSetList",
            "shortNames": ["lws"],
        },
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


async def test_leaderworkerset_becomes_available_when_all_groups_are_ready(
    cluster: LocalCluster, api: k8s.ApiClient
) -> None:
    ext_api = k8s.ApiextensionsV1Api(api)
    await ext_api.create_custom_resource_definition(LWS_CRD)
    custom = k8s.CustomObjectsApi(api)

    async def established() -> Any:
        try:
            await custom.list_namespaced_custom_object(
                "leaderworkerset.x-k8s.io", "v1", "default", "leaderworkersets"
            )
        except k8s.ApiException:
            return False
        return True

    await eventually(established)
    template = {
        "metadata": {"labels": {"app": "llm"}},
        "spec": {"containers": [{"name": "llm", "image": "vllm:1"}]},
    }
    await custom.create_namespaced_custom_object(
        "leaderworkerset.x-k8s.io",
        "v1",
        "default",
        "leaderworkersets",
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "llm"},
            "spec": {
                "replicas": 2,
                "leaderWorkerTemplate": {"size": 3, "workerTemplate": template},
            },
        },
    )

    async def available() -> Any:
        obj = await custom.get_namespaced_custom_object(
            "leaderworkerset.x-k8s.io", "v1", "default", "leaderworkersets", "llm"
        )
        conds = {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}
        return obj if conds.get("Available", {}).get("status") == "True" else None

    obj = await eventually(available)
    assert obj["status"]["readyReplicas"] == 2
    pods = (await k8s.CoreV1Api(api).list_namespaced_pod("default", label_selector="app=llm")).items
    assert sorted(p.metadata.name for p in pods) == [
        "llm-0",
        "llm-0-1",
        "llm-0-2",
        "llm-1",
        "llm-1-1",
        "llm-1-2",
    ]


async def test_nodes_come_from_the_profile(api: k8s.ApiClient, ext: Extensions) -> None:
    nodes = (await k8s.CoreV1Api(api).list_node()).items
    gpu = [
        n
        for n in nodes
        if n.metadata.labels.get("feature.node.kubernetes.io/pci-10de.present") == "true"
    ]
    assert len(nodes) == 3 and len(gpu) == 2
    assert all(n.status.allocatable["nvidia.com/gpu"] == "8" for n in gpu)
    assert all(
        n.status.node_info.container_runtime_version.startswith("containerd://") for n in nodes
    )
    assert all({c.type: c.status for c in n.status.conditions}["Ready"] == "True" for n in nodes)


async def test_failure_mode_set_through_the_test_api(api: k8s.ApiClient, ext: Extensions) -> None:
    assert ext.simulator is not None
    ext.simulator.set_failure_mode("default/stuck-*", "never-ready")
    apps = k8s.AppsV1Api(api)
    await apps.create_namespaced_deployment("default", deployment("stuck", replicas=2))

    async def running_but_unready() -> Any:
        pods = (
            await k8s.CoreV1Api(api).list_namespaced_pod("default", label_selector="app=stuck")
        ).items
        return len(pods) == 2 and all(p.status.phase == "Running" for p in pods)

    await eventually(running_but_unready)
    d = await apps.read_namespaced_deployment("stuck", "default")
    assert not d.status.available_replicas
    ext.simulator.set_failure_mode("default/stuck-*", None)

    async def available() -> Any:
        s = (await apps.read_namespaced_deployment("stuck", "default")).status
        return s.available_replicas == 2

    await eventually(available)


async def test_simulator_options_choose_profile_and_speed() -> None:
    cluster = LocalCluster(debug_api=False)
    cluster.simulator_options = {  # type: ignore[attr-defined]
        "speed": 40.0,
        "profile": {"pools": [{"namePrefix": "big-gpu", "count": 1, "gpus": 4}]},
    }
    async with cluster:
        nodes = cluster.storage.list("v1", "Node")
        assert [n["metadata"]["name"] for n in nodes] == ["big-gpu-0"]
        assert nodes[0]["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        cluster.storage.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "crashy",
                    "namespace": "default",
                    "annotations": {"localcluster.nimctl.io/simulate": "crash-loop"},
                },
                "spec": {"containers": [{"name": "main", "image": "app:1"}]},
            }
        )

        async def restarted_twice() -> bool:
            pod = cluster.storage.get("v1", "Pod", "crashy", "default")
            statuses = (pod.get("status") or {}).get("containerStatuses") or []
            return bool(statuses and statuses[0]["restartCount"] >= 2)

        # 10 s and 20 s of simulated back-off pass in well under a second at speed 40.
        await eventually(restarted_twice)


async def test_selector_service_gets_endpoints_of_ready_pods(api: k8s.ApiClient) -> None:
    apps, core = k8s.AppsV1Api(api), k8s.CoreV1Api(api)
    body = deployment("api", replicas=3)
    body["spec"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "http", "containerPort": 8000}
    ]
    await apps.create_namespaced_deployment("default", body)
    await core.create_namespaced_service(
        "default",
        {
            "metadata": {"name": "api"},
            "spec": {
                "selector": {"app": "api"},
                "ports": [{"name": "web", "port": 80, "targetPort": "http"}],
            },
        },
    )

    async def endpoints(count: int) -> Any:
        try:
            ep = await core.read_namespaced_endpoints("api", "default")
        except k8s.ApiException:
            return None
        subsets = ep.subsets or []
        ready = [a for s in subsets for a in (s.addresses or [])]
        return (
            ep if len(ready) == count and not any(s.not_ready_addresses for s in subsets) else None
        )

    ep = await eventually(lambda: endpoints(3))
    assert ep.subsets[0].ports[0].port == 8000 and ep.subsets[0].ports[0].name == "web"
    pods = {
        p.status.pod_ip
        for p in (await core.list_namespaced_pod("default", label_selector="app=api")).items
    }
    assert {a.ip for a in ep.subsets[0].addresses} == pods
    slices = (
        await k8s.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
            "default", label_selector="kubernetes.io/service-name=api"
        )
    ).items
    assert len(slices) == 1 and len(slices[0].endpoints) == 3
    assert all(e.conditions.ready for e in slices[0].endpoints)
    await apps.patch_namespaced_deployment("api", "default", {"spec": {"replicas": 1}})
    await eventually(lambda: endpoints(1))
