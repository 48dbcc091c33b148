"""The driver state: image per OS, precompiled DaemonSets per kernel, host-driver mode,
the optional sidecars and the files mounted from ConfigMaps and Secrets."""

from __future__ import annotations

from typing import Any

import pytest

from platforms.gpu import RenderError, render

from .helpers import ctr, daemonset, env, facts, names, node, objects, policy, states, volume

PRECOMPILED: dict[str, Any] = {"driver": {"usePrecompiled": True, "version": "595"}}


def driver_daemonsets(
    spec: dict[str, Any] | None = None, cluster: Any = None
) -> list[dict[str, Any]]:
    return [o for o in states(spec, cluster)["state-driver"].objects if o["kind"] == "DaemonSet"]


def test_host_driver_mode_has_no_driver_daemonset_but_the_rest_of_the_stack() -> None:
    rendered = states({"driver": {"enabled": False}})
    assert rendered["state-driver"].objects == []
    validator = daemonset("nvidia-operator-validator", {"driver": {"enabled": False}})
    assert "driver-validation" in names(validator["spec"]["template"]["spec"]["initContainers"])


def test_precompiled_gives_one_daemonset_per_kernel() -> None:
    cluster = facts(
        node("a", kernel="5.15.0-1048-nvidia"),
        node("b", kernel="5.15.0-1048-nvidia"),
        node("c", kernel="6.8.0-1008-nvidia"),
    )
    dss = driver_daemonsets(PRECOMPILED, cluster)
    assert [d["metadata"]["name"] for d in dss] == [
        "nvidia-driver-daemonset-5.15.0-1048-nvidia-ubuntu22.04",
        "nvidia-driver-daemonset-6.8.0-1008-nvidia-ubuntu22.04",
    ]
    for ds, kernel in zip(dss, ("5.15.0-1048-nvidia", "6.8.0-1008-nvidia"), strict=True):
        pod = ds["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == {
            "nvidia.com/gpu.deploy.driver": "true",
            "feature.node.kubernetes.io/kernel-version.full": kernel,
        }
        assert ds["metadata"]["labels"]["nvidia.com/precompiled"] == "true"
        assert ds["spec"]["template"]["metadata"]["labels"]["nvidia.com/precompiled"] == "true"
        assert (
            ctr(ds, "nvidia-driver-ctr")["image"]
            == f"nvcr.io/nvidia/driver:595-{kernel}-ubuntu22.04"
        )
        assert ds["spec"]["updateStrategy"] == {"type": "OnDelete"}


def test_precompiled_needs_the_kernel_label() -> None:
    bare = node()
    del bare["metadata"]["labels"]["feature.node.kubernetes.io/kernel-version.full"]
    with pytest.raises(
        RenderError, match=r"GPU node gpu-1 has no feature.node.kubernetes.io/kernel-version.full"
    ):
        render(policy(PRECOMPILED), facts(bare))


@pytest.mark.parametrize("extra", [{"gds": {"enabled": True}}, {"gdrcopy": {"enabled": True}}])
def test_precompiled_rejects_gds_and_gdrcopy(extra: dict[str, Any]) -> None:
    with pytest.raises(RenderError, match="not supported along with pre-compiled NVIDIA drivers"):
        render(policy({**PRECOMPILED, **extra}), facts())


@pytest.mark.parametrize(
    ("spec", "sidecars", "driver_env"),
    [
        ({}, [], {}),
        (
            {"driver": {"rdma": {"enabled": True}}},
            ["nvidia-peermem-ctr"],
            {"GPU_DIRECT_RDMA_ENABLED": "true"},
        ),
        (
            {"driver": {"rdma": {"enabled": True, "useHostMofed": True}}},
            ["nvidia-peermem-ctr"],
            {"GPU_DIRECT_RDMA_ENABLED": "true", "USE_HOST_MOFED": "true"},
        ),
        ({"gds": {"enabled": True}}, ["nvidia-fs-ctr"], {"GDS_ENABLED": "true"}),
        ({"gdrcopy": {"enabled": True}}, ["nvidia-gdrcopy-ctr"], {"GDRCOPY_ENABLED": "true"}),
    ],
)
def test_sidecars(spec: dict[str, Any], sidecars: list[str], driver_env: dict[str, str]) -> None:
    ds = daemonset("nvidia-driver-daemonset", spec)
    assert names(ds["spec"]["template"]["spec"]["containers"]) == ["nvidia-driver-ctr", *sidecars]
    values = env(ctr(ds, "nvidia-driver-ctr"))
    assert {k: values[k] for k in driver_env} == driver_env
    if "nvidia-fs-ctr" in sidecars:
        assert (
            ctr(ds, "nvidia-fs-ctr")["image"]
            == "nvcr.io/nvidia/cloud-native/nvidia-fs:2.29.4-ubuntu22.04"
        )
    if "nvidia-gdrcopy-ctr" in sidecars:
        assert (
            ctr(ds, "nvidia-gdrcopy-ctr")["image"]
            == "nvcr.io/nvidia/cloud-native/gdrdrv:v2.6-ubuntu22.04"
        )
    if "nvidia-peermem-ctr" in sidecars:
        assert (
            ctr(ds, "nvidia-peermem-ctr")["image"] == "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04"
        )


def test_driver_manager_settings() -> None:
    ds = daemonset(
        "nvidia-driver-daemonset",
        {"driver": {"manager": {"env": [{"name": "ENABLE_AUTO_DRAIN", "value": "true"}]}}},
    )
    manager = ctr(ds, "k8s-driver-manager")
    assert manager["image"] == "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0"
    assert manager["args"] == ["uninstall_driver"]
    assert env(manager)["ENABLE_AUTO_DRAIN"] == "true"
    assert (
        env(manager)["DRIVER_CONFIG_DIGEST"]
        == env(ctr(ds, "nvidia-driver-ctr"))["DRIVER_CONFIG_DIGEST"]
    )


def test_config_digest_follows_the_install_config_only() -> None:
    def digest(spec: dict[str, Any]) -> str:
        value = env(ctr(daemonset("nvidia-driver-daemonset", spec), "nvidia-driver-ctr"))[
            "DRIVER_CONFIG_DIGEST"
        ]
        assert isinstance(value, str)
        return value

    base = digest({})
    assert digest({"driver": {"upgradePolicy": {"maxParallelUpgrades": 3}}}) == base
    assert digest({"driver": {"version": "600.1"}}) != base
    assert digest({"driver": {"kernelModuleType": "open"}}) != base


@pytest.mark.parametrize(
    ("kernel_module_type", "open_modules"),
    [("auto", None), ("open", "true"), ("proprietary", None)],
)
def test_kernel_module_type(kernel_module_type: str, open_modules: str | None) -> None:
    values = env(
        ctr(
            daemonset(
                "nvidia-driver-daemonset", {"driver": {"kernelModuleType": kernel_module_type}}
            ),
            "nvidia-driver-ctr",
        )
    )
    assert values["KERNEL_MODULE_TYPE"] == kernel_module_type
    assert values.get("OPEN_KERNEL_MODULES_ENABLED") == open_modules


def test_probe_overrides_change_only_the_given_fields() -> None:
    ds = daemonset(
        "nvidia-driver-daemonset",
        {
            "driver": {
                "startupProbe": {
                    "failureThreshold": 300,
                    "initialDelaySeconds": None,
                    "periodSeconds": None,
                    "timeoutSeconds": None,
                }
            }
        },
    )
    probe = ctr(ds, "nvidia-driver-ctr")["startupProbe"]
    assert (probe["failureThreshold"], probe["initialDelaySeconds"], probe["timeoutSeconds"]) == (
        300,
        60,
        60,
    )


def test_licensing_topology_and_secret_env() -> None:
    spec = {
        "driver": {
            "licensingConfig": {"secretName": "licensing", "nlsEnabled": True},
            "virtualTopology": {"config": "topology"},
            "secretEnv": "driver-secrets",
        }
    }
    ds = daemonset("nvidia-driver-daemonset", spec)
    assert volume(ds, "licensing-config")["secret"] == {
        "secretName": "licensing",
        "items": [
            {"key": "gridd.conf", "path": "gridd.conf"},
            {"key": "client_configuration_token.tok", "path": "client_configuration_token.tok"},
        ],
    }
    c = ctr(ds, "nvidia-driver-ctr")
    mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
    assert mounts["/drivers/gridd.conf"]["subPath"] == "gridd.conf"
    assert "/drivers/ClientConfigToken/client_configuration_token.tok" in mounts
    assert mounts["/etc/nvidia/nvidia-topologyd.conf"]["subPath"] == "nvidia-topologyd.conf"
    assert c["envFrom"] == [{"secretRef": {"name": "driver-secrets"}}]


def test_files_from_config_maps_need_the_config_map() -> None:
    spec = {
        "driver": {"kernelModuleConfig": {"name": "kmod"}, "repoConfig": {"configMapName": "repos"}}
    }
    with pytest.raises(
        RenderError,
        match=r"spec.driver.kernelModuleConfig.name: ConfigMap kmod not found in namespace gpu-operator",
    ):
        render(policy(spec), facts())
    cluster = facts(
        node(), config_map_keys={"kmod": ["nvidia.conf"], "repos": ["b.list", "a.list"]}
    )
    ds = daemonset("nvidia-driver-daemonset", spec, cluster)
    mounts = {m["mountPath"]: m["name"] for m in ctr(ds, "nvidia-driver-ctr")["volumeMounts"]}
    assert mounts["/drivers/nvidia.conf"] == "kmod"
    assert mounts["/etc/apt/sources.list.d/a.list"] == "repo-config"
    assert mounts["/etc/apt/sources.list.d/b.list"] == "repo-config"


@pytest.mark.parametrize(
    ("os_id", "version", "mounts"),
    [
        ("ubuntu", "22.04", []),
        (
            "rhel",
            "9.4",
            ["/run/secrets/etc-pki-entitlement", "/run/secrets/redhat.repo", "/run/secrets/rhsm"],
        ),
        ("sles", "15.6", ["/etc/SUSEConnect", "/etc/zypp/credentials.d"]),
    ],
)
def test_subscriptions(os_id: str, version: str, mounts: list[str]) -> None:
    ds = daemonset("nvidia-driver-daemonset", cluster=facts(node(os_id=os_id, version=version)))
    got = [
        m["mountPath"]
        for m in ctr(ds, "nvidia-driver-ctr")["volumeMounts"]
        if m["name"].startswith("subscription-config-")
    ]
    assert got == mounts


def test_openshift_version_reaches_the_driver() -> None:
    ds = daemonset(
        "nvidia-driver-daemonset",
        cluster=facts(node(os_id="rhcos", version="4.16"), openshift="4.16.3"),
    )
    assert env(ctr(ds, "nvidia-driver-ctr"))["OPENSHIFT_VERSION"] == "4.16.3"


def test_vgpu_manager_image_is_tagged_for_the_os() -> None:
    spec = {
        "sandboxWorkloads": {"enabled": True},
        "vgpuManager": {
            "enabled": True,
            "repository": "registry.example.com",
            "image": "vgpu-manager",
            "version": "595.91.07",
        },
    }
    ds = daemonset("nvidia-vgpu-manager-daemonset", spec)
    assert (
        ctr(ds, "nvidia-vgpu-manager-ctr")["image"]
        == "registry.example.com/vgpu-manager:595.91.07-ubuntu22.04"
    )
    assert env(ctr(ds, "k8s-driver-manager"))["ENABLE_GPU_POD_EVICTION"] == "false"
    assert "DaemonSet" in {o["kind"] for o in objects(spec)}
