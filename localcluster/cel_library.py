"""The CEL environment of localcluster: celpy plus Kubernetes' CEL library functions.

What both CEL evaluators share (the celpy bridge in ``cel`` and the compiled
fast path in ``cel_compile``): :class:`CELError`, the Kubernetes string, list,
regex and optional functions celpy lacks (:func:`raw_library`), compiling a
rule once per text (:func:`compile_rule`), evaluating it (:func:`evaluate`) and
converting JSON values to and from celpy's types (:func:`to_cel`,
:func:`from_cel`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import celpy
import celpy.celtypes as ct
from celpy.evaluation import CELEvalError


class CELError(Exception):
    """A rule failed to compile or evaluate."""


# --------------------------------------------------------------------------- optional oldSelf


@dataclass(frozen=True)
class OptionalValue:
    """The CEL ``optional`` value bound to ``oldSelf`` under ``optionalOldSelf``."""

    present: bool
    inner: Any = None


def _has_value(target: Any) -> ct.BoolType:
    if isinstance(target, OptionalValue):
        return ct.BoolType(target.present)
    raise CELError("hasValue() applies to an optional value")


def _value(target: Any) -> Any:
    if isinstance(target, OptionalValue):
        if not target.present:
            raise CELError("optional.none() dereference")
        return target.inner
    raise CELError("value() applies to an optional value")


def _or_value(target: Any, default: Any) -> Any:
    if isinstance(target, OptionalValue):
        return target.inner if target.present else default
    raise CELError("orValue() applies to an optional value")


# --------------------------------------------------------------------------- library bridge


def _str(value: Any, fn: str) -> str:
    if not isinstance(value, str):
        raise CELError(f"no such overload: {fn}({type(value).__name__})")
    return value


def _char_at(target: Any, index: Any) -> ct.StringType:
    text = _str(target, "charAt")
    i = int(index)
    if i < 0 or i > len(text):
        raise CELError(f"index out of range: {i}")
    return ct.StringType(text[i : i + 1])


def _index_of(target: Any, needle: Any, start: Any = None) -> ct.IntType:
    if isinstance(target, list):
        for i, item in enumerate(target):
            if item == needle:
                return ct.IntType(i)
        return ct.IntType(-1)
    text = _str(target, "indexOf")
    begin = 0 if start is None else int(start)
    if begin < 0 or begin > len(text):
        raise CELError(f"index out of range: {begin}")
    return ct.IntType(text.find(str(needle), begin))


def _last_index_of(target: Any, needle: Any, end: Any = None) -> ct.IntType:
    if isinstance(target, list):
        for i in range(len(target) - 1, -1, -1):
            if target[i] == needle:
                return ct.IntType(i)
        return ct.IntType(-1)
    text = _str(target, "lastIndexOf")
    if end is None:
        return ct.IntType(text.rfind(str(needle)))
    stop = int(end)
    if stop < 0 or stop >= len(text) + 1:
        raise CELError(f"index out of range: {stop}")
    return ct.IntType(text.rfind(str(needle), 0, stop + len(str(needle))))


def _lower_ascii(target: Any) -> ct.StringType:
    text = _str(target, "lowerAscii")
    return ct.StringType("".join(c.lower() if c.isascii() else c for c in text))


def _upper_ascii(target: Any) -> ct.StringType:
    text = _str(target, "upperAscii")
    return ct.StringType("".join(c.upper() if c.isascii() else c for c in text))


def _replace(target: Any, old: Any, new: Any, count: Any = None) -> ct.StringType:
    text = _str(target, "replace")
    n = -1 if count is None else int(count)
    return ct.StringType(text.replace(str(old), str(new), n))


def _split(target: Any, sep: Any, count: Any = None) -> ct.ListType:
    text = _str(target, "split")
    n = -1 if count is None else int(count)
    if n == 0:
        return ct.ListType([])
    if str(sep) == "":
        chars = list(text)
        if n > 0 and len(chars) > n:
            chars = [*chars[: n - 1], "".join(chars[n - 1 :])]
        return ct.ListType([ct.StringType(c) for c in chars])
    parts = text.split(str(sep), n - 1 if n > 0 else -1)
    return ct.ListType([ct.StringType(p) for p in parts])


def _substring(target: Any, start: Any, end: Any = None) -> ct.StringType:
    text = _str(target, "substring")
    begin = int(start)
    stop = len(text) if end is None else int(end)
    if begin < 0 or stop > len(text) or begin > stop:
        raise CELError(f"substring out of range: [{begin}, {stop})")
    return ct.StringType(text[begin:stop])


def _trim(target: Any) -> ct.StringType:
    return ct.StringType(_str(target, "trim").strip())


def _join(target: Any, sep: Any = None) -> ct.StringType:
    if not isinstance(target, list):
        raise CELError("join() applies to a list of strings")
    return ct.StringType(("" if sep is None else str(sep)).join(str(x) for x in target))


def _reverse(target: Any) -> ct.StringType:
    return ct.StringType(_str(target, "reverse")[::-1])


def _is_sorted(target: Any) -> ct.BoolType:
    if not isinstance(target, list):
        raise CELError("isSorted() applies to a list")
    return ct.BoolType(all(target[i] <= target[i + 1] for i in range(len(target) - 1)))


def _sum(target: Any) -> Any:
    if not isinstance(target, list):
        raise CELError("sum() applies to a list")
    if not target:
        return ct.IntType(0)
    total = target[0]
    for item in target[1:]:
        total = total + item
    return total


def _min(target: Any, *rest: Any) -> Any:
    items = list(target) if isinstance(target, list) and not rest else [target, *rest]
    if not items:
        raise CELError("min() called on an empty list")
    return min(items)


def _max(target: Any, *rest: Any) -> Any:
    items = list(target) if isinstance(target, list) and not rest else [target, *rest]
    if not items:
        raise CELError("max() called on an empty list")
    return max(items)


def _find(target: Any, pattern: Any) -> ct.StringType:
    match = re.search(str(pattern), _str(target, "find"))
    return ct.StringType(match.group(0) if match else "")


def _find_all(target: Any, pattern: Any, count: Any = None) -> ct.ListType:
    found = [m.group(0) for m in re.finditer(str(pattern), _str(target, "findAll"))]
    if count is not None and int(count) >= 0:
        found = found[: int(count)]
    return ct.ListType([ct.StringType(f) for f in found])


def _errors_as_values(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a CELError into a CEL error value so ``||``/``&&`` can absorb it."""

    @functools.wraps(fn)
    def wrapper(*args: Any) -> Any:
        try:
            return fn(*args)
        except CELError as exc:
            return CELEvalError(str(exc))
        except (TypeError, ValueError) as exc:
            return CELEvalError(f"no such overload: {fn.__name__.strip('_')}: {exc}")

    return wrapper


def _library() -> dict[str, Callable[..., Any]]:
    return {name: _errors_as_values(fn) for name, fn in raw_library().items()}


def raw_library() -> dict[str, Callable[..., Any]]:
    return {
        "charAt": _char_at,
        "indexOf": _index_of,
        "lastIndexOf": _last_index_of,
        "lowerAscii": _lower_ascii,
        "upperAscii": _upper_ascii,
        "replace": _replace,
        "split": _split,
        "substring": _substring,
        "trim": _trim,
        "join": _join,
        "reverse": _reverse,
        "isSorted": _is_sorted,
        "sum": _sum,
        "min": _min,
        "max": _max,
        "find": _find,
        "findAll": _find_all,
        "hasValue": _has_value,
        "value": _value,
        "orValue": _or_value,
    }


# --------------------------------------------------------------------------- compile cache


@functools.lru_cache(maxsize=2048)
def compile_rule(rule: str) -> celpy.Runner:
    """Compile a CEL expression once per text; raises CELError on a syntax error."""
    env = celpy.Environment()
    try:
        ast = env.compile(rule)
        return env.program(ast, functions=_library())
    except Exception as exc:  # celpy raises its own parse error classes
        detail = " ".join(str(exc).split())
        raise CELError(f"compilation failed: {detail}") from exc


def warm_up() -> None:
    """Build celpy's parser now (its first use costs ~0.1 s); call it off the
    event loop at start-up, e.g. ``await asyncio.to_thread(cel.warm_up)``."""
    compile_rule("self == oldSelf")


def evaluate(rule: str, activation: Mapping[str, Any]) -> Any:
    """Evaluate ``rule`` with celpy values bound; raises CELError on failure."""
    runner = compile_rule(rule)
    try:
        result = runner.evaluate(dict(activation))
    except CELError:
        raise
    except Exception as exc:  # CELEvalError, TypeError, KeyError from the library
        raise CELError(_eval_error_text(exc)) from exc
    if isinstance(result, CELEvalError):
        raise CELError(_eval_error_text(result))
    return result


def _eval_error_text(exc: BaseException) -> str:
    if isinstance(exc, CELEvalError) and exc.args:
        first = exc.args[0]
        text = str(first)
        if text.startswith("undeclared reference to"):
            name = exc.args[2][0] if len(exc.args) > 2 and exc.args[2] else "?"
            return f"undeclared reference to '{name}'"
        if text.startswith("no such member in mapping"):
            return text.replace("no such member in mapping", "no such key").replace("'", "")
        return text
    return str(exc)


# --------------------------------------------------------------------------- conversion


def to_cel(value: Any, schema: Mapping[str, Any] | None = None) -> Any:
    """A decoded JSON value as celpy values, typed by ``schema`` where it says so."""
    stype = schema.get("type") if isinstance(schema, dict) else None
    if value is None:
        return None
    if isinstance(value, bool):
        return ct.BoolType(value)
    if isinstance(value, int):
        return ct.DoubleType(value) if stype == "number" else ct.IntType(value)
    if isinstance(value, float):
        if stype == "integer" and value.is_integer():
            return ct.IntType(int(value))
        return ct.DoubleType(value)
    if isinstance(value, str):
        return ct.StringType(value)
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema, dict) else None
        additional = schema.get("additionalProperties") if isinstance(schema, dict) else None
        out: dict[Any, Any] = {}
        for key, child in value.items():
            sub = props.get(key) if isinstance(props, dict) else None
            if sub is None and isinstance(additional, dict):
                sub = additional
            out[ct.StringType(key)] = to_cel(child, sub)
        return ct.MapType(out)
    if isinstance(value, list | tuple):
        items = schema.get("items") if isinstance(schema, dict) else None
        return ct.ListType([to_cel(v, items) for v in value])
    return ct.StringType(str(value))


def from_cel(value: Any) -> Any:
    """celpy values back to plain Python (for messages and tests)."""
    if isinstance(value, ct.BoolType):
        return bool(value)
    if isinstance(value, ct.IntType | ct.UintType):
        return int(value)
    if isinstance(value, ct.DoubleType):
        return float(value)
    if isinstance(value, ct.StringType):
        return str(value)
    if isinstance(value, ct.MapType):
        return {str(k): from_cel(v) for k, v in value.items()}
    if isinstance(value, ct.ListType):
        return [from_cel(v) for v in value]
    return value
