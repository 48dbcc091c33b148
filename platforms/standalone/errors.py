"""Why a NIMService cannot be rendered yet, in the reasons NVIDIA's status uses.

The reconciler maps a ``RenderError`` to the ``Failed`` (or, for a cache that is
still being filled, ``NotReady``) condition with ``reason`` and ``message``.
"""

from __future__ import annotations

from platforms.contract import ReconcileError


class RenderError(ReconcileError):
    """The CR cannot be rendered; ``reason`` is the status condition reason."""


class NIMCacheNotFound(RenderError):
    """``spec.storage.nimCache.name`` names a NIMCache that does not exist."""

    reason = "NIMCacheNotFound"


class NIMCacheNotReady(RenderError):
    """The NIMCache exists but has not finished caching (not a failure: wait for it)."""

    reason = "NIMCacheNotReady"


class NIMCacheFailed(RenderError):
    """The NIMCache is in state Failed."""

    reason = "NIMCacheFailed"


class UnsupportedSpec(RenderError):
    """A spec this renderer does not produce objects for (e.g. another platform)."""

    reason = "Failed"
