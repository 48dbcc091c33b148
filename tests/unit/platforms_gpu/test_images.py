"""Image resolution (repository/image/version, digests, env fallbacks) and driver tags."""

from __future__ import annotations

from typing import Any

import pytest

from api.nvidia.v1.clusterpolicy import DevicePluginSpec, DriverSpec
from platforms.gpu import RenderError
from platforms.gpu.images import driver_image, image_path, pull_policy, sanitize_kernel

from .helpers import ctr, daemonset, facts, node

ENV = {"DEVICE_PLUGIN_IMAGE": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        (
            {"repository": "nvcr.io/nvidia", "image": "k8s-device-plugin", "version": "v0.20.0"},
            "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        ),
        (
            {
                "repository": "nvcr.io/nvidia",
                "image": "k8s-device-plugin",
                "version": "sha256:0123abcd",
            },
            "nvcr.io/nvidia/k8s-device-plugin@sha256:0123abcd",
        ),
        # image alone is used as written (kbld-style digests)
        ({"image": "k8s-device-plugin"}, "k8s-device-plugin"),
        # nothing set: the operator pod's environment variable
        ({}, "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"),
    ],
)
def test_image_path(fields: dict[str, Any], expected: str) -> None:
    assert image_path(DevicePluginSpec.model_validate(fields), ENV, "devicePlugin") == expected


@pytest.mark.parametrize(
    ("fields", "env", "message"),
    [
        (
            {"repository": "nvcr.io/nvidia", "version": "v1"},
            ENV,
            r"spec.devicePlugin: invalid image specification",
        ),
        ({"image": "x", "version": "v1"}, ENV, r"spec.devicePlugin: invalid image specification"),
        (
            {},
            {},
            r"spec.devicePlugin: empty image path provided through both ClusterPolicy CR and ENV DEVICE_PLUGIN_IMAGE",
        ),
    ],
)
def test_image_errors_name_the_field(
    fields: dict[str, Any], env: dict[str, str], message: str
) -> None:
    with pytest.raises(RenderError, match=message):
        image_path(DevicePluginSpec.model_validate(fields), env, "devicePlugin")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("Always", "Always"),
        ("Never", "Never"),
        ("IfNotPresent", "IfNotPresent"),
        ("always", "IfNotPresent"),
        (None, "IfNotPresent"),
    ],
)
def test_pull_policy(value: str | None, expected: str) -> None:
    assert pull_policy(value) == expected


DRIVER = DriverSpec.model_validate(
    {"repository": "nvcr.io/nvidia", "image": "driver", "version": "595.91.07"}
)


@pytest.mark.parametrize(
    ("spec", "os_tag", "kernel", "expected"),
    [
        (DRIVER, "ubuntu22.04", None, "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04"),
        (
            DRIVER,
            "ubuntu22.04",
            "5.15.0-1048-nvidia",
            "nvcr.io/nvidia/driver:595.91.07-5.15.0-1048-nvidia-ubuntu22.04",
        ),
        (
            DriverSpec.model_validate(
                {"repository": "nvcr.io/nvidia", "image": "driver", "version": "sha256:beef"}
            ),
            "ubuntu22.04",
            None,
            "nvcr.io/nvidia/driver@sha256:beef",
        ),
    ],
)
def test_driver_image_tags(
    spec: DriverSpec, os_tag: str, kernel: str | None, expected: str
) -> None:
    assert driver_image(spec, {}, "driver", os_tag=os_tag, kernel=kernel) == expected


@pytest.mark.parametrize(
    ("os_id", "version", "tag"),
    [
        ("ubuntu", "22.04", "ubuntu22.04"),
        ("rhel", "9.4", "rhel9"),
        ("rocky", "9.3", "rocky9"),
        ("ol", "8.10", "ol8"),
        ("rhcos", "4.16", "rhcos4.16"),
        ("sles", "15.6", "sles15.6"),
    ],
)
def test_driver_image_carries_the_first_gpu_nodes_os(os_id: str, version: str, tag: str) -> None:
    ds = daemonset("nvidia-driver-daemonset", cluster=facts(node(os_id=os_id, version=version)))
    assert ctr(ds, "nvidia-driver-ctr")["image"] == f"nvcr.io/nvidia/driver:595.91.07-{tag}"


@pytest.mark.parametrize(
    ("kernel", "name"),
    [
        ("5.15.0-1048-nvidia", "5.15.0-1048-nvidia"),
        ("5.14.0-427.13.1.el9_4.x86_64", "5.14.0-427.13.1.el9.4"),
        ("6.8.0-1008-AWS.aarch64", "6.8.0-1008-aws"),
        ("5.14.0-70.el9.aarch64_64k", "5.14.0-70.el9"),
    ],
)
def test_sanitize_kernel(kernel: str, name: str) -> None:
    assert sanitize_kernel(kernel) == name


def test_component_images_come_from_the_spec_and_the_env_fallback() -> None:
    ds = daemonset("nvidia-device-plugin-daemonset")
    assert ctr(ds, "nvidia-device-plugin")["image"] == "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
    assert ctr(ds, "toolkit-validation")["image"] == "nvcr.io/nvidia/gpu-operator:v26.7.0"
    no_repo = {"devicePlugin": {"repository": None, "image": None, "version": None}}
    fallback = facts(
        operator_env={"DEVICE_PLUGIN_IMAGE": "mirror.example.com/dp:v1", "VALIDATOR_IMAGE": "v:1"}
    )
    ds = daemonset("nvidia-device-plugin-daemonset", no_repo, fallback)
    assert ctr(ds, "nvidia-device-plugin")["image"] == "mirror.example.com/dp:v1"
