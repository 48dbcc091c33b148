"""`helm install -f <NVIDIA's values.yaml>` on a LocalCluster with RBAC enforced, for
both of NVIDIA's charts: the release installs unchanged and the operator runs as the
chart's pod under the chart's ClusterRole. With the gpu-operator file, the ClusterPolicy
the release created from NVIDIA's operand sections is reconciled to ready, its operands
deployed as those sections say; with the k8s-nim-operator file (webhook certificates
from cert-manager, stood in for here), a NIM is served."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from nimctl_runtime.client import ApiError
from tests.integration.chart.helm import find, render
from tests.integration.chart.scenario import (
    NS,
    example,
    poll,
    start_installed,
    state_of,
    stop_installed,
)
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


def _as_cert_manager_would(objects: list[dict[str, Any]]) -> None:
    """Stand in for cert-manager (not in localcluster): the Certificate's Secret and the CA
    its cainjector writes into the webhook configurations, taken from the chart's own
    generated-certificate mode."""
    generated = render({"operator": {"admissionController": {"tls": {"mode": "generated"}}}}, namespace=NS)
    secret = find(generated, "Secret")
    bundles = {
        o["kind"]: [w["clientConfig"]["caBundle"] for w in o["webhooks"]]
        for o in generated
        if o["kind"].endswith("WebhookConfiguration")
    }
    certificate = find(objects, "Certificate")
    assert certificate["spec"]["secretName"] == secret["metadata"]["name"]
    objects[:] = [o for o in objects if o["kind"] not in ("Certificate", "Issuer")]
    objects.insert(0, secret)
    for obj in objects:
        if obj["kind"].endswith("WebhookConfiguration"):
            for webhook, bundle in zip(obj["webhooks"], bundles[obj["kind"]], strict=True):
                webhook["clientConfig"]["caBundle"] = bundle


@pytest.mark.timeout(600)
async def test_nim_operator_values_install_and_serve_a_nim(tmp_path: Path) -> None:
    values = nvidia_values("k8s-nim-operator")
    env = await start_installed(tmp_path, copy.deepcopy(values), edit=_as_cert_manager_would)
    try:
        assert env.operator.args.leader_elect
        assert env.operator.args.enable_webhooks
        for doc in example("nim-minimal.yaml", "nim-service"):
            await env.admin.create(doc)
        await state_of(env.admin, "apps.nvidia.com/v1alpha1", "NIMService", "meta-llama-3-2-1b-instruct", "nim-service", {"Ready"})
        # the webhooks answer, with the certificate the (stand-in) cert-manager issued
        bad = {
            "apiVersion": "apps.nvidia.com/v1alpha1",
            "kind": "NIMService",
            "metadata": {"name": "bad", "namespace": "nim-service"},
            "spec": {"image": {"repository": "nvcr.io/nim/x", "tag": "1"}, "authSecret": "s", "expose": {"service": {"port": 8000}}},
        }
        with pytest.raises(ApiError) as err:
            await env.admin.create(bad)
        assert 'admission webhook "vnimservice-v1alpha1.kb.io" denied the request' in err.value.message
    finally:
        await stop_installed(env)
