"""How many nodes may start upgrading now: maxParallelUpgrades and maxUnavailable (§4.3).

The arithmetic is NVIDIA's ``GetUpgradesAvailable``; the counts come from the
state snapshot. ``scaled_value`` is apimachinery's
``GetScaledValueFromIntOrPercent`` (percentages of the managed nodes, rounded
up) with its error texts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SlotCounts", "scaled_value", "upgrades_available"]

_PERCENT = re.compile(r"^(\d+)%$")


def scaled_value(value: int | str | None, total: int, *, round_up: bool = True) -> int:
    """An IntOrString against ``total``: ``3`` is 3, ``"25%"`` of 10 is 3 (rounded up).

    ``None`` means every node (NVIDIA's fallback when the field is unset).
    """
    if value is None:
        return total
    if isinstance(value, bool):
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    text = str(value)
    match = _PERCENT.match(text)
    if match is None:
        if text.isdigit():
            return int(text)
        raise ValueError(
            f"invalid value for IntOrString: invalid type: string is not a percentage: {text!r}"
        )
    scaled = int(match.group(1)) * total
    return -(-scaled // 100) if round_up else scaled // 100


@dataclass(frozen=True)
class SlotCounts:
    """The numbers ``upgrades_available`` reads from the snapshot."""

    total: int
    """Managed nodes (nodes running a driver pod)."""
    in_progress: int
    """Managed nodes not in unknown, upgrade-done or upgrade-required."""
    upgrade_required: int
    """Nodes in upgrade-required."""
    unavailable: int
    """Nodes cordoned or NotReady, plus nodes in cordon-required."""


def upgrades_available(counts: SlotCounts, max_parallel: int, max_unavailable: int) -> int:
    """How many upgrade-required nodes may start now (may be negative: none)."""
    avail = counts.upgrade_required if max_parallel == 0 else max_parallel - counts.in_progress
    avail = min(avail, max_unavailable)
    if counts.unavailable >= max_unavailable:
        return 0
    if max_unavailable < counts.total and counts.unavailable + avail > max_unavailable:
        avail = max_unavailable - counts.unavailable
    return avail
