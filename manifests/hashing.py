"""Stable hashes of desired objects and CR specs.

``nvidia.com/last-applied-hash`` on an object is the hash of the object as it
was rendered (without that annotation); the reconciler writes only when it
changes. ``nvidia.com/parent-spec-hash`` is the hash of the owning CR's spec.
Hashes are computed over canonical JSON (sorted keys), so the same input gives
the same hash in every process and on every run.

``short_hash`` reproduces the Go operator's short-name hash (FNV-1a 32 of the
string, decimal, mapped through ``rand.SafeEncodeString``) because it appears
in object names (DRA claim templates) that must match NVIDIA's.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from nimctl_runtime.client import codec

LAST_APPLIED_HASH_ANNOTATION = "nvidia.com/last-applied-hash"
PARENT_SPEC_HASH_ANNOTATION = "nvidia.com/parent-spec-hash"

_SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def _safe_encode(text: str) -> str:
    return "".join(_SAFE_ALPHABET[ord(c) % len(_SAFE_ALPHABET)] for c in text)


def _fnv1a_32(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h ^= b
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def short_hash(text: str, length: int = 12) -> str:
    """Go-compatible short hash of a string: ``short_hash("test-nimservice") == "6bb8bf548c"``."""
    return _safe_encode(str(_fnv1a_32(text.encode())))[:length]


def canonical_json(value: Any) -> str:
    """Deterministic JSON text of a JSON-shaped value (sorted keys, no spaces)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def hash_value(value: Any) -> str:
    """Hash of any JSON-shaped value: 16 characters from SHA-256, safe-encoded."""
    digest = hashlib.sha256(canonical_json(value).encode()).hexdigest()[:16]
    return _safe_encode(digest)


def desired_hash(obj: dict[str, Any]) -> str:
    """Hash of a rendered object, ignoring its own ``last-applied-hash`` annotation."""
    meta = obj.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(annotations, dict) or (
        annotations and LAST_APPLIED_HASH_ANNOTATION not in annotations
    ):
        return hash_value(obj)
    # Shallow copies only: the object itself is never modified.
    clean_meta = dict(meta or {})
    rest = {k: v for k, v in annotations.items() if k != LAST_APPLIED_HASH_ANNOTATION}
    if rest:
        clean_meta["annotations"] = rest
    else:
        # An empty map and an absent one are the same object to the server.
        del clean_meta["annotations"]
    return hash_value({**obj, "metadata": clean_meta})


def stamp_hash(obj: dict[str, Any]) -> dict[str, Any]:
    """Set ``nvidia.com/last-applied-hash`` on ``obj`` (in place) and return it."""
    value = desired_hash(obj)
    obj.setdefault("metadata", {}).setdefault("annotations", {})[LAST_APPLIED_HASH_ANNOTATION] = (
        value
    )
    return obj


def stamped_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A fresh, unshared copy of ``obj`` (without a hash yet) carrying its hash annotation.

    One canonical serialization serves both as the hash input and as the copy,
    so rendering pays for one ``json.dumps`` per object.
    """
    meta_in = obj.get("metadata")
    if isinstance(meta_in, dict) and meta_in.get("annotations") == {}:
        # An empty map and an absent one are the same object to the server.
        obj = {**obj, "metadata": {k: v for k, v in meta_in.items() if k != "annotations"}}
    text = canonical_json(obj)
    value = _safe_encode(hashlib.sha256(text.encode()).hexdigest()[:16])
    # The copy: orjson reads the text back ~2.5x faster (the hash itself stays json's
    # text, so hashes stamped by earlier versions still match).
    out: dict[str, Any] = codec.loads(text)
    meta = out.setdefault("metadata", {})
    if not meta.get("annotations"):
        meta["annotations"] = {}
    meta["annotations"][LAST_APPLIED_HASH_ANNOTATION] = value
    return out


def hash_changed(desired: dict[str, Any], existing: dict[str, Any] | None) -> bool:
    """Whether ``existing`` (as read from the server) lacks ``desired``'s hash."""
    if existing is None:
        return True
    want = desired.get("metadata", {}).get("annotations", {}).get(LAST_APPLIED_HASH_ANNOTATION)
    have = (existing.get("metadata", {}).get("annotations") or {}).get(LAST_APPLIED_HASH_ANNOTATION)
    return want is None or want != have
