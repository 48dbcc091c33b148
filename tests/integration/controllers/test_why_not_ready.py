"""Why is it not Ready? Each cause, on localcluster, named in the NIMService's condition.

For each cause (a missing auth Secret, pull secret, PVC or CA ConfigMap, an image
tag the registry does not have, no GPU in the cluster, a caching Job that cannot
start) the ``Ready`` condition carries the blocker's reason and a message naming
the object; fixing the cause brings the service Ready without restarting the
operator; and the status is written once per change of blocker, not on every
pod update in between.
"""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path
from typing import Any

from nimctl.demo import apply_objects, demo_objects
from nimctl.why import explain
from nimctl_runtime.client import Client
from tests.integration.controllers.harness import (
    CountingClient,
    cluster_with_crds,
    start_operator,
    wait_for,
)

API = "apps.nvidia.com/v1alpha1"
NS = "why"


def _base() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    objs = demo_objects(NS)
    service = next(o for o in objs if o["kind"] == "NIMService")
    return [o for o in objs if o["kind"] != "NIMService"], service


def _variant(base: dict[str, Any], name: str, **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out["metadata"]["name"] = name
    for key, value in spec.items():
        out["spec"][key] = value
    return out


def _ready(obj: dict[str, Any]) -> dict[str, Any]:
    conds = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "Ready"), {})


async def _condition(
    admin: Client, name: str, reason: str, message_has: str = ""
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await admin.get(API, "NIMService", name, NS)
        cond = _ready(obj)
        found = cond.get("reason") == reason and message_has in cond.get("message", "")
        return obj if found else None

    try:
        obj: dict[str, Any] = await wait_for(check, timeout=60)
    except TimeoutError:
        now = await admin.get(API, "NIMService", name, NS)
        raise AssertionError(f"{name}: not {reason}: {now.get('status')}") from None
    assert obj["status"]["state"] == "NotReady", "Pending is not Failed"
    return _ready(obj)


async def _until_ready(admin: Client, name: str, timeout: float = 90) -> None:
    async def check() -> bool:
        obj = await admin.get(API, "NIMService", name, NS)
        return (obj.get("status") or {}).get("state") == "Ready"

    await wait_for(check, timeout=timeout)


def _status_writes(client: CountingClient, name: str) -> int:
    return sum(
        1
        for method, path in client.writes
        if method == "PATCH" and path.endswith(f"/nimservices/{name}/status")
    )


def _pod_of(cluster: Any, name: str) -> dict[str, Any]:
    pods = [
        p
        for p in cluster.storage.list("v1", "Pod", NS)
        if p["metadata"]["name"].startswith(f"{name}-")
        and not p["metadata"].get("deletionTimestamp")
    ]
    pods.sort(key=lambda p: p["metadata"].get("creationTimestamp", ""))
    return pods[-1] if pods else {}


def _docker_secret(name: str) -> dict[str, Any]:
    config = json.dumps({"auths": {"nvcr.io": {"username": "$oauthtoken", "password": "x"}}})
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": NS},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(config.encode()).decode()},
    }


async def test_each_cause_is_named_and_fixing_it_brings_ready(tmp_path: Path) -> None:
    async with cluster_with_crds(tmp_path) as (cluster, admin):
        operator = await start_operator(cluster.kubeconfig_path)
        try:
            await _causes(cluster, admin, operator.client)
        finally:
            await operator.shutdown()


async def _causes(cluster: Any, admin: Client, client: CountingClient) -> None:
    others, base = _base()
    image = dict(base["spec"]["image"])
    services = [
        _variant(base, "no-auth", authSecret="missing-api-secret"),
        _variant(base, "no-pull", image={**image, "pullSecrets": ["missing-pull-secret"]}),
        _variant(base, "bad-tag", image={**image, "tag": "9.99.99"}),
        _variant(base, "no-cm", proxy={"certConfigMap": "missing-ca"}),
        _variant(
            base,
            "no-pvc",
            storage={"pvc": {"name": "missing-pvc", "volumeAccessMode": "ReadWriteOnce"}},
        ),
    ]
    await apply_objects(admin, [*others, *services])

    cond = await _condition(admin, "no-auth", "SecretNotFound")
    pod = _pod_of(cluster, "no-auth")["metadata"]["name"]
    assert cond["message"] == f'pod {pod} cannot start: secret "missing-api-secret" not found'

    cond = await _condition(admin, "no-pull", "PullSecretNotFound")
    assert 'image pull secret "missing-pull-secret" not found' in cond["message"]
    assert cond["message"].startswith("pod no-pull-")

    cond = await _condition(admin, "bad-tag", "ImagePullFailed")
    assert ":9.99.99" in cond["message"] and "not found in the registry" in cond["message"]

    cond = await _condition(admin, "no-cm", "ConfigMapNotFound")
    assert cond["message"].endswith('cannot mount its volumes: configmap "missing-ca" not found')

    cond = await _condition(admin, "no-pvc", "PVCNotFound")
    assert 'persistentvolumeclaim "missing-pvc" not found' in cond["message"]

    # While blocked the pods keep changing (pull retries, back-offs); the status
    # does not: one write for the blocker, none for the pod's churn.
    writes = {
        s["metadata"]["name"]: _status_writes(client, s["metadata"]["name"]) for s in services
    }

    async def pulled_again() -> bool:
        waiting = (_pod_of(cluster, "bad-tag").get("status") or {}).get("containerStatuses") or [{}]
        reason = (waiting[0].get("state") or {}).get("waiting", {}).get("reason")
        return bool(reason == "ImagePullBackOff")

    await wait_for(pulled_again, timeout=30)
    assert _status_writes(client, "bad-tag") == writes["bad-tag"]

    # Fix every cause; each service comes Ready without an operator restart.
    await admin.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "missing-api-secret", "namespace": NS},
            "stringData": {"NGC_API_KEY": "simulated"},
        }
    )
    await admin.create(_docker_secret("missing-pull-secret"))
    await admin.patch(
        API,
        "NIMService",
        "bad-tag",
        {"spec": {"image": {"tag": image["tag"]}}},
        namespace=NS,
        patch_type="merge",
    )
    await admin.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "missing-ca", "namespace": NS},
            "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\n"},
        }
    )
    await admin.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "missing-pvc", "namespace": NS},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}},
            },
        }
    )
    for service in services:
        await _until_ready(admin, service["metadata"]["name"])
    for service in services:
        name = service["metadata"]["name"]
        # the blocker, (maybe) the rollout words once it went, then Ready
        assert _status_writes(client, name) - writes[name] <= 3, name


async def test_no_gpu_in_the_cluster_is_named(tmp_path: Path) -> None:
    async with cluster_with_crds(tmp_path, profile="no-gpu") as (cluster, admin):
        operator = await start_operator(cluster.kubeconfig_path)
        try:
            others, base = _base()
            # no NIMCache: its caching Job would wait for a GPU too
            pvc = {"create": True, "size": "1Gi", "volumeAccessMode": "ReadWriteOnce"}
            service = _variant(base, "no-gpu", storage={"pvc": pvc})
            await apply_objects(admin, [o for o in others if o["kind"] != "NIMCache"] + [service])
            cond = await _condition(admin, "no-gpu", "NoGPUNodes")
            assert cond["message"].startswith("pod no-gpu-")
            assert "no node has GPUs (nvidia.com/gpu)" in cond["message"]
        finally:
            await operator.shutdown()


async def test_a_cache_job_that_cannot_start_is_pending_and_named(tmp_path: Path) -> None:
    async with cluster_with_crds(tmp_path) as (cluster, admin):
        operator = await start_operator(cluster.kubeconfig_path)
        try:
            others, base = _base()
            cache = next(o for o in others if o["kind"] == "NIMCache")
            cache["spec"]["source"]["ngc"]["authSecret"] = "missing-ngc-key"
            await apply_objects(admin, [*others, base])
            name = cache["metadata"]["name"]

            async def pending() -> dict[str, Any] | None:
                obj = await admin.get(API, "NIMCache", name, NS)
                conds = (obj.get("status") or {}).get("conditions") or []
                cond: dict[str, Any] = next(
                    (c for c in conds if c["type"] == "NIM_CACHE_JOB_PENDING"), {}
                )
                return obj if cond.get("reason") == "SecretNotFound" else None

            obj = await wait_for(pending, timeout=60)
            assert obj["status"]["state"] == "Pending", "Pending is not Failed"
            cond = next(
                c for c in obj["status"]["conditions"] if c["type"] == "NIM_CACHE_JOB_PENDING"
            )
            assert cond["status"] == "True"
            assert cond["message"].startswith(f"pod {name}-job-")
            assert cond["message"].endswith('secret "missing-ngc-key" not found')
            # The NIMService waiting on the cache says what the cache waits on.
            svc = await _condition(
                admin, base["metadata"]["name"], "NIMCacheNotReady", "missing-ngc-key"
            )
            assert svc["message"] == f"NIMCache {name} not ready: {cond['message']}"
            # nimctl why follows the same chain: service -> cache -> job -> pod
            report = await explain(admin, "NIMService", base["metadata"]["name"], NS)
            assert report.exit_code == 1
            assert report.blocker is not None and report.blocker.reason == "SecretNotFound"
            assert report.lines[1] == f"└─ NIMCache {NS}/{name}: Pending"
            assert report.lines[2].startswith(f"  └─ Job {name}-job: 1 active")

            await admin.create(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "missing-ngc-key", "namespace": NS},
                    "stringData": {"NGC_API_KEY": "simulated"},
                }
            )
            await _until_ready(admin, base["metadata"]["name"])
            done = await admin.get(API, "NIMCache", name, NS)
            assert done["status"]["state"] == "Ready"
            # status.model.name: the model of the image in use, from its manifest
            svc_obj = await admin.get(API, "NIMService", base["metadata"]["name"], NS)
            assert [p["model"] for p in done["status"]["profiles"]] == [
                "meta/llama-3.1-8b-instruct"
            ]
            assert svc_obj["status"]["state"] == "Ready"
        finally:
            await operator.shutdown()


async def test_status_model_name_is_the_model_each_nim_serves(tmp_path: Path) -> None:
    from controllers.nimservice import proxy_model_query
    from localcluster.registries import LLM_RELEASES, NIM_MODELS, NIM_RELEASES

    async with cluster_with_crds(tmp_path) as (cluster, admin):
        asker = Client(str(cluster.kubeconfig_path))
        operator = await start_operator(
            cluster.kubeconfig_path, model_query=proxy_model_query(asker)
        )
        try:
            others, base = _base()
            services = []
            for i, model in enumerate(NIM_MODELS):
                svc = _variant(
                    base,
                    f"nim-{i}",
                    image={
                        **base["spec"]["image"],
                        "repository": f"nvcr.io/nim/{model}",
                        "tag": NIM_RELEASES.get(model, LLM_RELEASES)[-1],
                    },
                    storage={"emptyDir": {}},
                )
                svc["spec"].pop("resources", None)  # more NIMs than simulated GPUs
                services.append(svc)
            await apply_objects(admin, [o for o in others if o["kind"] != "NIMCache"])
            await apply_objects(admin, services)
            for i, model in enumerate(NIM_MODELS):
                await _until_ready(admin, f"nim-{i}")
                obj = await admin.get(API, "NIMService", f"nim-{i}", NS)
                assert obj["status"]["model"]["name"] == model
        finally:
            await operator.shutdown()
            await asker.close()


async def test_a_pipeline_names_the_member_that_blocks(tmp_path: Path) -> None:
    async with cluster_with_crds(tmp_path) as (cluster, admin):
        operator = await start_operator(cluster.kubeconfig_path)
        try:
            others, base = _base()
            good = copy.deepcopy(base["spec"])
            good["storage"] = {"emptyDir": {}}
            bad = {**copy.deepcopy(good), "authSecret": "missing-member-key"}
            pipeline = {
                "apiVersion": API,
                "kind": "NIMPipeline",
                "metadata": {"name": "rag", "namespace": NS},
                "spec": {
                    "services": [
                        {"name": "llm", "enabled": True, "spec": good},
                        {"name": "embed", "enabled": True, "spec": bad},
                    ]
                },
            }
            await apply_objects(admin, [o for o in others if o["kind"] != "NIMCache"])
            await apply_objects(admin, [pipeline])

            async def blocked() -> dict[str, Any] | None:
                obj = await admin.get(API, "NIMPipeline", "rag", NS)
                cond = _ready(obj)
                return cond if cond.get("reason") == "SecretNotFound" else None

            cond = await wait_for(blocked, timeout=60)
            assert cond["message"].startswith("NIMService embed not ready: pod embed-")
            assert cond["message"].endswith('secret "missing-member-key" not found')
            report = await explain(admin, "NIMPipeline", "rag", NS)
            assert report.exit_code == 1 and report.blocker is not None
            assert report.blocker.message.startswith("member embed: pod embed-")
            assert any(
                line.startswith("└─ NIMService why/embed: NotReady") for line in report.lines
            )

            await admin.create(
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "missing-member-key", "namespace": NS},
                    "stringData": {"NGC_API_KEY": "simulated"},
                }
            )

            async def ready() -> bool:
                obj = await admin.get(API, "NIMPipeline", "rag", NS)
                return (obj.get("status") or {}).get("state") == "Ready"

            await wait_for(ready, timeout=90)
        finally:
            await operator.shutdown()


async def test_a_node_cordoned_for_a_driver_upgrade_is_named(tmp_path: Path) -> None:
    upgrade_label = "nvidia.com/gpu-driver-upgrade-state"
    async with cluster_with_crds(tmp_path) as (cluster, admin):
        operator = await start_operator(cluster.kubeconfig_path)
        try:
            gpu_nodes = sorted(
                n["metadata"]["name"]
                for n in (await admin.list("v1", "Node"))["items"]
                if n["metadata"]["name"].startswith("gpu-")
            )
            for state, node in zip(
                ("drain-required", "pod-restart-required"), gpu_nodes, strict=False
            ):
                await admin.patch(
                    "v1",
                    "Node",
                    node,
                    {
                        "metadata": {"labels": {upgrade_label: state}},
                        "spec": {"unschedulable": True},
                    },
                    patch_type="merge",
                )
            others, base = _base()
            service = _variant(base, "upgrading", storage={"emptyDir": {}})
            await apply_objects(admin, [o for o in others if o["kind"] != "NIMCache"] + [service])
            cond = await _condition(admin, "upgrading", "NodeDriverUpgrading")
            assert cond["message"].startswith("pod upgrading-")
            assert cond["message"].endswith(
                f"node {gpu_nodes[0]} is cordoned for a GPU driver upgrade (state drain-required)"
            )
            # The upgrade finishes: nodes uncordoned, state upgrade-done -> Ready, no restart.
            for node in gpu_nodes:
                await admin.patch(
                    "v1",
                    "Node",
                    node,
                    {
                        "metadata": {"labels": {upgrade_label: "upgrade-done"}},
                        "spec": {"unschedulable": None},
                    },
                    patch_type="merge",
                )
            await _until_ready(admin, "upgrading")
        finally:
            await operator.shutdown()


EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


async def test_multinode_examples_reach_what_the_readme_promises(tmp_path: Path) -> None:
    """Ray: Ready (the simulated manifest has a tp8 profile); MPI: waits for the RDMA
    device the README names, and says so."""
    import yaml

    from localcluster.addons import install_ecosystem

    async with cluster_with_crds(tmp_path) as (cluster, admin):
        await install_ecosystem(admin)
        operator = await start_operator(cluster.kubeconfig_path)
        try:
            secrets = [
                o for o in demo_objects("nim-service") if o["kind"] in ("Namespace", "Secret")
            ]
            await apply_objects(admin, secrets)
            for example in ("nimservice-multinode-ray.yaml", "nimservice-multinode-mpi.yaml"):
                docs = [d for d in yaml.safe_load_all((EXAMPLES / example).read_text()) if d]
                await apply_objects(admin, docs)

            async def state(name: str) -> dict[str, Any]:
                obj: dict[str, Any] = await admin.get(API, "NIMService", name, "nim-service")
                return obj

            async def ray_ready() -> bool:
                obj = await state("llama-3-1-405b-ray")
                return bool(obj.get("status", {}).get("state") == "Ready")

            await wait_for(ray_ready, timeout=90)

            async def mpi_blocked() -> dict[str, Any] | None:
                cond = _ready(await state("deepseek-r1"))
                return cond if cond.get("reason") == "Unschedulable" else None

            cond = await wait_for(mpi_blocked, timeout=90)
            assert cond["message"].startswith("pod deepseek-r1-lws-0 cannot be scheduled: ")
            assert "Insufficient rdma/rdma_shared_device_a" in cond["message"]
        finally:
            await operator.shutdown()


async def test_the_mpi_example_is_ready_on_the_rdma_profile(tmp_path: Path) -> None:
    """On ``gpu-rdma`` (``nimctl local --profile gpu-rdma``) the GPU nodes offer the
    RDMA device the MPI example asks for: both LWS pods run, one per node, and the
    service is Ready."""
    import yaml

    from localcluster.addons import install_ecosystem

    async with cluster_with_crds(tmp_path, profile="gpu-rdma") as (cluster, admin):
        await install_ecosystem(admin)
        operator = await start_operator(cluster.kubeconfig_path)
        try:
            secrets = [
                o for o in demo_objects("nim-service") if o["kind"] in ("Namespace", "Secret")
            ]
            text = (EXAMPLES / "nimservice-multinode-mpi.yaml").read_text()
            await apply_objects(admin, secrets + [d for d in yaml.safe_load_all(text) if d])

            async def mpi_ready() -> bool:
                obj = await admin.get(API, "NIMService", "deepseek-r1", "nim-service")
                return bool(obj.get("status", {}).get("state") == "Ready")

            try:
                await wait_for(mpi_ready, timeout=90)
            except TimeoutError:
                report = await explain(admin, "NIMService", "deepseek-r1", "nim-service")
                raise AssertionError("\n".join(report.lines + report.ending())) from None
            pods = await admin.list("v1", "Pod", "nim-service")
            nodes = {
                p["spec"].get("nodeName")
                for p in pods["items"]
                if p["metadata"]["name"].startswith("deepseek-r1-lws-0")
            }
            assert nodes == {"gpu-node-0", "gpu-node-1"}, nodes
        finally:
            await operator.shutdown()
