"""Facts about a NIMCache that decide how a NIMService using it is rendered.

Source kinds (nim-operator.md §3.5): *optimized* = NGC source without
``modelEndpoint`` (profiles with pre-built engines, GPU auto-assignment);
*universal* = NGC with ``modelEndpoint`` or a Hugging Face source; *HF model*
= ``hf`` or ``dataStore`` source; *native* = ``status.type == native``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from platforms.objects import dig

CACHE_TYPE_NATIVE = "native"
CACHE_TYPE_MODEL_FREE = "model-free"


def source_of(nimcache: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """``("ngc"|"hf"|"dataStore", source)`` of a NIMCache dict."""
    source = dig(nimcache, "spec", "source", default={})
    for kind in ("ngc", "hf", "dataStore"):
        if isinstance(source.get(kind), Mapping):
            return kind, dict(source[kind])
    return "", {}


def is_optimized(nimcache: Mapping[str, Any]) -> bool:
    kind, src = source_of(nimcache)
    return kind == "ngc" and not src.get("modelEndpoint")


def is_universal(nimcache: Mapping[str, Any]) -> bool:
    kind, src = source_of(nimcache)
    return (kind == "ngc" and bool(src.get("modelEndpoint"))) or kind == "hf"


def is_hf_model(nimcache: Mapping[str, Any]) -> bool:
    return source_of(nimcache)[0] in ("hf", "dataStore")


def is_native(nimcache: Mapping[str, Any]) -> bool:
    return bool(dig(nimcache, "status", "type") == CACHE_TYPE_NATIVE)


def hf_uri(nimcache: Mapping[str, Any]) -> str:
    """``hf://<namespace>/<modelName>`` of an HF or DataStore source, else ""."""
    kind, src = source_of(nimcache)
    if kind not in ("hf", "dataStore"):
        return ""
    return f"hf://{src.get('namespace', 'default')}/{src.get('modelName', '')}"


def cache_pvc_name(nimcache: Mapping[str, Any]) -> str:
    """Name of the PVC a NIMCache caches into (before it reports ``status.pvc``)."""
    name = dig(nimcache, "spec", "storage", "pvc", "name", default="")
    return str(name or f"{dig(nimcache, 'metadata', 'name', default='')}-pvc")
