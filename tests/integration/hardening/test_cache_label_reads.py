"""Issue 19 item 3: Cache.list by namespace and labels decodes only the objects it returns.

The NIMCache cleanup lists a Job's pods by label in the NIMCache's namespace; in a
namespace of thousands of pods that used to decode every pod on the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from localcluster.cluster import LocalCluster
from nimctl_runtime.cache import Cache
from nimctl_runtime.cache import store as store_mod
from nimctl_runtime.client import Client, load_config


def config_map(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "busy", "labels": labels},
        "data": {"k": "v"},
    }


async def test_list_by_label_in_a_busy_namespace_decodes_only_matches(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with Client(load_config(str(cluster.kubeconfig_path))) as client:
        await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "busy"}})
        writes = [client.create(config_map(f"web-{i}", {"app": "web"})) for i in range(300)]
        writes += [client.create(config_map(f"job-{i}", {"job-name": "j"})) for i in range(3)]
        await asyncio.gather(*writes)
        cache = Cache(client)
        stop = asyncio.Event()
        task = asyncio.create_task(cache.run(stop))
        try:
            assert len(await cache.list("v1", "ConfigMap", "busy")) >= 303
            decoded = [0]
            real = store_mod.decode

            def counting(data: bytes) -> dict[str, Any]:
                decoded[0] += 1
                return real(data)

            monkeypatch.setattr(store_mod, "decode", counting)
            found = await cache.list("v1", "ConfigMap", "busy", label_selector={"job-name": "j"})
            assert [o["metadata"]["name"] for o in found] == ["job-0", "job-1", "job-2"]
            assert decoded[0] == 3
            none = await cache.list("v1", "ConfigMap", "busy", label_selector="job-name=other")
            assert none == [] and decoded[0] == 3
        finally:
            stop.set()
            await task
