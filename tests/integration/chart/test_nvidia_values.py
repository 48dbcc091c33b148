"""The chart takes the default values files of NVIDIA's k8s-nim-operator and gpu-operator
charts unchanged (tests/fixtures/nvidia_values: their keys and default values, as data):
what means something here is mapped, the rest is named as ignored in NOTES.txt, and the
GPU Operator's operand sections become the ClusterPolicy the chart creates. A typo in
one of our own keys is still refused."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from localcluster.cluster import LocalCluster
from nimctl_runtime.client import Client
from tests.integration.chart.helm import chart_crds, find, notes, render, require_helm

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia_values"


def nvidia_values(chart: str) -> dict[str, Any]:
    data: dict[str, Any] = YAML(typ="safe", pure=True).load((FIXTURES / f"{chart}.yaml").read_text())
    return data


def manager(objects: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


def test_nim_operator_values_install_with_their_settings_mapped() -> None:
    values = nvidia_values("k8s-nim-operator")
    op = values["operator"]
    objects = render(copy.deepcopy(values))
    deployment = find(objects, "Deployment")
    pod, container = manager(objects)
    assert deployment["spec"]["replicas"] == op["replicas"]
    # NVIDIA's own operator image is not ours to run; its pull settings are kept
    assert container["image"] == "nimctl:0.1.0"
    assert container["imagePullPolicy"] == op["image"]["pullPolicy"]
    assert f"--log-level={op['log']['level']}" in container["args"]
    assert f"--log-format={op['log']['encoder']}" in container["args"]
    # NVIDIA's args are nimctl run flags too: they come after `run`
    run_args = container["args"][container["args"].index("run") + 1 :]
    assert run_args[-len(op["args"]) :] == op["args"]
    assert container["resources"] == op["resources"]
    assert pod["tolerations"] == op["tolerations"]
    assert pod["affinity"] == op["affinity"]
    assert container["securityContext"]["capabilities"] == op["containerSecurityContext"]["capabilities"]
    # admissionController.tls.mode cert-manager: the serving certificate comes from cert-manager
    assert find(objects, "Certificate")["spec"]["issuerRef"]["kind"] == "Issuer"
    assert "ClusterPolicy" not in {o["kind"] for o in objects}
    text = notes(copy.deepcopy(values))
    ignored = text.split("Ignored values (they have no meaning in nimctl): ", 1)[1].split("\n\n")[0]
    for key in ("operator.image.repository/tag", "operator.log.development", "operator.log.stacktraceLevel", "nfd", "dynamo"):
        assert key in ignored, text
    assert "ghcr.io/nvidia/k8s-nim-operator is NVIDIA's operator" in ignored


def test_gpu_operator_values_install_and_make_the_cluster_policy() -> None:
    values = nvidia_values("gpu-operator")
    op = values["operator"]
    objects = render(copy.deepcopy(values))
    pod, container = manager(objects)
    assert container["image"] == "nimctl:0.1.0"  # operator.image is gpu-operator's image name
    assert container["imagePullPolicy"] == op["imagePullPolicy"]
    assert f"--log-level={op['logging']['level']}" in container["args"]
    assert container["resources"] == op["resources"]
    assert pod["nodeSelector"] == op["nodeSelector"]
    assert pod["priorityClassName"] == op["priorityClassName"]
    assert pod["tolerations"] == op["tolerations"]
    assert find(objects, "Deployment")["metadata"]["annotations"] == op["annotations"]

    policy = find(objects, "ClusterPolicy", "cluster-policy")
    spec = policy["spec"]
    assert spec["operator"] == {"runtimeClass": op["runtimeClass"]}
    for section in ("driver", "toolkit", "devicePlugin", "dcgmExporter", "gfd", "migManager", "validator"):
        for key in ("repository", "image", "version"):
            if values[section].get(key):
                assert spec[section][key] == values[section][key], (section, key)
    assert spec["mig"] == values["mig"] and spec["cdi"] == values["cdi"] and spec["psa"] == values["psa"]
    assert spec["hostPaths"] == values["hostPaths"]
    assert spec["daemonsets"]["tolerations"] == values["daemonsets"]["tolerations"]
    assert spec["daemonsets"]["priorityClassName"] == values["daemonsets"]["priorityClassName"]
    # what NVIDIA's chart translates, translated the same way
    driver = values["driver"]
    assert spec["driver"]["useNvidiaDriverCRD"] is driver["nvidiaDriverCRD"]["enabled"]
    assert "nvidiaDriverCRD" not in spec["driver"]
    assert spec["driver"]["upgradePolicy"]["podDeletion"] == driver["upgradePolicy"]["gpuPodDeletion"]
    assert spec["migManager"]["config"] == {"default": values["migManager"]["config"]["default"]}
    assert "config" not in spec["devicePlugin"]  # no config name: the plugin's built-in one
    assert spec["dcgmExporter"]["serviceMonitor"] == values["dcgmExporter"]["serviceMonitor"]
    # where NVIDIA's chart puts its own release: the validator's tag, the operands' labels
    assert spec["validator"]["version"] == "v26.7.0"
    assert spec["daemonsets"]["labels"] == {
        "helm.sh/chart": "gpu-operator-v26.7.0",
        "app.kubernetes.io/managed-by": "gpu-operator",
    }

    text = notes(copy.deepcopy(values))
    ignored = text.split("Ignored values (they have no meaning in nimctl): ", 1)[1].split("\n\n")[0]
    for key in ("operator.image", "operator.repository", "operator.cleanupCRD", "platform", "nfd", "gpuCluster", "draDriver", "node-feature-discovery"):
        assert key in ignored, text
    assert "driver" not in ignored.replace("draDriver", "")  # the operands are used, not ignored
    assert "ClusterPolicy cluster-policy: created" in text


async def test_the_cluster_policy_from_gpu_operator_values_is_valid(tmp_path: Path) -> None:
    """Its CRD (ours, NVIDIA's schema) accepts it as rendered: nothing is pruned from it."""
    require_helm()
    policy = find(render(nvidia_values("gpu-operator")), "ClusterPolicy")
    async with LocalCluster(simulator=False, workdir=tmp_path) as cluster, Client(str(cluster.kubeconfig_path)) as client:
        for crd in chart_crds():
            if crd["spec"]["group"] == "nvidia.com":
                await client.create(crd)
        await cluster_policy_served(client)
        created = await client.create(policy)
    for section, settings in policy["spec"].items():
        for key, value in settings.items():
            assert kept(value, created["spec"][section].get(key)), (section, key)


def kept(sent: Any, stored: Any) -> bool:
    """Everything sent is stored (the CRD may add defaults beside it)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(kept(v, stored.get(k)) for k, v in sent.items())
    return bool(sent == stored)


async def cluster_policy_served(client: Client) -> None:
    import asyncio

    from nimctl_runtime.client import ApiError

    async with asyncio.timeout(30):
        while True:
            try:
                await client.mapper.rest_mapping("nvidia.com/v1", "ClusterPolicy")
                return
            except ApiError:
                await asyncio.sleep(0.05)


def test_the_cluster_policy_is_made_only_when_asked_for() -> None:
    values = nvidia_values("gpu-operator")
    values["clusterPolicy"]["deployCR"] = False
    assert "ClusterPolicy" not in {o["kind"] for o in render(copy.deepcopy(values))}
    text = notes(values)
    assert "driver (clusterPolicy.deployCR is false)" in text
    minimal = find(render({"clusterPolicy": {"deployCR": True}}), "ClusterPolicy")
    assert set(minimal["spec"]) >= {"daemonsets", "driver", "toolkit", "devicePlugin", "operator"}


def test_config_maps_the_gpu_operator_chart_creates_are_created() -> None:
    values = nvidia_values("gpu-operator")
    values["devicePlugin"]["config"] = {
        "create": True, "name": "time-slicing", "default": "any", "data": {"any": "version: v1\n"},
    }
    objects = render(values)
    assert find(objects, "ConfigMap", "time-slicing")["data"] == {"any": "version: v1\n"}
    spec = find(objects, "ClusterPolicy")["spec"]
    assert spec["devicePlugin"]["config"] == {"name": "time-slicing", "default": "any"}


@pytest.mark.parametrize(
    ("level", "passed"),
    [("warn", "warning"), ("fatal", "error"), ("debug", "debug"), ("warning", "warning")],
)
def test_log_levels_of_either_chart_are_read(level: str, passed: str) -> None:
    for values in ({"operator": {"log": {"level": level}}}, {"operator": {"logging": {"level": level}}}):
        if level == "warning" and "logging" in values["operator"]:
            continue  # zap's names only in the gpu-operator chart
        _, container = manager(render(values))
        assert f"--log-level={passed}" in container["args"]


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"operator": {"replica": 2}}, "replica"),
        ({"operator": {"log": {"levle": "debug"}}}, "levle"),
        ({"operator": {"upgradeCrd": False}}, "upgradeCrd"),
        ({"clusterPolicy": {"deployCr": True}}, "deployCr"),
        ({"operator": {"admissionController": {"tls": {"secret": {"nmae": "x"}}}}}, "nmae"),
        ({"nodeSelctor": {}}, "nodeSelctor"),
    ],
)
def test_a_typo_in_our_own_keys_is_refused(values: dict[str, Any], named: str) -> None:
    helm = require_helm()
    with pytest.raises(helm.HelmValuesError) as err:
        render(values)
    assert named in str(err.value)


def test_a_typo_next_to_nvidia_values_is_still_refused() -> None:
    helm = require_helm()
    values = nvidia_values("k8s-nim-operator")
    values["operator"]["admissionControler"] = {"enabled": False}
    with pytest.raises(helm.HelmValuesError) as err:
        render(values)
    assert "admissionControler" in str(err.value)


def test_extra_objects_are_installed_as_nvidias_charts_install_them() -> None:
    values = {
        "extraObjects": [
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "extra", "namespace": "{{ .Release.Namespace }}"}},
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: extra-{{ .Release.Name }}\n",
        ]
    }
    objects = render(values, namespace="gpu-operator")
    assert find(objects, "ConfigMap", "extra")["metadata"]["namespace"] == "gpu-operator"
    find(objects, "ConfigMap", "extra-nimctl")


async def test_the_default_nvidiadriver_when_the_driver_is_managed_by_nvidiadriver_objects(tmp_path: Path) -> None:
    values = nvidia_values("gpu-operator")
    values["driver"]["nvidiaDriverCRD"]["enabled"] = True
    objects = render(copy.deepcopy(values))
    driver = find(objects, "NVIDIADriver", "default")
    expected = values["driver"]
    assert driver["spec"]["default"] is True
    assert driver["spec"]["driverType"] == expected["nvidiaDriverCRD"]["driverType"]
    for key in ("repository", "image", "version", "kernelModuleType", "usePrecompiled", "startupProbe", "manager", "rdma"):
        assert driver["spec"][key] == expected[key], key
    assert driver["spec"]["tolerations"] == values["daemonsets"]["tolerations"]
    assert driver["spec"]["upgradePolicy"]["podDeletion"] == expected["upgradePolicy"]["gpuPodDeletion"]
    # the ClusterPolicy then leaves the driver to it
    assert find(objects, "ClusterPolicy")["spec"]["driver"]["useNvidiaDriverCRD"] is True
    assert "version" not in find(objects, "ClusterPolicy")["spec"]["driver"]
    # and NVIDIADriver's CRD takes it as rendered
    async with LocalCluster(simulator=False, workdir=tmp_path) as cluster, Client(str(cluster.kubeconfig_path)) as client:
        for crd in chart_crds():
            if crd["metadata"]["name"] == "nvidiadrivers.nvidia.com":
                await client.create(crd)
        import asyncio

        from nimctl_runtime.client import ApiError

        async with asyncio.timeout(30):
            while True:
                try:
                    await client.mapper.rest_mapping("nvidia.com/v1alpha1", "NVIDIADriver")
                    break
                except ApiError:
                    await asyncio.sleep(0.05)
        created = await client.create(driver)
    for key, value in driver["spec"].items():
        assert kept(value, created["spec"].get(key)), key
    values["driver"]["nvidiaDriverCRD"]["deployDefaultCR"] = False
    assert "NVIDIADriver" not in {o["kind"] for o in render(values)}
    assert "NVIDIADriver" not in {o["kind"] for o in render(nvidia_values("gpu-operator"))}
