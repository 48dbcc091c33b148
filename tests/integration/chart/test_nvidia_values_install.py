"""`helm install -f <NVIDIA's gpu-operator values.yaml>` on a LocalCluster with RBAC
enforced: the release installs unchanged, the operator runs as the chart's pod under
the chart's ClusterRole, and the ClusterPolicy the release created from NVIDIA's
operand sections is reconciled to ready, its operands deployed as those sections say."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from tests.integration.chart.scenario import NS, poll, start_installed, state_of, stop_installed
from tests.integration.chart.test_nvidia_values import nvidia_values


@pytest.mark.timeout(600)
async def test_gpu_operator_values_install_and_their_cluster_policy_gets_ready(tmp_path: Path) -> None:
    values = nvidia_values("gpu-operator")
    env = await start_installed(tmp_path, copy.deepcopy(values))
    try:
        assert env.operator.args.log_level == values["operator"]["logging"]["level"]
        policy = await state_of(env.admin, "nvidia.com/v1", "ClusterPolicy", "cluster-policy", None, {"ready"})
        assert policy["spec"]["driver"]["version"] == values["driver"]["version"]

        async def device_plugin_image() -> str | None:
            daemonsets = (await env.admin.list("apps/v1", "DaemonSet", NS))["items"]
            for ds in daemonsets:
                if ds["metadata"]["name"] == "nvidia-device-plugin-daemonset":
                    return str(ds["spec"]["template"]["spec"]["containers"][0]["image"])
            return None

        image = await poll(device_plugin_image, "the device plugin DaemonSet")
        plugin = values["devicePlugin"]
        assert image == f"{plugin['repository']}/{plugin['image']}:{plugin['version']}"
    finally:
        await stop_installed(env)
