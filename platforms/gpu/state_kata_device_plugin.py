"""State kata-device-plugin: not rendered yet (filled in by issue 11 part A)."""

from __future__ import annotations

from typing import Any

from platforms.gpu.context import StateContext


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """The state's objects in apply order."""
    return []
