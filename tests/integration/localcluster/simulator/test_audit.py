"""The audit log records exactly the calls a client made, attributed to its user."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from localcluster.cluster import LocalCluster
from localcluster.extensions import Extensions


@pytest.fixture
async def script_api(cluster: LocalCluster, tmp_path: Path) -> AsyncIterator[k8s.ApiClient]:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "script.kubeconfig", user="script")
    configuration = k8s.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(kubeconfig), client_configuration=configuration
    )
    async with k8s.ApiClient(configuration) as api_client:
        yield api_client


async def test_audit_log_records_a_scripted_sequence(
    cluster: LocalCluster, ext: Extensions, script_api: k8s.ApiClient, api: k8s.ApiClient
) -> None:
    core = k8s.CoreV1Api(script_api)
    await core.create_namespaced_config_map(
        "default", {"metadata": {"name": "settings", "labels": {"app": "demo"}}, "data": {"a": "1"}}
    )
    await core.read_namespaced_config_map("settings", "default")
    await core.list_namespaced_config_map("default", label_selector="app=demo")
    await core.patch_namespaced_config_map("settings", "default", {"data": {"a": "2"}})
    await core.delete_namespaced_config_map("settings", "default")
    try:
        await core.read_namespaced_config_map("settings", "default")
    except k8s.ApiException as exc:
        assert exc.status == 404
    await k8s.CoreV1Api(api).list_namespace()  # the admin's call is someone else's

    assert ext.audit.calls(user="script") == [
        ("create", "configmaps", "", "default", "settings"),
        ("get", "configmaps", "", "default", "settings"),
        ("list", "configmaps", "", "default", ""),
        ("patch", "configmaps", "", "default", "settings"),
        ("delete", "configmaps", "", "default", "settings"),
        ("get", "configmaps", "", "default", "settings"),
    ]
    assert [r.code for r in ext.audit.records(user="script")] == [201, 200, 200, 200, 200, 404]
    assert ext.audit.calls(user="admin")[-1] == ("list", "namespaces", "", "", "")

    async with (
        aiohttp.ClientSession() as session,
        session.get(
            f"{cluster.url}/debug/audit?user=script&verb=patch",
            headers={"Authorization": f"Bearer {cluster.token_for('admin')}"},
            ssl=cluster.client_ssl_context(),
        ) as resp,
    ):
        items = (await resp.json())["items"]
    assert [(i["verb"], i["resource"], i["name"], i["code"], i["user"]) for i in items] == [
        ("patch", "configmaps", "settings", 200, "script")
    ]
