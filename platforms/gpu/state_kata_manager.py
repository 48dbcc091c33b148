"""State ``state-kata-manager``: deprecated, and hard-wired off as in NVIDIA's
operator, so it never has objects; it stays in the list so the state order and
names match NVIDIA's (and so a reconciler deletes anything an older release
left behind).
"""

from __future__ import annotations

from typing import Any

from platforms.gpu.context import StateContext


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """Nothing: the state is never enabled."""
    return []
