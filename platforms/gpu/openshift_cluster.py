"""What the GPU renders read of an OpenShift cluster, from its objects (pure).

NVIDIA's GPU Operator tells OpenShift from Kubernetes by the ClusterVersion
``version`` (``config.openshift.io/v1``): where it is absent (or its API is not
served) the cluster is Kubernetes. On OpenShift the version the renders use
(the driver's ``OPENSHIFT_VERSION``) is the ``major.minor`` of the first
``Completed`` entry of its ``status.history`` ("4.16" for 4.16.3); a
ClusterVersion without one is an error, as NVIDIA's ("failed to find Completed
Cluster Version"). The NVIDIADriver state also reads the ``cluster`` Proxy (its
spec: the proxy env and trusted CA of the driver) and the Driver Toolkit images
of the ImageStream ``openshift/driver-toolkit`` (one tag per RHCOS release).

The live controllers (``controllers.gpu.openshift``, from their caches) and
``nimctl render`` (from the ``--nodes`` file) both go through these functions,
so both render the same objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from nimctl_runtime.meta import Obj, dig
from platforms.gpu.errors import RenderError

CLUSTER_VERSION_NAME: Final = "version"
PROXY_NAME: Final = "cluster"
DTK_IMAGE_STREAM: Final = "driver-toolkit"
DTK_NAMESPACE: Final = "openshift"
COMPLETED: Final = "Completed"

__all__ = [
    "CLUSTER_VERSION_NAME",
    "DTK_IMAGE_STREAM",
    "DTK_NAMESPACE",
    "PROXY_NAME",
    "dtk_images",
    "openshift_version",
    "proxy_spec",
]


def openshift_version(cluster_version: Mapping[str, Any]) -> str:
    """``major.minor`` of the first ``Completed`` update in ``status.history`` (NVIDIA's).

    RenderError when there is none (an install still in progress): the driver
    cannot be told which OpenShift it runs on.
    """
    for entry in dig(cluster_version, "status", "history") or []:
        if not isinstance(entry, Mapping) or entry.get("state") != COMPLETED:
            continue
        return ".".join(str(entry.get("version") or "").split(".")[:2])
    name = dig(cluster_version, "metadata", "name") or CLUSTER_VERSION_NAME
    raise RenderError(
        f"ClusterVersion {name}: no Completed update in status.history, so the OpenShift "
        "version is not known yet (NVIDIA's operator fails the same way)"
    )


def dtk_images(image_stream: Mapping[str, Any]) -> dict[str, str]:
    """RHCOS release -> Driver Toolkit image, from the tags of ``openshift/driver-toolkit``
    (``latest`` names no release; a tag without a name or source is skipped, as NVIDIA's)."""
    out: dict[str, str] = {}
    for tag in dig(image_stream, "spec", "tags") or []:
        if not isinstance(tag, Mapping):
            continue
        name, image = tag.get("name"), dig(tag, "from", "name")
        if name and name != "latest" and image:
            out[str(name)] = str(image)
    return out


def proxy_spec(proxy: Mapping[str, Any]) -> Obj:
    """The spec of the ``cluster`` Proxy (``httpProxy``, ``httpsProxy``, ``noProxy``,
    ``trustedCA``)."""
    return dict(proxy.get("spec") or {})
