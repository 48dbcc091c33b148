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

from api.nvidia.v1.clusterpolicy import ImageSpec
from platforms.gpu.errors import RenderError

PULL_POLICIES = ("Always", "Never", "IfNotPresent")


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
