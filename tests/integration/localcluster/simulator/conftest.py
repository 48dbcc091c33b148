"""Fixtures: a LocalCluster with the simulator and a kubernetes-asyncio ApiClient on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from localcluster.cluster import LocalCluster
from localcluster.extensions import Extensions, extensions_of


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(debug_api=True) as c:
        yield c


@pytest.fixture
def ext(cluster: LocalCluster) -> Extensions:
    return extensions_of(cluster)


@pytest.fixture
async def api(cluster: LocalCluster) -> AsyncIterator[k8s.ApiClient]:
    configuration = k8s.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(cluster.kubeconfig_path), client_configuration=configuration
    )
    async with k8s.ApiClient(configuration) as api_client:
        yield api_client
