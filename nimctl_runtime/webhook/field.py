"""Field errors worded like Kubernetes' apimachinery ``field`` package.

Validators collect :class:`FieldError` values and raise :class:`ValidationFailed`;
the admission server turns them into one denial whose message reads exactly like
a Go operator's aggregated ``field.ErrorList`` (one error: its text; several:
``[a, b]``), so users see the wording they know from kube-apiserver.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Error types whose text omits the offending value (as apimachinery does).
_VALUELESS = {"Required value", "Forbidden", "Too long", "Internal error", "Too many"}


def _format_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path (``spec.storage.pvc.name``)."""

    type: str
    field: str
    value: Any = None
    detail: str = ""

    @property
    def reason(self) -> str:
        """The ``Status.details.causes[].reason`` spelling of the type."""
        return {
            "Required value": "FieldValueRequired",
            "Invalid value": "FieldValueInvalid",
            "Forbidden": "FieldValueForbidden",
            "Duplicate value": "FieldValueDuplicate",
            "Unsupported value": "FieldValueNotSupported",
            "Too long": "FieldValueTooLong",
            "Too many": "FieldValueTooMany",
            "Internal error": "InternalError",
        }.get(self.type, "FieldValueInvalid")

    def body(self) -> str:
        text = self.type if self.type in _VALUELESS else f"{self.type}: {_format_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def required(path: str, detail: str = "") -> FieldError:
    return FieldError("Required value", path, None, detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError("Invalid value", path, value, detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError("Forbidden", path, None, detail)


def duplicate(path: str, value: Any) -> FieldError:
    return FieldError("Duplicate value", path, value, "")


def not_supported(path: str, value: Any, supported: Iterable[str]) -> FieldError:
    values = ", ".join(json.dumps(s) for s in supported)
    return FieldError("Unsupported value", path, value, f"supported values: {values}")


def internal(path: str, detail: str) -> FieldError:
    return FieldError("Internal error", path, None, detail)


def aggregate(errors: Iterable[FieldError]) -> str:
    """One line for all errors, like Go's ``ErrorList.ToAggregate().Error()``."""
    texts: list[str] = []
    for e in errors:
        s = str(e)
        if s not in texts:  # an aggregate never repeats the same error
            texts.append(s)
    if len(texts) == 1:
        return texts[0]
    return "[" + ", ".join(texts) + "]"


class ValidationFailed(Exception):
    """Raised by a validator: the object is denied with these field errors."""

    def __init__(self, errors: list[FieldError], warnings: list[str] | None = None) -> None:
        if not errors:
            raise ValueError("ValidationFailed needs at least one FieldError")
        self.errors = errors
        self.warnings = list(warnings or [])
        super().__init__(aggregate(errors))
