"""Issue 18 (memory): the operator's cache, composed as in production, holds slim CRDs and Nodes.

With the operator running on localcluster: the cached CRDs carry no schemas yet
still say which kinds they serve and whether they are established, the cached
Nodes keep no label pairs beside them yet read back with all their labels, and
a NIMService still converges and prunes (tests/integration/platforms/test_late_crd
shows a CRD installed later is still noticed through the slim cache).

Prune goes through the store's owner-UID index, whose one-key values are kept
without a set.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from controllers.nimservice import crd_established, crd_gvks
from nimctl.demo import apply_objects, demo_objects
from tests.integration.controllers.harness import (
    API,
    cluster_with_crds,
    get_state,
    settle,
    start_operator,
    wait_for,
)

pytestmark = pytest.mark.asyncio

CRD = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
NS = "slim"
SCALE = {"enabled": True, "hpa": {"minReplicas": 1, "maxReplicas": 2}}


async def test_slim_crds_and_nodes_and_the_operator_still_converges_and_prunes(
    tmp_path: Path,
) -> None:
    async with cluster_with_crds(tmp_path) as (cluster, admin):
        op = await start_operator(
            cluster.write_kubeconfig(tmp_path / "op.kubeconfig", user="nimctl-operator")
        )
        try:
            await apply_objects(admin, demo_objects(NS))
            svc = next(o for o in demo_objects(NS) if o["kind"] == "NIMService")
            name = svc["metadata"]["name"]

            async def ready() -> bool:
                return await get_state(admin, "NIMService", name, NS) == "Ready"

            await wait_for(ready, timeout=120)

            cache = op.manager.cache
            live = await admin.get(*CRD, "nimservices.apps.nvidia.com")
            cached = await cache.get(*CRD, "nimservices.apps.nvidia.com")
            assert crd_gvks(cached) == crd_gvks(live)
            assert crd_established(cached) == crd_established(live)
            assert all("schema" not in v for v in cached["spec"]["versions"])
            assert len(pickle.dumps(cached)) * 20 < len(pickle.dumps(live))

            nodes = await cache.list("v1", "Node")
            live_nodes = (await admin.list("v1", "Node"))["items"]
            assert nodes and {
                n["metadata"]["name"]: n["metadata"].get("labels") for n in nodes
            } == {n["metadata"]["name"]: n["metadata"].get("labels") for n in live_nodes}
            informer = cache.informers()[("v1", "Node")]
            assert all(not e.labels for e in informer.store._items.values())

            # Prune reads the owner-UID index: an HPA the render no longer contains
            # (autoscaling turned off) is deleted by the operator.
            hpa = ("autoscaling/v2", "HorizontalPodAutoscaler")
            await admin.patch(
                API, "NIMService", name, {"spec": {"scale": SCALE, "replicas": None}}, namespace=NS
            )

            async def hpa_names() -> list[str]:
                return [h["metadata"]["name"] for h in (await admin.list(*hpa, NS))["items"]]

            assert await wait_for(hpa_names, timeout=60) == [name]
            await admin.patch(
                API, "NIMService", name, {"spec": {"scale": {"enabled": False}}}, namespace=NS
            )

            async def pruned() -> bool:
                return not await hpa_names()

            await wait_for(pruned, timeout=60)
        finally:
            await op.shutdown()


async def test_an_unlabelled_service_account_of_the_same_name_is_adopted_then_left_alone(
    tmp_path: Path,
) -> None:
    """ServiceAccounts are label-filtered: one made by someone else is still found and adopted."""
    async with cluster_with_crds(tmp_path) as (cluster, admin):
        objs = demo_objects(NS)
        svc = next(o for o in objs if o["kind"] == "NIMService")
        name = svc["metadata"]["name"]
        await apply_objects(admin, [o for o in objs if o["kind"] == "Namespace"])
        await admin.create(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": NS},
            }
        )
        op = await start_operator(
            cluster.write_kubeconfig(tmp_path / "op.kubeconfig", user="nimctl-operator")
        )
        try:
            await apply_objects(admin, objs)

            async def ready() -> bool:
                return await get_state(admin, "NIMService", name, NS) == "Ready"

            await wait_for(ready, timeout=120)
            sa = await admin.get("v1", "ServiceAccount", name, NS)
            assert sa["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-nim-operator"
            assert sa["metadata"]["ownerReferences"][0]["kind"] == "NIMService"
            sa_writes = [w for w in op.client.object_writes() if "/serviceaccounts" in w[1]]
            # Refused creates (the cache cannot see it) until the adopting update lands.
            assert [w[0] for w in sa_writes].count("PUT") == 1 and len(sa_writes) <= 3, sa_writes
            await settle(op)
            assert [w for w in op.client.object_writes() if "/serviceaccounts" in w[1]] == sa_writes
        finally:
            await op.shutdown()
