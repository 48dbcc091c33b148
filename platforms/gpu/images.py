"""Operand image resolution, as the GPU Operator does it.

``repository/image:version`` (``@version`` for a ``sha256:`` digest), ``image``
alone as written (kbld-style digests), or the operator pod's environment
variable for the component (``DRIVER_IMAGE``, ``VALIDATOR_IMAGE``...). Driver
images get the OS tag of the GPU nodes appended (``-ubuntu22.04``), and
precompiled ones the kernel as well (``-5.15.0-1048-nvidia-ubuntu22.04``).
Errors name the ClusterPolicy field.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from api.nvidia.v1.clusterpolicy import ImageSpec
from platforms.gpu.errors import RenderError

PULL_POLICIES = ("Always", "Never", "IfNotPresent")

DEFAULT_OPERATOR_ENV: Mapping[str, str] = MappingProxyType(
    {
        "DRIVER_IMAGE": "nvcr.io/nvidia/driver:595.91.07",
        "DRIVER_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-driver-manager:v0.12.0",
        "CONTAINER_TOOLKIT_IMAGE": "nvcr.io/nvidia/k8s/container-toolkit:v1.20.0",
        "DEVICE_PLUGIN_IMAGE": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        "GFD_IMAGE": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0",
        "DCGM_IMAGE": "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04",
        "DCGM_EXPORTER_IMAGE": "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless",
        "MIG_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-mig-manager:v0.15.0",
        "VALIDATOR_IMAGE": "nvcr.io/nvidia/gpu-operator:v26.7.0",
        "GDS_IMAGE": "nvcr.io/nvidia/cloud-native/nvidia-fs:2.29.4",
        "GDRCOPY_IMAGE": "nvcr.io/nvidia/cloud-native/gdrdrv:v2.6",
        "VFIO_MANAGER_IMAGE": "nvcr.io/nvidia/cuda:13.0.1-base-ubi9",
        "SANDBOX_DEVICE_PLUGIN_IMAGE": "nvcr.io/nvidia/kubevirt-gpu-device-plugin:v1.6.0",
        "KATA_SANDBOX_DEVICE_PLUGIN_IMAGE": (
            "nvcr.io/nvidia/cloud-native/nvidia-sandbox-device-plugin:v0.0.5"
        ),
        "VGPU_DEVICE_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/vgpu-device-manager:v0.4.1",
        "CC_MANAGER_IMAGE": "nvcr.io/nvidia/cloud-native/k8s-cc-manager:v0.3.0",
    }
)
"""Image fallbacks (the operator pod's environment) from NVIDIA's Helm chart v26.7.0
values, for every component that has a public image (the vGPU manager has none).
NVIDIA's chart sets only ``VALIDATOR_IMAGE`` and ``DRIVER_MANAGER_IMAGE``; nimctl
falls back to all of them, so a ClusterPolicy that names no image still renders."""


def image_path(spec: ImageSpec, env: Mapping[str, str], field: str) -> str:
    """The image of the component at ``spec.<field>``; RenderError naming the field."""
    try:
        return spec.image_path(env)
    except ValueError as err:
        raise RenderError(f"spec.{field}: {err}") from None


def pull_policy(value: str | None) -> str:
    """``Always``, ``Never`` or ``IfNotPresent``; anything else (or nothing) is IfNotPresent."""
    return value if value in PULL_POLICIES else "IfNotPresent"


def driver_image(
    spec: ImageSpec,
    env: Mapping[str, str],
    field: str,
    *,
    os_tag: str,
    kernel: str | None = None,
) -> str:
    """A driver-style image: ``<image>-<osTag>``, ``<image>-<kernel>-<osTag>`` when
    ``kernel`` is given (precompiled), unchanged when it is a ``sha256:`` digest."""
    path = image_path(spec, env, field)
    if "sha256:" in path:
        return path
    if kernel:
        return f"{path}-{kernel}-{os_tag}"
    return f"{path}-{os_tag}"


def sanitize_kernel(kernel: str) -> str:
    """The kernel as it appears in a precompiled driver DaemonSet name.

    Lower-cased, the architecture suffix (``x86_64``, ``aarch64``, ``aarch64_64k``)
    removed, ``_`` turned into ``.``, trailing dots trimmed:
    ``5.14.0-427.13.1.el9_4.x86_64`` becomes ``5.14.0-427.13.1.el9.4``.
    """
    out = kernel.lower()
    for arch in ("aarch64_64k", "x86_64", "aarch64"):
        out = out.replace(arch, "")
    return out.replace("_", ".").rstrip(".")
