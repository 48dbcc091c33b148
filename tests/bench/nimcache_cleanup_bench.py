"""Benchmark: /healthz latency while 10 NIMCaches are deleted in a namespace of 3,000 pods.

Run: ``.venv/bin/python -m tests.bench.nimcache_cleanup_bench [--pods 3000] [--caches 10]``

Issue 19 item 3: deleting a NIMCache lists its Job's pods by label from the
cache; that read used to decode every cached Pod of the namespace on the event
loop (0.8 s of /healthz stall with 3,000 pods and 10 deletions). In one process,
as ``nimctl local`` runs: a LocalCluster, the operator (health probes on
loopback), 3,000 pods carrying the operator's managed-by label (so the filtered
Pod cache holds them all) and 10 NIMCaches whose caching Jobs run. /healthz is
probed every 10 ms while the NIMCaches are deleted; prints the probe latency
(p50, p99, max) and how many Pods the cache decoded during the deletions.
Aim: max under 100 ms. ``--decode-all`` restores the old read (decode the whole
namespace, then filter by label) for comparison. Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from localcluster.cluster import LocalCluster
from nimctl.cli import build_parser
from nimctl.demo import demo_objects
from nimctl.operator import compose_operator, install_crds
from nimctl_runtime.cache import store as store_mod
from nimctl_runtime.cache.store import NAMESPACE_INDEX, Store
from nimctl_runtime.client import Client, NotFound
from nimctl_runtime.labels import Selector
from nimctl_runtime.logsetup import configure_logging

NAMESPACE = "busy"
API = "apps.nvidia.com/v1alpha1"


def _pod(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"web-{i:05d}",
            "namespace": NAMESPACE,
            "labels": {
                "app.kubernetes.io/managed-by": "k8s-nim-operator",
                "app": f"web-{i % 50}",
            },
        },
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def _cache(i: int) -> dict[str, Any]:
    template = next(o for o in demo_objects(NAMESPACE) if o["kind"] == "NIMCache")
    obj = copy.deepcopy(template)
    obj["metadata"]["name"] = f"cache-{i}"
    return obj


async def _probe(url: str, stop: asyncio.Event, latencies: list[float]) -> None:
    async with aiohttp.ClientSession() as session:
        while not stop.is_set():
            started = time.perf_counter()
            async with session.get(url) as r:
                await r.read()
            latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.01)


def _decode_all_select(
    self: Store,
    selector: Selector | None = None,
    *,
    namespace: str | None = None,
    index: tuple[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The read before issue 19: decode every object of the namespace, then filter."""
    if index is not None:
        items = self.by_index(*index)
    elif namespace:
        items = self.by_index(NAMESPACE_INDEX, namespace)
    else:
        items = self.objects()
    if namespace:
        items = [o for o in items if o["metadata"].get("namespace") == namespace]
    if selector is not None:
        items = [o for o in items if selector.matches(o["metadata"].get("labels") or {})]
    return items


async def main(pods: int, caches: int, decode_all: bool) -> None:
    configure_logging("json", "critical")
    if decode_all:
        Store.select = _decode_all_select  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        async with LocalCluster(workdir=workdir, profile="many-nodes") as cluster:
            kubeconfig = cluster.write_kubeconfig(workdir / "admin.kubeconfig")
            async with Client(str(kubeconfig)) as admin, Client(str(kubeconfig)) as operator:
                await install_crds(admin)
                for obj in demo_objects(NAMESPACE)[:3]:  # namespace and secrets
                    await admin.create(obj)
                started = time.perf_counter()
                limit = asyncio.Semaphore(32)

                async def create(obj: dict[str, Any]) -> None:
                    async with limit:
                        await admin.create(obj)

                await asyncio.gather(*(create(_pod(i)) for i in range(pods)))
                print(f"{pods} pods created in {time.perf_counter() - started:.1f} s", flush=True)
                args = build_parser().parse_args(["local", "--disable-webhooks"])
                manager = await compose_operator(
                    operator,
                    args,
                    model_query=None,
                    leader_election=False,
                    health_probe_bind_address="127.0.0.1:0",
                    controller_groups=("nim",),
                )
                stop_manager = asyncio.Event()
                manager_task = asyncio.create_task(manager.start(stop_manager))
                await asyncio.gather(*(admin.create(_cache(i)) for i in range(caches)))

                async def jobs_running() -> bool:
                    for i in range(caches):
                        try:
                            await admin.get("batch/v1", "Job", f"cache-{i}-job", NAMESPACE)
                        except NotFound:
                            return False
                    return True

                async with asyncio.timeout(180):
                    while not await jobs_running():
                        await asyncio.sleep(0.5)
                    while (
                        manager.health_server is None or not manager.health_server.started.is_set()
                    ):
                        await asyncio.sleep(0.05)
                await asyncio.sleep(2)  # let the caches settle
                url = f"http://127.0.0.1:{manager.health_server.port}/healthz"
                latencies: list[float] = []
                stop_probe = asyncio.Event()
                probe = asyncio.create_task(_probe(url, stop_probe, latencies))
                await asyncio.sleep(1)
                baseline = len(latencies)

                decoded = [0]
                real_decode = store_mod.decode

                def counting(data: bytes) -> dict[str, Any]:
                    decoded[0] += 1
                    return real_decode(data)

                store_mod.decode = counting
                started = time.perf_counter()
                await asyncio.gather(
                    *(admin.delete(API, "NIMCache", f"cache-{i}", NAMESPACE) for i in range(caches))
                )

                async def all_gone() -> bool:
                    left = await admin.list(API, "NIMCache", NAMESPACE)
                    return not left["items"]

                async with asyncio.timeout(180):
                    while not await all_gone():
                        await asyncio.sleep(0.2)
                took = time.perf_counter() - started
                await asyncio.sleep(1)
                store_mod.decode = real_decode
                stop_probe.set()
                await probe
                during = sorted(latencies[baseline:]) or [0.0]
                ms = [x * 1000 for x in during]
                p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
                print(
                    f"deleting {caches} NIMCaches among {pods} cached pods took {took:.1f} s; "
                    f"/healthz over {len(ms)} probes: p50 {statistics.median(ms):.1f} ms, "
                    f"p99 {p99:.1f} ms, max {ms[-1]:.1f} ms (aim: max < 100 ms)"
                )
                print(f"objects decoded by the operator's caches meanwhile: {decoded[0]}")
                stop_manager.set()
                await asyncio.wait_for(manager_task, 60)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=3000)
    parser.add_argument("--caches", type=int, default=10)
    parser.add_argument("--decode-all", action="store_true", help="the read before issue 19")
    ns = parser.parse_args()
    asyncio.run(main(ns.pods, ns.caches, ns.decode_all))
