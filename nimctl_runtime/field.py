"""Field errors worded like Kubernetes' apimachinery ``field`` package.

One module for every validator in the project: localcluster's schema, CEL and
object checks, and the admission webhooks. The shapes follow
``k8s.io/apimachinery/pkg/util/validation/field``:

* :class:`Path` builds field paths (``Path("spec").child("ports").index(0)``
  reads ``spec.ports[0]``); every constructor also takes the path as a string;
* :class:`FieldError` is ``field.Error``: a type, the path, the bad value and a
  detail; ``str()`` is ``Error()``, :meth:`FieldError.body` is ``ErrorBody()``
  (the bad value printed as Go prints it), :meth:`FieldError.cause` is the
  ``Status.details.causes[]`` entry kube-apiserver sends;
* the constructors ``required``, ``invalid``, ``type_invalid``, ``forbidden``,
  ``duplicate``, ``not_supported``, ``too_long``, ``too_many``, ``not_found``,
  ``internal``;
* :func:`aggregate` is ``ErrorList.ToAggregate().Error()`` (one error: its text;
  several: ``[a, b]``; repeats dropped) and :func:`invalid_message` the message
  of a 422 ``Invalid`` status;
* :class:`ValidationFailed` is what a validator raises to deny an object.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Cause = dict[str, str]

# The error types (field.ErrorType's String()).
REQUIRED = "Required value"
INVALID = "Invalid value"
TYPE_INVALID = "Invalid value"  # same text as Invalid, its own reason
FORBIDDEN = "Forbidden"
DUPLICATE = "Duplicate value"
NOT_SUPPORTED = "Unsupported value"
NOT_FOUND = "Not found"
TOO_LONG = "Too long"
TOO_MANY = "Too many"
INTERNAL = "Internal error"

# The Status cause reasons (metav1.CauseType) of each type.
REASON_INVALID = "FieldValueInvalid"
REASON_TYPE_INVALID = "FieldValueTypeInvalid"
REASON_REQUIRED = "FieldValueRequired"
REASON_NOT_SUPPORTED = "FieldValueNotSupported"
REASON_NOT_FOUND = "FieldValueNotFound"
REASON_TOO_LONG = "FieldValueTooLong"
REASON_TOO_MANY = "FieldValueTooMany"
REASON_DUPLICATE = "FieldValueDuplicate"
REASON_FORBIDDEN = "FieldValueForbidden"
REASON_INTERNAL = "InternalError"

_REASON_OF_TYPE = {
    REQUIRED: REASON_REQUIRED,
    INVALID: REASON_INVALID,
    FORBIDDEN: REASON_FORBIDDEN,
    DUPLICATE: REASON_DUPLICATE,
    NOT_SUPPORTED: REASON_NOT_SUPPORTED,
    NOT_FOUND: REASON_NOT_FOUND,
    TOO_LONG: REASON_TOO_LONG,
    TOO_MANY: REASON_TOO_MANY,
    INTERNAL: REASON_INTERNAL,
}
# Types whose text never shows the value (ErrorBody's first cases).
_VALUELESS = frozenset({REQUIRED, FORBIDDEN, TOO_LONG, INTERNAL})


class _Omitted:
    """The bad value of an error that does not print one (apimachinery's omitValue)."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Any = _Omitted()


# --------------------------------------------------------------------------- paths


class Path:
    """A field path: ``Path("spec").child("ports").index(0).child("port")``."""

    __slots__ = ("_text",)

    def __init__(self, root: str = "", *more: str) -> None:
        text = root
        for name in more:
            text = child_path(text, name)
        self._text = text

    def child(self, name: str, *more: str) -> Path:
        return Path(self._text, name, *more)

    def index(self, i: int) -> Path:
        return _path(index_path(self._text, i))

    def key(self, k: str) -> Path:
        """A map entry: ``metadata.labels[app]`` (field.Path.Key)."""
        return _path(f"{self._text}[{k}]")

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Path({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Path) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)


def _path(text: str) -> Path:
    p = Path()
    p._text = text
    return p


def child_path(path: str, name: str) -> str:
    """``spec`` + ``replicas`` -> ``spec.replicas`` (Path.Child on strings)."""
    return f"{path}.{name}" if path else name


def index_path(path: str, index: int) -> str:
    """``spec.items`` + 0 -> ``spec.items[0]`` (Path.Index on strings)."""
    return f"{path}[{index}]"


# --------------------------------------------------------------------------- value printing


def go_float(value: float) -> str:
    """Go's ``%v`` of a float64."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exp = text.split("e")
        sign = "-" if exp.startswith("-") else "+"
        digits = exp.lstrip("+-").rjust(2, "0")
        text = f"{mantissa}e{sign}{digits}"
    return text


def go_quote(text: str) -> str:
    """Approximate Go's ``%q`` for a string."""
    return json.dumps(text, ensure_ascii=False)


def _go_inner(value: Any) -> str:
    """Go ``%#v`` of a value stored in an ``interface{}``."""
    if value is None:
        return "interface {}(nil)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    if isinstance(value, dict):
        inner = ", ".join(f"{go_quote(str(k))}:{_go_inner(value[k])}" for k in sorted(value))
        return "map[string]interface {}{" + inner + "}"
    if isinstance(value, list | tuple):
        return "[]interface {}{" + ", ".join(_go_inner(v) for v in value) + "}"
    return go_quote(str(value))


@dataclass(frozen=True)
class Unstructured:
    """A bad value decoded from JSON into Go's ``interface{}`` (a custom resource's field).

    ``ErrorBody`` prints its maps and lists as Go's ``%#v`` does
    (``map[string]interface {}{"a":1}``, ``[]interface {}{"x"}``), the wording
    kube-apiserver's schema validation shows. Other composite bad values (a
    typed validator's) are printed as compact JSON.
    """

    value: Any


def format_bad_value(value: Any) -> str:
    """How ``field.Error.ErrorBody`` prints a bad value (``null`` is quoted, as in Go)."""
    unstructured = isinstance(value, Unstructured)
    if unstructured:
        value = value.value
    if value is None:
        return '"null"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_quote(value)
    if unstructured or not isinstance(value, dict | list | tuple):
        return _go_inner(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path (``spec.storage.pvc.name``): apimachinery's field.Error."""

    type: str
    field: str
    value: Any = None
    detail: str = ""
    reason_override: str = ""

    @property
    def reason(self) -> str:
        """The ``Status.details.causes[].reason`` spelling of the type."""
        return self.reason_override or _REASON_OF_TYPE.get(self.type, REASON_INVALID)

    def body(self) -> str:
        """The message without the field path (``ErrorBody()``)."""
        if self.type in _VALUELESS or self.value is OMIT:
            text = self.type
        else:
            text = f"{self.type}: {format_bad_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def cause(self) -> Cause:
        """The ``Status.details.causes[]`` entry of this error."""
        return {"reason": self.reason, "message": self.body(), "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}" if self.field else self.body()


ErrorList = list[FieldError]


def required(path: Path | str, detail: str = "") -> FieldError:
    """field.Required."""
    return FieldError(REQUIRED, str(path), OMIT, detail)


def invalid(path: Path | str, value: Any, detail: str = "") -> FieldError:
    """field.Invalid."""
    return FieldError(INVALID, str(path), value, detail)


def type_invalid(path: Path | str, value: Any, detail: str) -> FieldError:
    """field.TypeInvalid (the wording of Invalid, its own reason)."""
    return FieldError(TYPE_INVALID, str(path), value, detail, REASON_TYPE_INVALID)


def forbidden(path: Path | str, detail: str = "") -> FieldError:
    """field.Forbidden."""
    return FieldError(FORBIDDEN, str(path), OMIT, detail)


def duplicate(path: Path | str, value: Any) -> FieldError:
    """field.Duplicate."""
    return FieldError(DUPLICATE, str(path), value)


def not_found(path: Path | str, value: Any) -> FieldError:
    """field.NotFound."""
    return FieldError(NOT_FOUND, str(path), value)


def not_supported(path: Path | str, value: Any, supported: Iterable[Any]) -> FieldError:
    """field.NotSupported: lists the supported values, quoted."""
    quoted = []
    for item in supported:
        text = item if isinstance(item, str) else json.dumps(item, separators=(",", ":"))
        quoted.append(go_quote(text))
    detail = "supported values: " + ", ".join(quoted) if quoted else ""
    return FieldError(NOT_SUPPORTED, str(path), value, detail)


def too_long(path: Path | str, max_length: int) -> FieldError:
    """field.TooLong (the value is not printed)."""
    unit = "byte" if max_length == 1 else "bytes"
    return FieldError(TOO_LONG, str(path), OMIT, f"must have at most {max_length} {unit}")


def too_many(path: Path | str, actual: int, maximum: int) -> FieldError:
    """field.TooMany."""
    unit = "item" if maximum == 1 else "items"
    return FieldError(TOO_MANY, str(path), actual, f"must have at most {maximum} {unit}")


def internal(path: Path | str, detail: str) -> FieldError:
    """field.InternalError."""
    return FieldError(INTERNAL, str(path), OMIT, detail)


def cause_error_text(cause: Mapping[str, Any]) -> str:
    """``field: message`` of one Status cause, as in an aggregated Invalid error's message."""
    return f"{cause['field']}: {cause['message']}" if cause.get("field") else str(cause["message"])


def aggregate(errors: Iterable[FieldError]) -> str:
    """One line for all errors, like Go's ``ErrorList.ToAggregate().Error()`` (repeats dropped)."""
    texts: list[str] = []
    for e in errors:
        s = str(e)
        if s not in texts:
            texts.append(s)
    if len(texts) == 1:
        return texts[0]
    return "[" + ", ".join(texts) + "]"


def invalid_message(kind: str, name: str, causes: Sequence[Mapping[str, Any]]) -> str:
    """Status.message of a 422, e.g. ``NIMService.apps.nvidia.com "x" is invalid: [a, b]``.

    *causes* are Status causes (``FieldError.cause()``), listed as given.
    """
    texts = [cause_error_text(c) for c in causes]
    if not texts:
        return f'{kind} "{name}" is invalid'
    body = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return f'{kind} "{name}" is invalid: {body}'


class ValidationFailed(Exception):
    """Raised by a validator: the object is denied with these field errors."""

    def __init__(self, errors: list[FieldError], warnings: list[str] | None = None) -> None:
        if not errors:
            raise ValueError("ValidationFailed needs at least one FieldError")
        self.errors = errors
        self.warnings = list(warnings or [])
        super().__init__(aggregate(errors))
