"""What an NVIDIADriver renders: one driver DaemonSet per pool, ClusterPolicy's driver inside."""

from __future__ import annotations

from typing import Any

import pytest
from ruamel.yaml import YAML

from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver
from platforms.contract import Observed, ReconcileError
from platforms.gpu.nvidiadriver import NVIDIADriverContract
from platforms.gpu.readiness import daemonset_ready
from tests.unit.gpu_nvidiadriver.helpers import NS, SAMPLE, driver, facts, node, sample

CONTRACT = NVIDIADriverContract()
NODES = [
    node("a1", labels={"pool": "a"}),
    node("a2", labels={"pool": "a"}, version="24.04"),
    node("b1", labels={"pool": "b"}),
]


def _daemonsets(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == "DaemonSet"}


def _ctr(ds: dict[str, Any], name: str) -> dict[str, Any]:
    pod = ds["spec"]["template"]["spec"]
    return next(
        c for c in [*pod.get("initContainers", []), *pod["containers"]] if c["name"] == name
    )


def test_two_os_pools_render_two_daemonsets_with_their_selectors_and_images() -> None:
    cr = driver("a", selector={"pool": "a"})
    objs = CONTRACT.render(cr, facts(NODES, [cr]))
    dss = _daemonsets(objs)
    assert len(dss) == 2
    by_os = {ds["metadata"]["labels"]["nvidia.com/node.os-version"]: ds for ds in dss.values()}
    assert set(by_os) == {"ubuntu22.04", "ubuntu24.04"}
    ds = by_os["ubuntu24.04"]
    name = ds["metadata"]["name"]
    assert name.startswith("nvidia-gpu-driver-ubuntu24.04-")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {
        "nvidia.com/gpu.deploy.driver": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu-operator.driver.owner": "a",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04",
        "pool": "a",
    }
    assert ds["spec"]["selector"] == {"matchLabels": {"app": name}}
    assert ds["spec"]["template"]["metadata"]["labels"]["app"] == name
    assert ds["metadata"]["labels"]["app.kubernetes.io/component"] == "nvidia-driver"
    assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}
    assert _ctr(ds, "nvidia-driver-ctr")["image"] == "nvcr.io/nvidia/driver:570.148.08-ubuntu24.04"
    assert pod["serviceAccountName"] == "nvidia-gpu-driver-a-ubuntu24.04"
    assert ds["metadata"]["namespace"] == NS
    owner = ds["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("NVIDIADriver", "a", True)


def test_the_nvidiadriver_items_nvidia_renders() -> None:
    """args after init, tolerations added to the GPU one, nodeSelector on the pod, void
    devices on driver and peermem, secretEnv on the GDS/GDRCopy sidecars, the vGPU-manager
    anti-affinity, the state label and NVIDIA's driver RBAC."""
    cr = driver(
        "a",
        selector={"pool": "a"},
        args=["--foo"],
        tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
        secretEnv="creds",
        rdma={"enabled": True},
        gds={"enabled": True, "repository": "nvcr.io/nvidia/cloud-native", "image": "nvidia-fs",
             "version": "2.20.5"},
        gdrcopy={"enabled": True, "repository": "nvcr.io/nvidia/cloud-native",
                 "image": "gdrdrv", "version": "v2.5"},
    )  # fmt: skip
    objs = CONTRACT.render(cr, facts(NODES[:1], [cr]))
    ds = next(iter(_daemonsets(objs).values()))
    pod = ds["spec"]["template"]["spec"]
    assert _ctr(ds, "nvidia-driver-ctr")["args"] == ["init", "--foo"]
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "k", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert pod["nodeSelector"]["pool"] == "a"
    for name in ("nvidia-driver-ctr", "nvidia-peermem-ctr"):
        assert {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"} in _ctr(ds, name)["env"]
    for name in ("nvidia-driver-ctr", "nvidia-fs-ctr", "nvidia-gdrcopy-ctr"):
        assert _ctr(ds, name)["envFrom"] == [{"secretRef": {"name": "creds"}}]
    assert (
        _ctr(ds, "nvidia-fs-ctr")["image"]
        == "nvcr.io/nvidia/cloud-native/nvidia-fs:2.20.5-ubuntu22.04"
    )
    terms = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms[0]["labelSelector"]["matchExpressions"][0]["values"] == [
        "nvidia-driver",
        "nvidia-vgpu-manager",
    ]
    for obj in objs:
        assert obj["metadata"]["labels"]["nvidia.com/gpu-operator.state"] == "state-driver"
    role = next(o for o in objs if o["kind"] == "Role")
    assert role["rules"] == [
        {"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
         "verbs": ["use"], "resourceNames": ["privileged"]},
    ]  # fmt: skip
    cluster_role = next(o for o in objs if o["kind"] == "ClusterRole")
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in cluster_role["rules"]] == [
        (["config.openshift.io"], ["clusterversions"], ["get", "list"]),
        ([""], ["nodes"], ["get", "list", "patch", "update", "watch"]),
        ([""], ["pods"], ["get", "list", "watch"]),
        ([""], ["pods/eviction"], ["create"]),
        (["resource.k8s.io"], ["resourceclaims"], ["get", "list"]),
        (["apps"], ["daemonsets"], ["get"]),
    ]
    cm = next(o for o in objs if o["kind"] == "ConfigMap")
    assert cm["metadata"]["name"] == "nvidia-driver-startup-probe"
    assert pod["volumes"][-1]["configMap"]["name"] == "nvidia-driver-startup-probe"


def test_vgpu_host_manager_is_rendered_with_its_licensing() -> None:
    cr = driver(
        "v",
        selector={"pool": "a"},
        driverType="vgpu-host-manager",
        image="vgpu-manager",
        licensingConfig={"secretName": "lic", "nlsEnabled": True},
    )
    ds = next(iter(_daemonsets(CONTRACT.render(cr, facts(NODES[:1], [cr]))).values()))
    pod = ds["spec"]["template"]["spec"]
    assert ds["metadata"]["name"].startswith("nvidia-vgpu-host-manager-driver-ubuntu22.04-")
    assert pod["serviceAccountName"] == "nvidia-vgpu-manager-v-ubuntu22.04"
    assert pod["nodeSelector"]["nvidia.com/gpu.deploy.vgpu-manager"] == "true"
    assert pod["terminationGracePeriodSeconds"] == 120
    assert ds["metadata"]["labels"]["app.kubernetes.io/component"] == "nvidia-vgpu-host-manager"
    ctr = _ctr(ds, "nvidia-driver-ctr")
    assert "startupProbe" not in ctr
    assert {m["mountPath"] for m in ctr["volumeMounts"]} >= {
        "/sys/fs/cgroup", "/dev/vfio", "/drivers/gridd.conf",
        "/drivers/ClientConfigToken/client_configuration_token.tok",
    }  # fmt: skip
    lic = next(v for v in pod["volumes"] if v["name"] == "licensing-config")
    assert lic["secret"]["secretName"] == "lic"


def test_precompiled_pools_pin_the_kernel_in_selector_image_and_labels() -> None:
    nodes = [
        node("a1", labels={"pool": "a"}),
        node("a2", labels={"pool": "a"}, kernel="6.8.0-45-generic"),
    ]
    cr = driver("a", selector={"pool": "a"}, usePrecompiled=True, version="570")
    dss = list(_daemonsets(CONTRACT.render(cr, facts(nodes, [cr]))).values())
    assert len(dss) == 2
    images = sorted(_ctr(ds, "nvidia-driver-ctr")["image"] for ds in dss)
    assert images == [
        "nvcr.io/nvidia/driver:570-5.15.0-122-generic-ubuntu22.04",
        "nvcr.io/nvidia/driver:570-6.8.0-45-generic-ubuntu22.04",
    ]
    for ds in dss:
        labels = ds["metadata"]["labels"]
        kernel = labels["nvidia.com/precompiled.kernel-version"]
        assert labels["nvidia.com/precompiled"] == "true"
        selector = ds["spec"]["template"]["spec"]["nodeSelector"]
        assert selector["feature.node.kubernetes.io/kernel-version.full"] == kernel
        probe = _ctr(ds, "nvidia-driver-ctr")["startupProbe"]
        assert probe["initialDelaySeconds"] == 5


def test_pool_rbac_is_rendered_once_per_os_and_the_probe_configmap_once() -> None:
    nodes = [node("a1"), node("a2", kernel="6.8.0-45-generic")]
    cr = driver("a", usePrecompiled=True, version="570")
    objs = CONTRACT.render(cr, facts(nodes, [cr]))
    kinds = sorted(o["kind"] for o in objs)
    assert kinds.count("DaemonSet") == 2
    assert kinds.count("ServiceAccount") == 1
    assert kinds.count("ConfigMap") == 1
    keys = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert len(keys) == len(set(keys))


def test_spec_pod_settings_reach_the_daemonset() -> None:
    cr = driver(
        "a",
        selector={"pool": "a"},
        tolerations=[{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}],
        priorityClassName="high",
        labels={"team": "ml", "app": "ignored", "app.kubernetes.io/name": "ignored"},
        annotations={"note": "x"},
        nodeAffinity={"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}},
        env=[{"name": "EXTRA", "value": "1"}],
        repoConfig={"name": ""},
    )  # fmt: skip
    ds = next(iter(_daemonsets(CONTRACT.render(cr, facts(NODES[:1], [cr]))).values()))
    pod = ds["spec"]["template"]["spec"]
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"},
    ]
    assert pod["priorityClassName"] == "high"
    template_labels = ds["spec"]["template"]["metadata"]["labels"]
    assert template_labels["team"] == "ml"
    assert template_labels["app"] == ds["metadata"]["name"]
    assert "app.kubernetes.io/name" not in template_labels
    assert ds["spec"]["template"]["metadata"]["annotations"]["note"] == "x"
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert pod["affinity"]["podAntiAffinity"]
    env = {e["name"]: e.get("value") for e in _ctr(ds, "nvidia-driver-ctr")["env"]}
    assert env["EXTRA"] == "1"


def test_a_version_change_changes_every_pool_and_only_the_config_digest_moves_with_it() -> None:
    old, new = driver("a", selector={"pool": "a"}), driver("a", selector={"pool": "a"},
                                                           version="580.1")  # fmt: skip
    before = _daemonsets(CONTRACT.render(old, facts(NODES, [old])))
    after = _daemonsets(CONTRACT.render(new, facts(NODES, [new])))
    assert before.keys() == after.keys()
    for name in before:
        assert (
            _ctr(before[name], "nvidia-driver-ctr")["image"]
            != _ctr(after[name], "nvidia-driver-ctr")["image"]
        )


def test_the_sample_renders_a_daemonset_for_every_gpu_node_os() -> None:
    cr = sample()
    objs = CONTRACT.render(cr, facts(NODES, [cr]))
    dss = _daemonsets(objs)
    assert len(dss) == 2
    images = sorted(_ctr(ds, "nvidia-driver-ctr")["image"] for ds in dss.values())
    assert images == [
        "nvcr.io/nvidia/driver:570.148.08-ubuntu22.04",
        "nvcr.io/nvidia/driver:570.148.08-ubuntu24.04",
    ]
    for ds in dss.values():
        assert (
            ds["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu-operator.driver.owner"]
            == "nvidiadriver-sample"
        )


def test_no_owned_node_renders_nothing_and_says_so() -> None:
    cr = driver("a", selector={"pool": "none"})
    f = facts(NODES, [cr])
    assert CONTRACT.render(cr, f) == []
    readiness = CONTRACT.readiness(cr, f, Observed())
    assert (readiness.state, readiness.reason) == ("notReady", "ReconcileFailed")
    assert readiness.message == "no nodes matching the given node selector for a"


def test_unsupported_specs_are_refused_with_the_field() -> None:
    cr = driver("a", usePrecompiled=True, gds={"enabled": True})
    with pytest.raises(ReconcileError, match="not supported along with pre-compiled"):
        CONTRACT.render(cr, facts(NODES, [cr]))
    digest = driver("d", usePrecompiled=True, version="sha256:" + "0" * 64)
    with pytest.raises(ReconcileError, match=r"spec\.version: specifying image digest"):
        CONTRACT.render(digest, facts(NODES, [digest]))


def _ds_status(**status: int) -> dict[str, Any]:
    return {"metadata": {"generation": 2}, "status": {"observedGeneration": 2, **status}}


def test_readiness_waits_for_every_pool_daemonset() -> None:
    cr = driver("a", selector={"pool": "a"})
    f = facts(NODES, [cr])
    dss = _daemonsets(CONTRACT.render(cr, f))
    ready = _ds_status(desiredNumberScheduled=1, numberAvailable=1, updatedNumberScheduled=1)
    stale = _ds_status(desiredNumberScheduled=1, numberAvailable=1, updatedNumberScheduled=0)
    names = sorted(dss)
    observed = Observed({("apps/v1", "DaemonSet", names[0]): ready,
                         ("apps/v1", "DaemonSet", names[1]): stale})  # fmt: skip
    r = CONTRACT.readiness(cr, f, observed)
    assert (r.state, r.reason, r.requeue_after) == ("notReady", "DriverNotReady", 5.0)
    assert r.message.startswith("Waiting for driver pod to be ready")
    assert names[1] in r.message and names[0] not in r.message
    observed = Observed({("apps/v1", "DaemonSet", n): ready for n in names})
    r = CONTRACT.readiness(cr, f, observed)
    assert (r.state, r.reason, r.ready) == ("ready", "Reconciled", True)


def test_an_unobserved_daemonset_is_not_ready() -> None:
    assert not daemonset_ready({"metadata": {"generation": 1}, "status": {}})[0]
    assert daemonset_ready(_ds_status(desiredNumberScheduled=0))[0]
    # the state skeleton's rule: nothing desired is ready only once nothing is scheduled
    leaving = _ds_status(desiredNumberScheduled=0, currentNumberScheduled=1)
    assert daemonset_ready(leaving) == (False, "pods still scheduled")


def test_the_two_driver_example_splits_the_nodes_between_default_and_selected() -> None:
    path = SAMPLE.parent / "nvidiadriver.yaml"
    docs = [d for d in YAML(typ="safe").load_all(path.read_text()) if d]
    crs = [
        NVIDIADriver.model_validate({**d, "metadata": {**d["metadata"], "uid": f"u-{i}"}})
        for i, d in enumerate(docs)
    ]
    nodes = [node("plain"), node("rdma", labels={"example.com/gpu-pool": "rdma"})]
    f = facts(nodes, crs)
    assert f.owners == {"plain": "default", "rdma": "rdma-open"}
    default, rdma = crs
    plain_ds = next(iter(_daemonsets(CONTRACT.render(default, f)).values()))
    rdma_ds = next(iter(_daemonsets(CONTRACT.render(rdma, f)).values()))
    assert (
        plain_ds["spec"]["template"]["spec"]["nodeSelector"]["nvidia.com/gpu-operator.driver.owner"]
        == "default"
    )
    names = [c["name"] for c in rdma_ds["spec"]["template"]["spec"]["containers"]]
    assert names == ["nvidia-driver-ctr", "nvidia-peermem-ctr", "nvidia-fs-ctr"]
    env = {e["name"]: e.get("value") for e in _ctr(rdma_ds, "nvidia-driver-ctr")["env"]}
    assert env["KERNEL_MODULE_TYPE"] == "open"
    assert env["GDS_ENABLED"] == "true"
    assert rdma_ds["spec"]["template"]["metadata"]["labels"]["team"] == "hpc"


def test_only_the_shared_owner_renders_the_shared_startup_probe_configmap() -> None:
    from dataclasses import replace

    from platforms.gpu.nvidiadriver_render import shared_owner

    a = driver("a", selector={"pool": "a"})
    b = driver("b", selector={"pool": "b"})
    f = facts(NODES, [a, b])
    assert shared_owner(f.owners) == "a"
    assert shared_owner(f.owners, blocked=["a"]) == "b"
    f = replace(f, shared_owner=shared_owner(f.owners))

    def config_maps(cr: NVIDIADriver) -> list[str]:
        return [o["metadata"]["name"] for o in CONTRACT.render(cr, f) if o["kind"] == "ConfigMap"]

    assert config_maps(a) == ["nvidia-driver-startup-probe"]
    assert config_maps(b) == []
    # b's pods still mount it by NVIDIA's name
    ds = next(iter(_daemonsets(CONTRACT.render(b, f)).values()))
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert volumes["driver-startup-probe-script"]["configMap"]["name"] == (
        "nvidia-driver-startup-probe"
    )
