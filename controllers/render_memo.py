"""What the skeleton keeps of a CR's last render: each desired object's identity and hash.

A pass whose render inputs did not change (``Kind.memo_key``) only needs the
render to ask ``plan`` whether anything must be written, and ``plan`` only
compares each desired object's ``nvidia.com/last-applied-hash`` (and a
Deployment's replicas) with the live object's. So the memo keeps exactly that,
``Rendered`` per desired object (about the size of the render compressed), and
a pass over a settled CR decides "nothing to write" from it without the
objects. Only when something must be written (a live object drifted, is
missing, or an owned object is to be pruned) is the CR rendered again.

Before (issue 30) the memo held the whole render as compressed JSON: written
once per CR, it cost a JSON encode and a zlib compress (~4% of the operator's
CPU while 1,000 NIMServices were created, most never read back in that
window), and every reuse a decompress and decode. A render whose plan needs
more than hashes (a Deployment an HPA scales: its hash is taken without
``replicas``) is still kept that way (``blob``).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controllers.plan import Key, key, scaled_by_hpa
from controllers.sync import ensure_hash, hash_of
from nimctl_runtime.client import codec
from nimctl_runtime.meta import Obj, is_controlled_by, namespace_of

__all__ = ["RenderMemo", "Rendered", "prunes_any", "summarize", "unchanged"]


@dataclass(frozen=True, slots=True)
class Rendered:
    """One desired object as ``plan`` compares it."""

    key: Key
    #: the object's namespace ("" when the render left it to the CR's)
    namespace: str
    hash: str
    #: a Deployment's ``spec.replicas`` (None: not compared)
    replicas: Any = None


@dataclass(frozen=True, slots=True)
class RenderMemo:
    """The last render of one CR under ``key`` (``Kind.memo_key``)."""

    key: tuple[Any, ...]
    #: each desired object, in render order (None: kept as ``blob``)
    objects: tuple[Rendered, ...] | None
    #: the whole render as compressed JSON, only where ``objects`` cannot serve
    blob: bytes | None = None

    @classmethod
    def of(cls, memo_key: tuple[Any, ...], desired: Sequence[Obj]) -> RenderMemo:
        objects = summarize(desired)
        if objects is not None:
            return cls(memo_key, objects)
        return cls(memo_key, None, zlib.compress(codec.dumps(list(desired)), 1))

    def restore(self) -> list[Obj] | None:
        """The render itself, where it was kept whole (None: only the summary)."""
        if self.blob is None:
            return None
        restored: list[Obj] = codec.loads(zlib.decompress(self.blob))
        return restored


def summarize(desired: Sequence[Obj]) -> tuple[Rendered, ...] | None:
    """``Rendered`` for each desired object (stamping a missing hash, as ``plan``
    does), or None when ``plan`` needs more than hashes (an HPA-scaled Deployment)."""
    if scaled_by_hpa(desired):
        return None
    out: list[Rendered] = []
    for obj in desired:
        digest = hash_of(ensure_hash(obj))
        if digest is None:
            return None
        k = key(obj)
        replicas = (obj.get("spec") or {}).get("replicas") if k[1] == "Deployment" else None
        out.append(Rendered(k, namespace_of(obj), digest, replicas))
    return tuple(out)


def unchanged(objects: Iterable[Rendered], live: Mapping[Key, Mapping[str, Any]]) -> bool:
    """Whether every desired object is live with its hash (and replicas): what ``plan``
    needs to list no write for any of them, whatever their write policy."""
    for r in objects:
        current = live.get(r.key)
        if current is None or hash_of(current) != r.hash:
            return False
        if r.replicas is not None and (current.get("spec") or {}).get("replicas") != r.replicas:
            return False
    return True


def prunes_any(
    owned: Iterable[Mapping[str, Any]],
    objects: Iterable[Rendered],
    owner_uid: str,
    deleting: Callable[[Mapping[str, Any]], bool],
) -> bool:
    """Whether an owned object outside the render may be pruned (then ``plan`` must run)."""
    wanted = {r.key for r in objects}
    return any(
        key(o) not in wanted and is_controlled_by(o, owner_uid) and not deleting(o) for o in owned
    )
