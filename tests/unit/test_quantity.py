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


@pytest.mark.parametrize(("text", "milli"), [("100m", 100), ("2", 2000), ("1Ki", 1024000), ("0.5", 500), ("1u", 1), (3, 3000)])
def test_parse_milli_rounds_up(text: str | int, milli: int) -> None:
    from nimctl_runtime.quantity import parse_milli

    assert parse_milli(text) == milli


def test_format_quantity() -> None:
    from nimctl_runtime.quantity import format_quantity

    assert format_quantity(Fraction(2)) == "2"
    assert format_quantity(Fraction(1, 10)) == "100m"
