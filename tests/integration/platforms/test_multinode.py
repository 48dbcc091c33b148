"""Multi-node NIMServices on localcluster: MPI objects created once, Ray without them.

The operator writes each MPI object (``<name>-mpi-config``,
``<name>-mpi-start-script``, Secret ``<name>-ssh-pk``) exactly once, as the
audit log shows; an idle reconcile writes nothing; Ray mode creates none of
them. Readiness comes from the LeaderWorkerSet's ``Available`` condition.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import pytest

from localcluster.extensions import extensions_of
from nimctl.demo import DEMO_NAME, apply_objects
from tests.integration.controllers.harness import wait_for
from tests.integration.controllers.test_nim_controllers import EXAMPLES_DIR, example_objects
from tests.integration.platforms.conftest import (
    Env,
    annotate,
    exists,
    objects_in,
    ready,
    status_of,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

LWS = "leaderworkerset.x-k8s.io/v1"
CD = "resource.nvidia.com/v1beta1"
MPI_OBJECTS = [
    ("configmaps", f"{DEMO_NAME}-mpi-config"),
    ("configmaps", f"{DEMO_NAME}-mpi-start-script"),
    ("secrets", f"{DEMO_NAME}-ssh-pk"),
]


async def test_mpi_objects_are_created_once_and_never_rewritten(env: Env) -> None:
    ns = "p-mpi"
    since = env.audit_seq()
    multi = {"parallelism": {"pipeline": 2, "tensor": 1}, "mpi": {"mpiStartTimeout": 300}}
    await apply_objects(env.admin, objects_in(ns, multiNode=multi))
    st = await ready(env.admin, ns)
    ready_cond = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert ready_cond["message"] == f'leaderworkerset "{DEMO_NAME}-lws" is ready'

    secret = await env.admin.get("v1", "Secret", f"{DEMO_NAME}-ssh-pk", ns)
    assert base64.b64decode(secret["data"]["private.key"]).startswith(b"-----BEGIN RSA")
    hosts = await env.admin.get("v1", "ConfigMap", f"{DEMO_NAME}-mpi-config", ns)
    worker_host = f"{DEMO_NAME}-lws-0-1.{DEMO_NAME}-lws.{ns}.svc"
    assert hosts["data"] == {"hostfile-0": f"localhost slots=1\n{worker_host} slots=1\n"}

    poke = annotate(env.admin, LWS, "LeaderWorkerSet", f"{DEMO_NAME}-lws", ns)
    assert await env.idle_reconcile_writes(ns, poke) == [], "a second reconcile writes nothing"

    # An edit of the NIMService that leaves the MPI objects' content alone.
    await env.admin.patch(
        "apps.nvidia.com/v1alpha1",
        "NIMService",
        DEMO_NAME,
        {"spec": {"env": [{"name": "NCCL_DEBUG", "value": "INFO"}]}},
        namespace=ns,
    )


    async def rolled() -> bool:
        lws = await env.admin.get(LWS, "LeaderWorkerSet", f"{DEMO_NAME}-lws", ns)
        leader = lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
        return any(e["name"] == "NCCL_DEBUG" for e in leader.get("env") or [])

    await wait_for(rolled, timeout=30)
    await ready(env.admin, ns)
    writes = env.operator_writes(ns, since)
    for resource, name in MPI_OBJECTS:
        assert [w[0] for w in writes if w[1] == resource and w[3] == name] == ["create"], name
    assert ("update", "leaderworkersets", "", f"{DEMO_NAME}-lws") in writes
    again = await env.admin.get("v1", "Secret", f"{DEMO_NAME}-ssh-pk", ns)
    assert again["data"] == secret["data"]


async def test_ray_mode_creates_no_mpi_objects(env: Env) -> None:
    ns = "p-ray"
    multi = {"parallelism": {"pipeline": 2, "tensor": 1}, "ray": {"rayPort": 6379}}
    await apply_objects(env.admin, objects_in(ns, multiNode=multi))
    await ready(env.admin, ns)
    for resource, name in MPI_OBJECTS:
        kind = "Secret" if resource == "secrets" else "ConfigMap"
        assert not await exists(env.admin, "v1", kind, name, ns), name
    lws = await env.admin.get(LWS, "LeaderWorkerSet", f"{DEMO_NAME}-lws", ns)
    worker = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert worker["args"] == ["nim-serve-ray", "--head-address", "$(LWS_LEADER_ADDRESS):6379"]
    poke = annotate(env.admin, LWS, "LeaderWorkerSet", f"{DEMO_NAME}-lws", ns)
    assert await env.idle_reconcile_writes(ns, poke) == []


@pytest.mark.parametrize("mode", ["create", "reference"])
async def test_compute_domain_status_is_copied(env: Env, mode: str) -> None:
    ns = f"p-cd-{mode}"
    multi: dict[str, Any] = {"parallelism": {"pipeline": 2, "tensor": 1}, "ray": {}}
    domain_name = DEMO_NAME
    if mode == "create":
        multi["computeDomain"] = {"create": True}
    else:
        domain_name = "shared-imex"
        multi["computeDomain"] = {"name": domain_name}
    objs = objects_in(ns, multiNode=multi)
    if mode == "reference":
        objs.insert(
            1,
            {
                "apiVersion": CD,
                "kind": "ComputeDomain",
                "metadata": {"name": domain_name, "namespace": ns},
                "spec": {
                    "numNodes": 2,
                    "channel": {"resourceClaimTemplate": {"name": "shared-imex-channel"}},
                },
            },
        )
    await apply_objects(env.admin, objs)
    await ready(env.admin, ns)

    async def copied() -> dict[str, Any] | None:
        st = await status_of(env.admin, ns)
        cds = st.get("computeDomainStatus") or {}
        return st if cds.get("status") == "Ready" else None

    st = await wait_for(copied, timeout=30)
    domain = await env.admin.get(CD, "ComputeDomain", domain_name, ns)
    cds = st["computeDomainStatus"]
    assert cds["name"] == domain_name
    assert [n["name"] for n in cds["nodes"]] == [n["name"] for n in domain["status"]["nodes"]]
    assert len(cds["nodes"]) == 2, "leader and worker on two nodes joined the IMEX domain"
    assert all(n["status"] == "Ready" and n["cliqueID"] for n in cds["nodes"])
    (channel,) = st["draResourceStatuses"]
    claims = channel["resourceClaimTemplateStatus"]["resourceClaimStatuses"]
    assert [c["state"] for c in claims] == ["allocated,reserved"] * 2
    poke = annotate(env.admin, LWS, "LeaderWorkerSet", f"{DEMO_NAME}-lws", ns)
    assert await env.idle_reconcile_writes(ns, poke) == []


def _tp8_manifest(model: str, image: str) -> str:
    """A model manifest with a TensorRT-LLM tp8/pp2 profile (what a 2-node group runs)."""
    digest = hashlib.sha256(model.encode()).hexdigest()
    return (
        f"{digest}:\n"
        f"  model: {model}\n"
        "  release: 1.8.4\n"
        "  tags:\n"
        "    feat_lora: 'false'\n"
        "    gpu: H100\n"
        "    gpu_device: 2330:10de\n"
        "    llm_engine: tensorrt_llm\n"
        "    pp: '2'\n"
        "    precision: fp8\n"
        "    profile: throughput\n"
        "    tp: '8'\n"
        f"  container_url: {image}\n"
        "  workspace: !workspace\n"
        "    components:\n"
        "      - dst: trtllm_engine\n"
        "        src:\n"
        f"          repo_id: ngc://nim/{model}:h100x8-pp2-fp8-throughput\n"
    )


def _publish_tp8_manifests(env: Env) -> None:
    """The samples' NIM images list a tp8 profile in their model manifest, as NGC's do."""
    catalog = extensions_of(env.cluster).catalog
    for model, image in (
        ("deepseek-ai/deepseek-r1", "nvcr.io/nim/deepseek-ai/deepseek-r1:1.7.3"),
        ("meta/llama-3.1-405b-instruct", "nvcr.io/nim/meta/llama-3.1-405b-instruct:1.8.4"),
    ):
        catalog.set(
            image.rsplit(":", 1)[0],
            logs=_tp8_manifest(model, image),
            command="model_manifest.yaml",
        )


async def _advertise_rdma(env: Env) -> None:
    """What NVIDIA's Network Operator (RDMA shared device plugin) adds to GPU nodes."""
    for node in (await env.admin.list("v1", "Node"))["items"]:
        capacity = node["status"].get("capacity") or {}
        if "nvidia.com/gpu" not in capacity or "rdma/rdma_shared_device_a" in capacity:
            continue
        extra = {"rdma/rdma_shared_device_a": "63"}
        await env.admin.patch(
            "v1",
            "Node",
            node["metadata"]["name"],
            {"status": {"capacity": extra, "allocatable": extra}},
            subresource="status",
        )


@pytest.mark.parametrize(
    "example", ["nimservice-multinode-mpi.yaml", "nimservice-multinode-ray.yaml"]
)
async def test_nvidia_multinode_samples_reach_ready_unchanged(env: Env, example: str) -> None:
    await _advertise_rdma(env)
    _publish_tp8_manifests(env)
    ns = "px-" + example.removeprefix("nimservice-multinode-").removesuffix(".yaml")
    objs = example_objects(EXAMPLES_DIR / example, ns)
    await apply_objects(env.admin, objs)
    svc = next(o for o in objs if o["kind"] == "NIMService")
    name = svc["metadata"]["name"]
    st = await ready(env.admin, ns, name)
    message = next(c["message"] for c in st["conditions"] if c["type"] == "Ready")
    assert message == f'leaderworkerset "{name}-lws" is ready'
    lws = await env.admin.get(LWS, "LeaderWorkerSet", f"{name}-lws", ns)
    size = svc["spec"]["multiNode"]["parallelism"]["pipeline"]
    assert lws["spec"]["leaderWorkerTemplate"]["size"] == size
    mpi = "mpi" in svc["spec"]["multiNode"]
    assert await exists(env.admin, "v1", "Secret", f"{name}-ssh-pk", ns) is mpi
    assert await exists(env.admin, "v1", "ConfigMap", f"{name}-mpi-config", ns) is mpi
    pods = (await env.admin.list("v1", "Pod", ns))["items"]
    group = [p for p in pods if p["metadata"]["name"].startswith(f"{name}-lws")]
    assert len(group) == size
    assert all(p["status"].get("phase") == "Running" for p in group)
    assert len({p["spec"]["nodeName"] for p in group}) == size, "one node per pipeline stage"
