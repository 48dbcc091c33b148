"""Kubernetes resource quantities ("500m", "16Gi", "1e3") as exact fractions.

The scheduler compares requests with allocatable amounts; fractions keep
"100m" + "900m" == "1" exact, as the Go ``resource.Quantity`` does.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity; raise ``ValueError`` naming the bad text."""
    if isinstance(value, bool):
        raise ValueError(f"quantities must be strings or numbers, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    text = value.strip()
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {value!r}"
        )
    number, suffix = match.group(1), match.group(2) or ""
    try:
        base = Fraction(number)
    except ValueError as exc:
        raise ValueError(f"invalid quantity {value!r}") from exc
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix[:1] in ("e", "E"):
        return base * Fraction(10) ** int(suffix[1:])
    return base * _DECIMAL[suffix]


def format_quantity(value: Fraction) -> str:
    """Render a fraction as a canonical-enough quantity string (integers plain, else milli)."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return str(float(value))


_PLAIN_INT = re.compile(r"^[0-9]+$")


def parse_milli(value: str | int | float) -> int:
    """A quantity in thousandths, rounded up (``"100m"`` -> 100, ``"2"`` -> 2000).

    Integer arithmetic on these is what the scheduler needs and is far cheaper
    than fractions.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value * 1000
    if isinstance(value, str):
        text = value.strip()
        if _PLAIN_INT.match(text):
            return int(text) * 1000
        if text.endswith("m") and _PLAIN_INT.match(text[:-1]):
            return int(text[:-1])
        for suffix in ("Ki", "Mi", "Gi", "Ti"):
            if text.endswith(suffix) and _PLAIN_INT.match(text[:-2]):
                return int(text[:-2]) * _BINARY[suffix] * 1000
    exact = parse_quantity(value) * 1000
    return -((-exact.numerator) // exact.denominator)
