"""Resource quantities parse to the exact values Kubernetes gives them."""

from __future__ import annotations

from fractions import Fraction

import pytest

from nimctl_runtime.quantity import QuantityError, parse_quantity


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1Gi", 2**30),
        ("500Mi", 500 * 2**20),
        ("100m", Fraction(1, 10)),
        ("2", 2),
        ("1.5", Fraction(3, 2)),
        ("1e3", 1000),
        ("16G", 16 * 10**9),
        ("0", 0),
        ("-1", -1),
        (8, 8),
    ],
)
def test_parse(text: str | int, value: Fraction | int) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "1Gb", "1.2.3", "Mi"])
def test_rejects_garbage(text: str) -> None:
    with pytest.raises(QuantityError, match="quantities must match"):
        parse_quantity(text)
