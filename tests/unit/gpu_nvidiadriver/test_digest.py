"""DRIVER_CONFIG_DIGEST in NVIDIA's format, pinned to the values NVIDIA's goldens carry,
and ClusterPolicy's driver state RBAC and wait commands as NVIDIA writes them."""

from __future__ import annotations

from typing import Any

from platforms.gpu.nvidiadriver_digest import (
    DriverInstallState,
    VolumeConfig,
    VolumeMountConfig,
    config_digest,
    from_pod_spec,
)
from tests.unit.platforms_gpu.helpers import states

MINIMAL = DriverInstallState(
    DriverImage="nvcr.io/nvidia/driver:525.85.03-ubuntu22.04",
    DriverManagerImage="nvcr.io/nvidia/cloud-native/k8s-driver-manager:devel",
    DriverType="gpu",
)


def test_digest_of_nvidias_minimal_fixture_is_the_goldens() -> None:
    # internal/state/testdata/golden/driver-minimal.yaml carries "886542011"
    assert config_digest(MINIMAL) == "886542011"


def test_digest_with_volumes_and_mounts_is_the_goldens() -> None:
    # driver-additional-configs.yaml: the minimal fixture plus three injected volumes
    state = DriverInstallState(
        DriverImage=MINIMAL.DriverImage,
        DriverManagerImage=MINIMAL.DriverManagerImage,
        DriverType="gpu",
        AdditionalVolumeMounts=[
            VolumeMountConfig("test-cm", "/opt/config/test-file", "test-file", True),
            VolumeMountConfig("test-host-path", "/opt/config/test-host-path"),
            VolumeMountConfig("test-host-path-ro", "/opt/config/test-host-path-ro", "", True),
        ],
        AdditionalVolumes=[
            VolumeConfig("test-cm", "test-cm"),
            VolumeConfig("test-host-path", HostPath="/opt/config/test-host-path"),
            VolumeConfig("test-host-path-ro", HostPath="/opt/config/test-host-path-ro"),
        ],
    )
    assert config_digest(state) == "2057338482"


def test_unset_fields_do_not_change_the_digest_and_set_ones_do() -> None:
    assert config_digest(DriverInstallState(**{**MINIMAL.__dict__, "GDSEnabled": False})) == (
        "886542011"
    )
    assert config_digest(DriverInstallState(**{**MINIMAL.__dict__, "HostRoot": "/"})) != (
        "886542011"
    )


def _driver_ds() -> dict[str, Any]:
    objs = states({"driver": {"rdma": {"enabled": True}}})["state-driver"].objects
    return next(o for o in objs if o["kind"] == "DaemonSet")


def test_clusterpolicy_driver_digest_is_computed_from_the_pod_spec_as_nvidia_does() -> None:
    pod = _driver_ds()["spec"]["template"]["spec"]
    stamped = {
        e["value"]
        for c in [*pod["initContainers"], *pod["containers"]]
        for e in c.get("env", [])
        if e["name"] == "DRIVER_CONFIG_DIGEST"
    }
    assert len(stamped) == 1
    without = {
        **pod,
        "initContainers": [
            {**c, "env": [e for e in c.get("env", []) if e["name"] != "DRIVER_CONFIG_DIGEST"]}
            for c in pod["initContainers"]
        ],
        "containers": [
            {**c, "env": [e for e in c.get("env", []) if e["name"] != "DRIVER_CONFIG_DIGEST"]}
            for c in pod["containers"]
        ],
    }
    state = from_pod_spec(without)
    assert state.GPUDirectRDMAEnabled and state.PeermemImage == state.DriverImage
    assert stamped == {config_digest(state)}


def test_clusterpolicy_driver_rbac_is_nvidias() -> None:
    objs = states({})["state-driver"].objects
    role = next(o for o in objs if o["kind"] == "Role")
    cluster_role = next(o for o in objs if o["kind"] == "ClusterRole")
    assert role["rules"] == [
        {"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
         "verbs": ["use"], "resourceNames": ["privileged"]},
    ]  # fmt: skip
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in cluster_role["rules"]] == [
        (["config.openshift.io"], ["clusterversions"], ["get", "list"]),
        ([""], ["nodes"], ["get", "list", "patch", "update", "watch"]),
        ([""], ["pods"], ["get", "list", "watch"]),
        ([""], ["pods/eviction"], ["create"]),
        (["resource.k8s.io"], ["resourceclaims"], ["get", "list"]),
        (["apps"], ["daemonsets"], ["get"]),
    ]


def test_startup_probe_writes_yaml_and_peermem_probes_as_nvidia() -> None:
    objs = states({})["state-driver"].objects
    script = next(o for o in objs if o["kind"] == "ConfigMap")["data"]["startup-probe.sh"]
    assert "GDRCOPY_ENABLED: %s" in script and "GDRCOPY_ENABLED=" not in script
    peermem = next(
        c for c in _driver_ds()["spec"]["template"]["spec"]["containers"]
        if c["name"] == "nvidia-peermem-ctr"
    )  # fmt: skip
    assert peermem["startupProbe"]["exec"]["command"] == [
        "sh", "-c", "nvidia-driver probe_nvidia_peermem",
    ]  # fmt: skip


def test_toolkit_wait_init_containers_echo_nvidias_words() -> None:
    rendered = states({})
    for state in ("gpu-feature-discovery", "state-dcgm-exporter", "state-device-plugin"):
        ds = next(o for o in rendered[state].objects if o["kind"] == "DaemonSet")
        init = next(
            c for c in ds["spec"]["template"]["spec"]["initContainers"]
            if c["name"] == "toolkit-validation"
        )  # fmt: skip
        assert init["args"] == [
            "until [ -f /run/nvidia/validations/toolkit-ready ]; do echo waiting for nvidia "
            "container stack to be setup; sleep 5; done"
        ], state


def test_gds_and_gdrcopy_sidecars_wait_as_nvidia_writes_it() -> None:
    objs = states({"gds": {"enabled": True}, "gdrcopy": {"enabled": True}})["state-driver"].objects
    ds = next(o for o in objs if o["kind"] == "DaemonSet")
    args = {c["name"]: c.get("args") for c in ds["spec"]["template"]["spec"]["containers"]}
    assert args["nvidia-fs-ctr"] == [
        "until [ -d /run/nvidia/driver/usr/src ] && lsmod | grep nvidia; do echo  Waiting for "
        "nvidia-driver to be installed...; sleep 10; done; exec nvidia-gds-driver install"
    ]
    assert args["nvidia-gdrcopy-ctr"][0].endswith("exec nvidia-gdrcopy-driver install")
