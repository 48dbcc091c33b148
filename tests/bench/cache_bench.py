"""Benchmark: cache sync of 10,000 mid-size (~3 KB JSON) objects.

Run: ``.venv/bin/python -m tests.bench.cache_bench [--objects N] [--http]``

Prints the time for an informer to list and store N Deployment-like objects (JSON
pages of 500 decoded as the client decodes them, managedFields stripped, GC paused)
and the resident memory the synced store costs per object, compared with the JSON
size per object. Aim (issue 4): < 2 s and <= 1.5x the JSON size per object.
With ``--http`` it also syncs the same objects from a LocalCluster over HTTPS.
Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import time
from collections.abc import AsyncIterator
from typing import Any

from nimctl_runtime.cache.informer import SharedInformer
from nimctl_runtime.client.client import WatchEvent, decode_json

PAGE = 500


def deployment(i: int) -> dict[str, Any]:
    """A Deployment-like object of about 3 KB JSON, with two managedFields entries."""
    name = f"nim-{i:05d}"
    labels = {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/managed-by": "k8s-nim-operator",
        "app.kubernetes.io/part-of": "nim-service",
    }
    env = [{"name": f"NIM_VAR_{j}", "value": f"value-{j}-{i}"} for j in range(28)]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": f"ns-{i % 20}",
            "uid": f"0000{i:08d}-aaaa-bbbb-cccc-ddddeeeeffff",
            "resourceVersion": str(1000 + i),
            "generation": 3,
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": labels,
            "annotations": {"nvidia.com/last-applied-hash": "f" * 64},
            "ownerReferences": [
                {
                    "apiVersion": "apps.nvidia.com/v1alpha1",
                    "kind": "NIMService",
                    "name": name,
                    "uid": f"1111{i:08d}-aaaa-bbbb-cccc-ddddeeeeffff",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
            "managedFields": [
                {
                    "manager": "nimctl",
                    "operation": "Apply",
                    "apiVersion": "apps/v1",
                    "time": "2026-01-01T00:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {"f:replicas": {}, "f:template": {"f:spec": {}}}},
                },
                {
                    "manager": "kube-controller-manager",
                    "operation": "Update",
                    "apiVersion": "apps/v1",
                    "subresource": "status",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:status": {"f:conditions": {}, "f:replicas": {}}},
                },
            ],
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "nim",
                            "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
                            "env": env,
                            "ports": [{"name": "api", "containerPort": 8000}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            "readinessProbe": {
                                "httpGet": {"path": "/v1/health/ready", "port": "api"},
                                "periodSeconds": 10,
                            },
                        }
                    ]
                },
            },
        },
        "status": {
            "replicas": 1,
            "readyReplicas": 1,
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "MinimumReplicasAvailable",
                    "message": "Deployment has minimum availability.",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    }


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


class PagedLister:
    """Serves pre-encoded JSON list pages; decoding them is part of the measured sync."""

    def __init__(self, objects: list[dict[str, Any]]) -> None:
        self.pages: list[bytes] = []
        for start in range(0, len(objects), PAGE):
            meta: dict[str, Any] = {"resourceVersion": "99999"}
            if start + PAGE < len(objects):
                meta["continue"] = str(start + PAGE)
            body = {
                "kind": "DeploymentList",
                "metadata": meta,
                "items": objects[start : start + PAGE],
            }
            self.pages.append(json.dumps(body, separators=(",", ":")).encode())
        self.watch_started = asyncio.Event()

    async def list(
        self, *, resource_version: str | None, limit: int | None, continue_: str | None
    ) -> dict[str, Any]:
        index = int(continue_ or 0) // PAGE
        result: dict[str, Any] = decode_json(self.pages[index])
        return result

    async def _watch(self) -> AsyncIterator[WatchEvent]:
        self.watch_started.set()
        await asyncio.Event().wait()
        yield WatchEvent("BOOKMARK", {})

    def watch(
        self, *, resource_version: str, timeout_seconds: int, allow_bookmarks: bool
    ) -> AsyncIterator[WatchEvent]:
        return self._watch()


async def bench_in_process(count: int) -> None:
    objects = [deployment(i) for i in range(count)]
    json_sizes = [len(json.dumps(o, separators=(",", ":"))) for o in objects]
    stripped = []
    for o in objects:
        meta = dict(o["metadata"])
        meta.pop("managedFields")
        stripped.append(len(json.dumps({**o, "metadata": meta}, separators=(",", ":"))))
    lister = PagedLister(objects)
    del objects
    gc.collect()
    informer = SharedInformer(lister, api_version="apps/v1", kind="Deployment")
    rss_before = rss_bytes()
    started = time.perf_counter()
    cpu_started = time.process_time()
    informer.start()
    await informer.wait_for_sync()
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    await lister.watch_started.wait()
    gc.collect()
    rss_after = rss_bytes()
    per_object = (rss_after - rss_before) / count
    mean_json = sum(json_sizes) / count
    mean_stripped = sum(stripped) / count
    print(f"objects                      {count}")
    print(
        f"JSON per object              {mean_json:,.0f} B ({mean_stripped:,.0f} B without managedFields)"
    )
    print(f"sync time (list+decode+store) {elapsed:.3f} s  ({count / elapsed:,.0f} objects/s)")
    print(f"  of which CPU time           {cpu:.3f} s  (wall > CPU means a busy machine)")
    print(f"resident memory per object   {per_object:,.0f} B")
    print(f"  ratio to JSON size         {per_object / mean_json:.2f}x  (aim <= 1.5x)")
    print(f"stored bytes per object      {informer.store.size_bytes() / count:,.0f} B")
    t0 = time.perf_counter()
    sample = informer.store.by_index("namespace", "ns-3")
    print(f"list one namespace ({len(sample)} objs)  {(time.perf_counter() - t0) * 1000:.1f} ms")
    await informer.stop()


async def bench_http(count: int) -> None:
    from localcluster.cluster import LocalCluster
    from nimctl_runtime.cache import Cache
    from nimctl_runtime.client import Client, load_config

    async with (
        LocalCluster(simulator=False) as cluster,
        Client(load_config(str(cluster.kubeconfig_path))) as client,
    ):
        await client.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}
        )
        sem = asyncio.Semaphore(64)

        async def create(i: int) -> None:
            obj = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i:05d}", "namespace": "bench"},
                "data": {f"k{j}": "x" * 100 for j in range(25)},
            }
            async with sem:
                await client.create(obj)

        t0 = time.perf_counter()
        await asyncio.gather(*(create(i) for i in range(count)))
        print(f"http: created {count} ConfigMaps in {time.perf_counter() - t0:.1f} s")
        for watch_list in (False, True):
            cache = Cache(client, watch_list=watch_list)
            t0 = time.perf_counter()
            await cache.get_informer("v1", "ConfigMap")
            await cache.start()
            await cache.wait_for_sync(300)
            mode = "streaming list" if watch_list else "paged LIST"
            print(f"http: cache sync of {count} objects ({mode})  {time.perf_counter() - t0:.3f} s")
            await cache.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--http", action="store_true", help="also sync from a LocalCluster")
    args = parser.parse_args()
    asyncio.run(bench_in_process(args.objects))
    if args.http:
        asyncio.run(bench_http(args.objects))


if __name__ == "__main__":
    main()
