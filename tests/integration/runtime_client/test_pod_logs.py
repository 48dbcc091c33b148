"""Client.pod_logs reads what a container printed (the NIMCache controller relies on it)."""

from __future__ import annotations

import asyncio

import pytest

from localcluster import LocalCluster
from localcluster.extensions import extensions_of
from nimctl_runtime.client import Client, NotFound, load_config


async def test_pod_logs_returns_the_containers_output() -> None:
    async with LocalCluster() as cluster:
        extensions_of(cluster).catalog.set("example.com/printer:1", logs="line one\nline two\n", exit_code=0)
        async with Client(load_config(str(cluster.kubeconfig_path))) as client:
            await client.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "printer", "namespace": "default"},
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "main", "image": "example.com/printer:1"}],
                    },
                }
            )
            async with asyncio.timeout(30):
                while True:
                    pod = await client.get("v1", "Pod", "printer", "default")
                    if (pod.get("status") or {}).get("phase") == "Succeeded":
                        break
                    await asyncio.sleep(0.1)
            text = await client.pod_logs("printer", "default", container="main")
            assert text == "line one\nline two\n"
            with pytest.raises(NotFound):
                await client.pod_logs("absent", "default")
