"""OpenShift detection for the ClusterPolicy and NVIDIADriver controllers, from their caches.

NVIDIA's GPU Operator asks the API server for the ClusterVersion ``version``
(``config.openshift.io/v1``; not found: Kubernetes) once at start for
ClusterPolicy and on every pass for NVIDIADriver; both read the ``cluster``
Proxy, NVIDIADriver also the ImageStream ``openshift/driver-toolkit``. nimctl reads
the same objects, the same way (``platforms.gpu.openshift_cluster``), but from
the controllers' caches:

- discovery at start (``Capabilities``) says whether the cluster serves these
  kinds; on Kubernetes nothing is cached or read, and a pass costs nothing more;
- where served, the cache holds only the objects NVIDIA reads (field selector
  on the name; the ImageStream in the ``openshift`` namespace), trimmed to what
  is read: the ClusterVersion's update history, the Proxy's spec, the
  ImageStream's tags;
- every pass reads them from the cache, no API call. A change of them reaches
  the operands with the next pass (nothing watches them, as NVIDIA's).

The result feeds the renders exactly what ``nimctl render`` takes from the
``--nodes`` file: the OpenShift version (``ClusterFacts.openshift``), the Proxy
spec, and for NVIDIADriver the Driver Toolkit images. With it the renders add
each operand's SecurityContextConstraints, run cri-o, give the driver
``OPENSHIFT_VERSION``, the proxy env and the trusted-CA ConfigMap, and
(NVIDIADriver) pool RHCOS nodes by their NFD ``OSTREE_VERSION`` label with the
Driver Toolkit container.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from nimctl_runtime.cache.cache import ByObject
from nimctl_runtime.client.errors import NotFound
from nimctl_runtime.client.interfaces import Reader
from nimctl_runtime.meta import Obj, dig
from platforms.capabilities import (
    CLUSTER_PROXY,
    CLUSTER_VERSION,
    GVK,
    IMAGE_STREAM,
    Capabilities,
)
from platforms.contract import ReconcileError
from platforms.gpu.errors import RenderError
from platforms.gpu.openshift_cluster import (
    CLUSTER_VERSION_NAME,
    DTK_IMAGE_STREAM,
    DTK_NAMESPACE,
    PROXY_NAME,
    dtk_images,
    openshift_version,
    proxy_spec,
)

REASON: Final = "ReconcileFailed"

__all__ = ["OpenShiftFacts", "cache_options", "openshift_version_of", "read_openshift"]


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {k: meta[k] for k in ("name", "namespace", "resourceVersion") if k in meta}


def _trim_cluster_version(obj: Obj) -> Obj:
    history = [
        {"state": e.get("state"), "version": e.get("version")}
        for e in dig(obj, "status", "history") or []
        if isinstance(e, Mapping)
    ]
    return {**_head(obj), "status": {"history": history}}


def _trim_proxy(obj: Obj) -> Obj:
    return {**_head(obj), "spec": dict(obj.get("spec") or {})}


def _trim_image_stream(obj: Obj) -> Obj:
    tags = [
        {"name": t.get("name"), "from": {"name": dig(t, "from", "name")}}
        for t in dig(obj, "spec", "tags") or []
        if isinstance(t, Mapping)
    ]
    return {**_head(obj), "spec": {"tags": tags}}


def _head(obj: Obj) -> Obj:
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "metadata": _meta(obj)}


def _one(name: str, transform: Callable[[Obj], Obj], namespace: str | None = None) -> ByObject:
    """Cache only the object ``name`` (never read by label: no label index)."""
    return ByObject(
        field_selector=f"metadata.name={name}",
        namespace=namespace,
        transform=transform,
        index_labels=False,
        keep_labels=False,
    )


def cache_options(capabilities: Capabilities, *, driver: bool = False) -> dict[GVK, ByObject]:
    """The cache entries for what a controller reads of OpenShift (none on Kubernetes):
    the ClusterVersion and the Proxy, and with ``driver`` (NVIDIADriver) the ImageStream."""
    out: dict[GVK, ByObject] = {}
    if not capabilities.has(CLUSTER_VERSION):
        return out
    out[CLUSTER_VERSION] = _one(CLUSTER_VERSION_NAME, _trim_cluster_version)
    if capabilities.has(CLUSTER_PROXY):
        out[CLUSTER_PROXY] = _one(PROXY_NAME, _trim_proxy)
    if driver and capabilities.has(IMAGE_STREAM):
        out[IMAGE_STREAM] = _one(DTK_IMAGE_STREAM, _trim_image_stream, DTK_NAMESPACE)
    return out


async def _cached(reader: Reader, gvk: GVK, name: str, namespace: str | None = None) -> Obj | None:
    try:
        return await reader.get(gvk[0], gvk[1], name, namespace)
    except NotFound:
        return None


async def openshift_version_of(reader: Reader, capabilities: Capabilities) -> str | None:
    """The OpenShift version (``4.16``), None on Kubernetes (ClusterVersion not served, or
    no ``version``). ReconcileError when the ClusterVersion has no Completed update yet."""
    if not capabilities.has(CLUSTER_VERSION):
        return None
    cluster_version = await _cached(reader, CLUSTER_VERSION, CLUSTER_VERSION_NAME)
    if cluster_version is None:
        return None
    try:
        return openshift_version(cluster_version)
    except RenderError as err:
        raise ReconcileError(err.message, reason=REASON) from None


@dataclass(frozen=True)
class OpenShiftFacts:
    """What the renders read of OpenShift (``ClusterFacts``, ``NVIDIADriverFacts`` fields)."""

    version: str | None = None
    """None: Kubernetes."""
    dtk_images: Mapping[str, str] = field(default_factory=dict)
    proxy: Mapping[str, Any] | None = None


async def read_openshift(
    reader: Reader, capabilities: Capabilities, *, driver: bool = False
) -> OpenShiftFacts:
    """The OpenShift version and cluster Proxy spec, with ``driver`` (NVIDIADriver) the
    Driver Toolkit images too, as NVIDIA's operator reads them (empty on Kubernetes)."""
    version = await openshift_version_of(reader, capabilities)
    if version is None:
        return OpenShiftFacts()
    images: dict[str, str] = {}
    if driver and capabilities.has(IMAGE_STREAM):
        stream = await _cached(reader, IMAGE_STREAM, DTK_IMAGE_STREAM, DTK_NAMESPACE)
        images = dtk_images(stream) if stream is not None else {}
    proxy = None
    if capabilities.has(CLUSTER_PROXY):
        obj = await _cached(reader, CLUSTER_PROXY, PROXY_NAME)
        proxy = proxy_spec(obj) if obj is not None else None
    return OpenShiftFacts(version=version, dtk_images=images, proxy=proxy)
