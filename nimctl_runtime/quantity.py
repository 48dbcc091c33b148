"""Kubernetes resource quantities (``500Mi``, ``2``, ``100m``, ``1e3``) as exact numbers.

Parsing follows apimachinery's ``resource.Quantity`` grammar: a signed decimal
number with an optional binary-SI (Ki..Ei), decimal-SI (n, u, m, k, M..E) or
decimal-exponent suffix. Values are returned as :class:`fractions.Fraction` so
comparisons (``<= 0``, fits-on-node) are exact.
"""

from __future__ import annotations

import re
from fractions import Fraction

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
_QUANTITY = re.compile(
    r"^(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$"
)


class QuantityError(ValueError):
    """The text is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> Fraction:
    """Parse a quantity; raise QuantityError saying what is wrong."""
    if isinstance(value, bool):
        raise QuantityError(f"quantity must be a string or number, not {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(str(value))
    text = value.strip()
    m = _QUANTITY.match(text)
    if not m:
        raise QuantityError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {value!r}"
        )
    number = Fraction(m.group("num"))
    suffix = m.group("suffix") or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    return number * Fraction(10) ** int(suffix[1:])


def format_quantity(value: Fraction) -> str:
    """Render a value as a quantity string: integers plain, else in milli-units."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    if milli.denominator == 1:
        return f"{milli.numerator}m"
    return str(float(value))


_PLAIN_INT = re.compile(r"^[0-9]+$")


def parse_milli(value: str | int | float) -> int:
    """A quantity in thousandths, rounded up (``"100m"`` -> 100, ``"2"`` -> 2000).

    Integer arithmetic on these is what a scheduler needs and is far cheaper than
    fractions; the common spellings take a fast path.
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
