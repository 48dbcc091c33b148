"""Required pod anti-affinity and affinity on localcluster, through the API as a user sees them.

Three nodes (the default profile). Pods that must not share a node take one
node each; the fourth stays Pending with kube-scheduler's message and a
``FailedScheduling`` Event, and binds once a node frees up. A pod that must run
beside another waits for it, then lands on its node.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from localcluster import LocalCluster
from nimctl_runtime.client import Client
from tests.integration.controllers.harness import wait_for

NS = "default"
HOST = "kubernetes.io/hostname"


def _pod(name: str, app: str, **affinity: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": app}},
        "spec": {
            "containers": [{"name": "main", "image": "nginx:1.27"}],
            "affinity": affinity,
        },
    }


def _required(app: str) -> dict[str, Any]:
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": HOST}
        ]
    }


async def _node_of(admin: Client, name: str) -> str | None:
    pod = await admin.get("v1", "Pod", name, NS)
    node: str | None = pod["spec"].get("nodeName")
    return node


async def _unschedulable(admin: Client, name: str) -> dict[str, Any] | None:
    pod = await admin.get("v1", "Pod", name, NS)
    for cond in pod.get("status", {}).get("conditions", []):
        if cond["type"] == "PodScheduled" and cond["status"] == "False":
            found: dict[str, Any] = cond
            return found
    return None


async def test_anti_affine_pods_spread_and_the_extra_one_waits_for_a_free_node(
    tmp_path: Path,
) -> None:
    async with LocalCluster(workdir=tmp_path) as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            for i in range(3):
                await admin.create(_pod(f"web-{i}", "web", podAntiAffinity=_required("web")))

            async def placed() -> dict[str, str] | None:
                nodes = {f"web-{i}": await _node_of(admin, f"web-{i}") for i in range(3)}
                return {k: v for k, v in nodes.items() if v} if all(nodes.values()) else None

            spread = await wait_for(placed, timeout=30)
            assert len(set(spread.values())) == 3

            await admin.create(_pod("web-3", "web", podAntiAffinity=_required("web")))
            cond = await wait_for(lambda: _unschedulable(admin, "web-3"), timeout=30)
            assert cond["reason"] == "Unschedulable"
            assert cond["message"] == (
                "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules. "
                "preemption: 0/3 nodes are available: 3 No preemption victims found for "
                "incoming pod."
            )

            async def event() -> list[dict[str, Any]]:
                items = (await admin.list("v1", "Event", NS))["items"]
                return [
                    e
                    for e in items
                    if e.get("reason") == "FailedScheduling"
                    and e["involvedObject"]["name"] == "web-3"
                ]

            assert (await wait_for(event, timeout=30))[0]["message"] == cond["message"]

            # A pod the others' anti-affinity selects is kept off too, by their rules.
            await admin.create(_pod("plain-web", "web"))
            plain = await wait_for(lambda: _unschedulable(admin, "plain-web"), timeout=30)
            assert plain["message"].startswith(
                "0/3 nodes are available: 3 node(s) didn't satisfy existing pods "
                "anti-affinity rules."
            )

            await admin.delete("v1", "Pod", "plain-web", NS, grace_period_seconds=0)
            await admin.delete("v1", "Pod", "web-0", NS, grace_period_seconds=0)

            async def web3_bound() -> str | None:
                return await _node_of(admin, "web-3")

            assert await wait_for(web3_bound, timeout=30) == spread["web-0"]


async def test_an_affine_pod_waits_for_its_partner_then_joins_its_node(tmp_path: Path) -> None:
    async with LocalCluster(workdir=tmp_path) as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            await admin.create(_pod("sidecar", "sidecar", podAffinity=_required("cache")))
            cond = await wait_for(lambda: _unschedulable(admin, "sidecar"), timeout=30)
            assert cond["message"].startswith(
                "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."
            )
            await admin.create(_pod("cache", "cache"))

            async def together() -> tuple[str | None, str | None] | None:
                pair = (await _node_of(admin, "cache"), await _node_of(admin, "sidecar"))
                return pair if all(pair) else None

            cache_node, sidecar_node = await wait_for(together, timeout=30)
            assert cache_node == sidecar_node
