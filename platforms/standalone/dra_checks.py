"""DRA checks and device selectors as NVIDIA's operator pins them (resourceclaims_test.go).

- ``semver_error``: why a ``versionValue`` is not a semantic version, in the
  words of the semver parser NVIDIA's operator uses (``550.127.08``:
  ``Patch number must not contain leading zeroes "08"``); None when it is one.
- ``dra_spec_problem``: the NIMService controller's own DRA checks, with its
  messages: a ``resourceClaimName`` given twice, and an attribute selector's
  invalid ``versionValue``. A NIMService with one is ``Failed`` with reason
  ``DRAResourcesUnsupported`` and is not rendered.
- ``device_cel_expressions``: the CEL selectors of a generated claim template's
  device request: ``device.driver == "<driverName>"`` first, then each
  attribute selector, then each capacity selector, the attribute or capacity in
  parentheses for ``compareTo`` (``(device.capacity["gpu.nvidia.com"].memory)
  .compareTo(quantity("80Gi")) >= 0``); or the driver and the user's
  ``celExpressions``, which must not be combined with selectors.

Pure: the webhook and the render share them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api.apps.v1alpha1.nimservice import (
    AttributeSelector,
    AttributeSelectorValue,
    CapacitySelector,
    DRADeviceSpec,
    DRAResource,
)

__all__ = [
    "CEL_WITH_SELECTORS",
    "DEFAULT_DRIVER",
    "DRAExpressionError",
    "device_cel_expressions",
    "dra_spec_problem",
    "go_quote",
    "semver_error",
    "split_qualified_name",
]

DEFAULT_DRIVER = "gpu.nvidia.com"
CEL_WITH_SELECTORS = (
    "CELExpressions must not be set if attributeSelectors or capacitySelectors are set"
)
_DIGITS = "0123456789"
_ALPHANUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz-" + _DIGITS
_UINT64_MAX = 2**64 - 1

# Comparison operators by selector op; bool and string values know only == and !=.
_OPS = {
    "Equal": "==",
    "NotEqual": "!=",
    "GreaterThan": ">",
    "GreaterThanOrEqual": ">=",
    "LessThan": "<",
    "LessThanOrEqual": "<=",
}
_EQUALITY_ONLY = ("==", "!=")


class DRAExpressionError(ValueError):
    """A device selector that cannot be written as CEL (the message says why)."""


def go_quote(text: str) -> str:
    """``text`` as Go's ``%q`` writes it (double quotes, backslash escapes)."""
    out = ['"']
    for ch in text:
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _only(text: str, allowed: str) -> bool:
    return all(ch in allowed for ch in text)


def _leading_zero(text: str) -> bool:
    return len(text) > 1 and text[0] == "0"


def _uint(text: str) -> str | None:
    if not text:
        return f'strconv.ParseUint: parsing "{text}": invalid syntax'
    if int(text) > _UINT64_MAX:
        return f"strconv.ParseUint: parsing {go_quote(text)}: value out of range"
    return None


def semver_error(text: str) -> str | None:
    """Why ``text`` is not a semantic version (the parser's words), or None."""
    if not text:
        return "Version string empty"
    parts = text.split(".", 2)
    if len(parts) != 3:
        return "No Major.Minor.Patch elements found"
    for label, part in (("major", parts[0]), ("minor", parts[1])):
        if not _only(part, _DIGITS):
            return f"Invalid character(s) found in {label} number {go_quote(part)}"
        if _leading_zero(part):
            return f"{label.capitalize()} number must not contain leading zeroes {go_quote(part)}"
        err = _uint(part)
        if err:
            return err
    patch = parts[2]
    build: list[str] = []
    pre: list[str] = []
    if "+" in patch:
        patch, _, rest = patch.partition("+")
        build = rest.split(".")
    if "-" in patch:
        patch, _, rest = patch.partition("-")
        pre = rest.split(".")
    if not _only(patch, _DIGITS):
        return f"Invalid character(s) found in patch number {go_quote(patch)}"
    if _leading_zero(patch):
        return f"Patch number must not contain leading zeroes {go_quote(patch)}"
    err = _uint(patch)
    if err:
        return err
    for item in pre:
        if not item:
            return "Prerelease is empty"
        if _only(item, _DIGITS):
            if _leading_zero(item):
                return (
                    f"Numeric PreRelease version must not contain leading zeroes {go_quote(item)}"
                )
            err = _uint(item)
            if err:
                return err
        elif not _only(item, _ALPHANUM):
            return f"Invalid character(s) found in prerelease {go_quote(item)}"
    for item in build:
        if not item:
            return "Build meta data is empty"
        if not _only(item, _ALPHANUM):
            return f"Invalid character(s) found in build meta data {go_quote(item)}"
    return None


def dra_spec_problem(resources: Sequence[DRAResource]) -> str | None:
    """NVIDIA's NIMService DRA check: the first problem, in its words, or None."""
    seen: set[str] = set()
    for i, res in enumerate(resources):
        name = res.resource_claim_name
        if name is None:
            continue
        if name in seen:
            return (
                f"spec.draResources[{i}].resourceClaimName: duplicate resource claim name: '{name}'"
            )
        seen.add(name)
    for i, res in enumerate(resources):
        spec = res.claim_creation_spec
        if spec is None:
            continue
        for j, device in enumerate(spec.devices or []):
            for k, sel in enumerate(device.attribute_selectors or []):
                version = sel.value.version_value if sel.value is not None else None
                if version is None:
                    continue
                err = semver_error(version)
                if err is not None:
                    return (
                        f"spec.draResources[{i}].claimCreationSpec.devices[{j}]"
                        f".attributeSelectors[{k}].value.versionValue.version: "
                        f"invalid version {go_quote(version)}: {err}"
                    )
    return None


def split_qualified_name(key: str, driver: str) -> tuple[str, str]:
    """``gpu.nvidia.com/memory`` -> (``gpu.nvidia.com``, ``memory``); a bare name: the driver's."""
    domain, sep, name = key.partition("/")
    return (domain, name) if sep else (driver, key)


def _attribute_expr(sel: AttributeSelector, driver: str) -> str:
    domain, name = split_qualified_name(sel.key, driver)
    key = f"device.attributes[{go_quote(domain)}].{name}"
    op = _OPS.get(sel.op or "Equal", "==")
    value = sel.value or AttributeSelectorValue()
    if value.bool_value is not None:
        literal, kind = ("true" if value.bool_value else "false"), "bool"
    elif value.int_value is not None:
        return f"{key} {op} {int(value.int_value)}"
    elif value.string_value is not None:
        literal, kind = go_quote(value.string_value), "string"
    elif value.version_value is not None:
        return f"({key}).compareTo(semver({go_quote(value.version_value)})) {op} 0"
    else:
        raise DRAExpressionError("value is nil")
    if op not in _EQUALITY_ONLY:
        raise DRAExpressionError(f'invalid operator "{op}" for {kind} type')
    return f"{key} {op} {literal}"


def _capacity_expr(sel: CapacitySelector, driver: str) -> str:
    if sel.value is None:
        raise DRAExpressionError("value is nil")
    domain, name = split_qualified_name(sel.key, driver)
    key = f"device.capacity[{go_quote(domain)}].{name}"
    op = _OPS.get(sel.op or "Equal", "==")
    return f"({key}).compareTo(quantity({go_quote(str(sel.value))})) {op} 0"


def device_cel_expressions(device: DRADeviceSpec) -> list[str]:
    """The device request's CEL selectors, in NVIDIA's order and form (see the module doc)."""
    driver = device.driver_name or DEFAULT_DRIVER
    exprs = [f"device.driver == {go_quote(driver)}"]
    attributes: list[Any] = list(device.attribute_selectors or [])
    capacities: list[Any] = list(device.capacity_selectors or [])
    if device.cel_expressions:
        if attributes or capacities:
            raise DRAExpressionError(CEL_WITH_SELECTORS)
        return [*exprs, *(str(e) for e in device.cel_expressions)]
    exprs.extend(_attribute_expr(sel, driver) for sel in attributes)
    exprs.extend(_capacity_expr(sel, driver) for sel in capacities)
    return exprs
