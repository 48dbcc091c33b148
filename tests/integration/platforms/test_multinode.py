"""Multi-node NIMServices on localcluster: MPI objects created once, Ray without them.

The operator writes each MPI object (``<name>-mpi-config``,
``<name>-mpi-start-script``, Secret ``<name>-ssh-pk``) exactly once, as the
audit log shows; an idle reconcile writes nothing; Ray mode creates none of
them. Readiness comes from the LeaderWorkerSet's ``Available`` condition.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from nimctl_runtime.cli import DEMO_NAME, apply_objects
from tests.integration.controllers.harness import wait_for
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
    await ready(env.admin, ns)
    assert await env.idle_reconcile_writes(ns, poke) == []
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
