"""Label and field selectors with Kubernetes' syntax and matching rules.

Used by localcluster (list/watch ``labelSelector``/``fieldSelector``), the cache
(filtered informers, ``cache.list(label_selector=...)``) and controllers
(``spec.selector`` of Deployments and friends). The grammar follows
``k8s.io/apimachinery/pkg/labels`` and ``.../fields``:

* label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x,y)``,
  ``a`` (exists), ``!a`` (does not exist), ``a>1``/``a<1`` (integer compare),
  requirements joined by commas (all must hold);
* field selectors: ``f=v``, ``f==v``, ``f!=v`` joined by commas, with ``\\``
  escaping ``,``, ``=`` and ``\\`` inside values.

``!=`` and ``notin`` match objects that lack the label, as in Kubernetes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_NAME_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$")
_DNS1123_SUBDOMAIN_RE = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

OPERATORS = ("in", "notin", "=", "==", "!=", "exists", "!", "gt", "lt")


class SelectorParseError(ValueError):
    """A selector string or LabelSelector that Kubernetes would reject."""


def validate_label_key(key: str) -> None:
    """Raise SelectorParseError unless *key* is a qualified name (``[prefix/]name``)."""
    prefix, sep, name = key.rpartition("/")
    if sep and (not prefix or len(prefix) > 253 or not _DNS1123_SUBDOMAIN_RE.match(prefix)):
        raise SelectorParseError(
            f"invalid label key {key!r}: prefix part must be a lowercase RFC 1123 subdomain"
        )
    if not name or len(name) > 63 or not _NAME_RE.match(name):
        raise SelectorParseError(
            f"invalid label key {key!r}: name part must consist of alphanumeric characters, "
            "'-', '_' or '.', and must start and end with an alphanumeric character "
            "(at most 63 characters)"
        )


def validate_label_value(value: str) -> None:
    """Raise SelectorParseError unless *value* is a valid label value."""
    if len(value) > 63 or not _VALUE_RE.match(value):
        raise SelectorParseError(
            f"invalid label value {value!r}: a valid label must be an empty string or consist "
            "of alphanumeric characters, '-', '_' or '.', and must start and end with an "
            "alphanumeric character (at most 63 characters)"
        )


@dataclass(frozen=True)
class Requirement:
    """One clause of a label selector: *key* *operator* *values*."""

    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.operator
        if op in ("=", "==", "in"):
            return self.key in labels and labels[self.key] in self.values
        if op in ("!=", "notin"):
            return self.key not in labels or labels[self.key] not in self.values
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op in ("gt", "lt"):
            if self.key not in labels:
                return False
            try:
                have = int(labels[self.key])
            except ValueError:
                return False
            want = int(self.values[0])
            return have > want if op == "gt" else have < want
        return False

    def __str__(self) -> str:
        op = self.operator
        if op == "exists":
            return self.key
        if op == "!":
            return "!" + self.key
        if op in ("in", "notin"):
            return f"{self.key} {op} ({','.join(sorted(self.values))})"
        if op == "gt":
            return f"{self.key}>{self.values[0]}"
        if op == "lt":
            return f"{self.key}<{self.values[0]}"
        return f"{self.key}{op}{self.values[0]}"


def _requirement(key: str, operator: str, values: Iterable[str]) -> Requirement:
    validate_label_key(key)
    vals = tuple(values)
    if operator in ("in", "notin"):
        vals = tuple(sorted(set(vals)))
    if operator in ("in", "notin") and not vals:
        raise SelectorParseError(f"for 'in', 'notin' operators, values set can't be empty ({key})")
    if operator in ("=", "==", "!=") and len(vals) != 1:
        raise SelectorParseError(f"exact-match compatibility requires one single value ({key})")
    if operator in ("exists", "!") and vals:
        raise SelectorParseError(f"values set must be empty for exists and does not exist ({key})")
    if operator in ("gt", "lt"):
        if len(vals) != 1:
            raise SelectorParseError(
                f"for 'Gt', 'Lt' operators, exactly one value is required ({key})"
            )
        try:
            int(vals[0])
        except ValueError as exc:
            raise SelectorParseError(
                f"for 'Gt', 'Lt' operators, the value must be an integer ({key})"
            ) from exc
    else:
        for v in vals:
            validate_label_value(v)
    return Requirement(key, operator, vals)


_TOKEN_RE = re.compile(r"\s*(!=|==|=|,|\(|\)|!|>|<|[^\s,()!=<>]+)")


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if not m:
            raise SelectorParseError(f"unable to parse requirement: {text[pos:]!r}")
        tokens.append(m.group(1))
        pos = m.end()
    return tokens


class Selector:
    """A conjunction of label requirements; the empty selector matches everything."""

    __slots__ = ("_nothing", "requirements")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        self.requirements: tuple[Requirement, ...] = tuple(
            sorted(requirements, key=lambda r: (r.key, r.operator, r.values))
        )
        self._nothing = nothing

    @classmethod
    def everything(cls) -> Selector:
        return cls()

    @classmethod
    def nothing(cls) -> Selector:
        return cls(nothing=True)

    def empty(self) -> bool:
        """True when the selector matches every object."""
        return not self.requirements and not self._nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self._nothing:
            return False
        lbls: Mapping[str, str] = labels or {}
        return all(r.matches(lbls) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"Selector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Selector)
            and self.requirements == other.requirements
            and self._nothing == other._nothing
        )

    def __hash__(self) -> int:
        return hash((self.requirements, self._nothing))

    @classmethod
    def from_labels(cls, labels: Mapping[str, str]) -> Selector:
        """A selector requiring exactly these key=value pairs (like ``labels.SelectorFromSet``)."""
        return cls(_requirement(k, "=", [v]) for k, v in labels.items())

    @classmethod
    def parse(cls, text: str | None) -> Selector:
        """Parse a label selector string; raises SelectorParseError with Kubernetes' wording."""
        if text is None or not text.strip():
            return cls()
        tokens = _tokenize(text)
        reqs: list[Requirement] = []
        i = 0
        n = len(tokens)

        def expect_value_list(start: int, key: str) -> tuple[list[str], int]:
            if start >= n or tokens[start] != "(":
                raise SelectorParseError(f"found '{_at(start)}', expected: '(' after {key}")
            j = start + 1
            values: list[str] = []
            expect_value = True
            while j < n and tokens[j] != ")":
                tok = tokens[j]
                if tok == ",":
                    if expect_value:
                        values.append("")
                    expect_value = True
                else:
                    if not expect_value:
                        raise SelectorParseError(f"found '{tok}', expected: ',' or ')'")
                    values.append(tok)
                    expect_value = False
                j += 1
            if j >= n:
                raise SelectorParseError("found '', expected: ')'")
            if expect_value and values:
                values.append("")
            return values, j + 1

        def _at(j: int) -> str:
            return tokens[j] if j < n else ""

        while i < n:
            tok = tokens[i]
            if tok == "!":
                key = _at(i + 1)
                if not key or key in ",()!=<>":
                    raise SelectorParseError(f"found '{key}', expected: identifier after '!'")
                reqs.append(_requirement(key, "!", []))
                i += 2
            elif tok in (",", "(", ")", "=", "==", "!=", ">", "<"):
                raise SelectorParseError(
                    f"found '{tok}', expected: !, identifier, or 'end of string'"
                )
            else:
                key = tok
                nxt = _at(i + 1)
                if nxt in ("", ","):
                    reqs.append(_requirement(key, "exists", []))
                    i += 1
                elif nxt in ("=", "==", "!="):
                    val = _at(i + 2)
                    if val in ("(", ")", "=", "==", "!=", "!"):
                        raise SelectorParseError(f"found '{val}', expected: identifier")
                    op = "!=" if nxt == "!=" else "="
                    if val in ("", ","):
                        reqs.append(_requirement(key, op, [""]))
                        i += 2
                    else:
                        reqs.append(_requirement(key, op, [val]))
                        i += 3
                elif nxt in (">", "<"):
                    val = _at(i + 2)
                    reqs.append(_requirement(key, "gt" if nxt == ">" else "lt", [val]))
                    i += 3
                elif nxt in ("in", "notin"):
                    values, i = expect_value_list(i + 2, key)
                    reqs.append(_requirement(key, nxt, values))
                else:
                    raise SelectorParseError(
                        f"found '{nxt}', expected: in, notin, =, ==, !=, gt, lt"
                    )
            if i < n:
                if tokens[i] != ",":
                    raise SelectorParseError(
                        f"found '{tokens[i]}', expected: ',' or 'end of string'"
                    )
                i += 1
                if i >= n:
                    raise SelectorParseError("found '', expected: identifier after ','")
        return cls(reqs)

    @classmethod
    def from_label_selector(cls, selector: Mapping[str, Any] | None) -> Selector:
        """Convert a metav1.LabelSelector dict; ``None`` matches nothing, ``{}`` everything."""
        if selector is None:
            return cls.nothing()
        reqs: list[Requirement] = []
        for k, v in (selector.get("matchLabels") or {}).items():
            reqs.append(_requirement(str(k), "=", [str(v)]))
        ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
        for expr in selector.get("matchExpressions") or []:
            op = ops.get(str(expr.get("operator")))
            if op is None:
                raise SelectorParseError(
                    f"{expr.get('operator')!r} is not a valid label selector operator"
                )
            values = [str(v) for v in (expr.get("values") or [])]
            reqs.append(_requirement(str(expr.get("key", "")), op, values))
        return cls(reqs)


@dataclass(frozen=True)
class FieldRequirement:
    """One clause of a field selector: *field* (``=`` or ``!=``) *value*."""

    field: str
    operator: str
    value: str

    def __str__(self) -> str:
        escaped = self.value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")
        return f"{self.field}{self.operator}{escaped}"


class FieldSelector:
    """A conjunction of field requirements over string-valued object fields."""

    __slots__ = ("requirements",)

    def __init__(self, requirements: Iterable[FieldRequirement] = ()) -> None:
        self.requirements: tuple[FieldRequirement, ...] = tuple(
            sorted(requirements, key=lambda r: (r.field, r.operator, r.value))
        )

    @classmethod
    def everything(cls) -> FieldSelector:
        return cls()

    def empty(self) -> bool:
        return not self.requirements

    def fields(self) -> list[str]:
        return [r.field for r in self.requirements]

    @classmethod
    def parse(cls, text: str | None) -> FieldSelector:
        """Parse ``f=v,f!=v``; ``\\`` escapes ``,``, ``=`` and ``\\`` in values."""
        if text is None or not text.strip():
            return cls()
        parts: list[str] = []
        cur: list[str] = []
        i = 0
        while i < len(text):
            c = text[i]
            if c == "\\" and i + 1 < len(text):
                cur.append(text[i : i + 2])
                i += 2
                continue
            if c == ",":
                parts.append("".join(cur))
                cur = []
            else:
                cur.append(c)
            i += 1
        parts.append("".join(cur))
        reqs: list[FieldRequirement] = []
        for part in parts:
            reqs.append(_parse_field_term(part))
        return cls(reqs)

    def matches(self, getter: Callable[[str], str | None]) -> bool:
        """True when every requirement holds; *getter* returns a field's value (None if unset)."""
        for r in self.requirements:
            have = getter(r.field)
            value = "" if have is None else have
            if r.operator == "=" and value != r.value:
                return False
            if r.operator == "!=" and value == r.value:
                return False
        return True

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"


def _parse_field_term(term: str) -> FieldRequirement:
    for op in ("!=", "==", "="):
        idx = _find_unescaped(term, op)
        if idx >= 0:
            field = term[:idx].strip()
            raw = term[idx + len(op) :]
            if not field:
                raise SelectorParseError(f"invalid selector: {term!r}; field name is empty")
            return FieldRequirement(field, "!=" if op == "!=" else "=", _unescape(raw))
    raise SelectorParseError(f"invalid selector: '{term}'; can't understand '{term}'")


def _find_unescaped(term: str, op: str) -> int:
    i = 0
    while i < len(term):
        if term[i] == "\\":
            i += 2
            continue
        if term.startswith(op, i):
            if op == "=" and i > 0 and term[i - 1] == "!":
                return -1
            return i
        i += 1
    return -1


def _unescape(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c == "\\":
            if i + 1 >= len(raw) or raw[i + 1] not in "\\,=":
                raise SelectorParseError(f"invalid field selector value {raw!r}: bad escape")
            out.append(raw[i + 1])
            i += 2
            continue
        if c in ",=":
            raise SelectorParseError(f"invalid field selector value {raw!r}: unescaped {c!r}")
        out.append(c)
        i += 1
    return "".join(out)
