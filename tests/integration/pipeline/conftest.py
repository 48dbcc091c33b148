"""One LocalCluster with the CRDs, labelled GPU nodes and the operator, per test module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from nimctl_runtime.client import Client
from tests.integration.controllers.harness import Operator, cluster_with_crds, start_operator

GPU_NODE_PRODUCTS = {"gpu-node-0": "NVIDIA-H100-80GB-HBM3", "gpu-node-1": "NVIDIA-L4"}


class Env:
    def __init__(self, cluster: Any, admin: Client, operator: Operator, tmp: Path) -> None:
        self.cluster = cluster
        self.admin = admin
        self.operator = operator
        self.tmp = tmp


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("pipeline")
    async with cluster_with_crds(tmp, profile="many-nodes") as (cluster, admin):
        for node in (await admin.list("v1", "Node"))["items"]:
            product = GPU_NODE_PRODUCTS.get(node["metadata"]["name"])
            if product:
                labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product}
                await admin.patch(
                    "v1", "Node", node["metadata"]["name"], {"metadata": {"labels": labels}}
                )
        operator = await start_operator(cluster.write_kubeconfig(tmp / "operator.kubeconfig"))
        try:
            yield Env(cluster, admin, operator, tmp)
        finally:
            await operator.shutdown()
