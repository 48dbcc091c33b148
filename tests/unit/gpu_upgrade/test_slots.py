"""maxParallelUpgrades / maxUnavailable arithmetic (§4.3), table-driven, and the percentages."""

from __future__ import annotations

import pytest

from controllers.gpu.upgrade.slots import SlotCounts, scaled_value, upgrades_available


@pytest.mark.parametrize(
    ("value", "total", "want"),
    [
        (None, 7, 7),  # unset: every node
        (3, 10, 3),
        ("3", 10, 3),
        ("25%", 10, 3),  # 2.5 rounded up
        ("25%", 4, 1),
        ("50%", 5, 3),
        ("100%", 9, 9),
        ("0%", 9, 0),
        ("1%", 100, 1),
        ("25%", 0, 0),
    ],
)
def test_scaled_value(value: int | str | None, total: int, want: int) -> None:
    assert scaled_value(value, total) == want


def test_scaled_value_rejects_text() -> None:
    with pytest.raises(ValueError, match="string is not a percentage: 'lots'"):
        scaled_value("lots", 10)


@pytest.mark.parametrize(
    ("case", "counts", "max_parallel", "max_unavailable", "want"),
    [
        ("one at a time, nothing in progress", SlotCounts(10, 0, 10, 0), 1, 10, 1),
        ("one at a time, one in progress", SlotCounts(10, 1, 9, 1), 1, 10, 0),
        ("two parallel, one in progress", SlotCounts(10, 1, 9, 1), 2, 10, 1),
        ("unlimited parallel takes every upgrade-required node", SlotCounts(10, 0, 6, 0), 0, 10, 6),
        ("unlimited parallel capped by maxUnavailable", SlotCounts(10, 0, 6, 0), 0, 4, 4),
        ("maxUnavailable caps maxParallel", SlotCounts(10, 0, 10, 0), 5, 3, 3),
        ("unavailable nodes use up maxUnavailable", SlotCounts(10, 0, 10, 3), 5, 3, 0),
        ("unavailable above maxUnavailable", SlotCounts(10, 2, 8, 4), 5, 3, 0),
        ("partly used maxUnavailable leaves the rest", SlotCounts(10, 1, 9, 1), 5, 3, 2),
        ("maxUnavailable equal to total does not trim", SlotCounts(4, 0, 4, 1), 4, 4, 4),
        ("more in progress than maxParallel", SlotCounts(10, 3, 7, 3), 2, 10, -1),
    ],
)
def test_upgrades_available(
    case: str, counts: SlotCounts, max_parallel: int, max_unavailable: int, want: int
) -> None:
    assert upgrades_available(counts, max_parallel, max_unavailable) == want, case
