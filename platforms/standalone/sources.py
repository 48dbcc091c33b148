"""Facts about a NIMCache that decide how it caches and how a NIMService using it is rendered.

Source kinds (nim-operator.md §3.5): *optimized* = NGC source without
``modelEndpoint`` (profiles with pre-built engines, GPU auto-assignment);
*universal* = NGC with ``modelEndpoint`` or a Hugging Face source; *HF model*
= ``hf`` or ``dataStore`` source; *native* = ``status.type == native``.
All read the typed ``NIMCache``.
"""

from __future__ import annotations

from typing import Literal

from api.apps.v1alpha1.nimcache import (
    HuggingFaceHubSource,
    NemoDataStoreSource,
    NGCSource,
    NIMCache,
)

CACHE_TYPE_NATIVE = "native"
CACHE_TYPE_MODEL_FREE = "model-free"

SourceKind = Literal["ngc", "hf", "dataStore", ""]
Source = NGCSource | HuggingFaceHubSource | NemoDataStoreSource

__all__ = [
    "CACHE_TYPE_MODEL_FREE",
    "CACHE_TYPE_NATIVE",
    "cache_pvc_name",
    "cache_type",
    "hf_uri",
    "is_hf_model",
    "is_native",
    "is_optimized",
    "is_universal",
    "source_of",
]


def source_of(nimcache: NIMCache) -> tuple[SourceKind, Source | None]:
    """``("ngc"|"hf"|"dataStore", source)`` of a NIMCache (``("", None)``: none set)."""
    source = nimcache.spec.source
    if source.ngc is not None:
        return "ngc", source.ngc
    if source.hf is not None:
        return "hf", source.hf
    if source.data_store is not None:
        return "dataStore", source.data_store
    return "", None


def is_optimized(nimcache: NIMCache) -> bool:
    ngc = nimcache.spec.source.ngc
    return ngc is not None and not ngc.model_endpoint


def is_universal(nimcache: NIMCache) -> bool:
    ngc = nimcache.spec.source.ngc
    return (ngc is not None and bool(ngc.model_endpoint)) or nimcache.spec.source.hf is not None


def is_hf_model(nimcache: NIMCache) -> bool:
    return source_of(nimcache)[0] in ("hf", "dataStore")


def cache_type(nimcache: NIMCache) -> str:
    """``status.type``: ``""`` (legacy), ``model-free`` or ``native``."""
    status = nimcache.status
    return (status.type if status is not None else None) or ""


def is_native(nimcache: NIMCache) -> bool:
    return cache_type(nimcache) == CACHE_TYPE_NATIVE


def hf_uri(nimcache: NIMCache) -> str:
    """``hf://<namespace>/<modelName>`` of an HF or DataStore source, else ""."""
    _, src = source_of(nimcache)
    if not isinstance(src, HuggingFaceHubSource | NemoDataStoreSource):
        return ""
    return f"hf://{src.namespace}/{src.model_name or ''}"


def cache_pvc_name(nimcache: NIMCache) -> str:
    """Name of the PVC a NIMCache caches into (before it reports ``status.pvc``)."""
    name = nimcache.spec.storage.pvc.name
    return name or f"{nimcache.metadata.name or ''}-pvc"
