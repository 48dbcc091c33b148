"""A fast path for CEL rules: celpy's parse tree compiled into Python closures.

celpy's tree-walking interpreter costs milliseconds per rule, which caps
custom-resource writes at a few hundred per second. This module compiles the
same lark parse tree (celpy stays the parser and the reference evaluator)
into nested closures over plain JSON values (``None``, ``bool``, ``int``,
``float``, ``str``, ``list``, ``dict``), covering the CEL that CRD rules use:
logical operators with CEL's error absorption, ternaries, comparisons with
heterogeneous numeric equality (as cel-go), arithmetic without implicit
conversions, ``in``, indexing, field selection, ``has()``, the macros ``all``,
``exists``, ``exists_one``, ``map`` and ``filter``, list/map literals,
``size``/``int``/``double``/``string``/``bool``/``dyn``, string and list
functions (incl. Kubernetes' library extensions) and optional ``oldSelf``.

Anything else (``timestamp``, ``duration``, ``type()``, message literals ...)
makes :func:`compile_fast` return None and the caller uses celpy. At run time
:class:`EvalFailure` signals a CEL error; callers re-run celpy to obtain the
reference error text, so only successful results come from here.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import lark

from . import cel_library

Env = dict[str, Any]
Fn = Callable[[Env], Any]

# Macro iterations allowed per evaluation (a fraction of Kubernetes' per-call
# cost limit, as Python is slower); runaway nested loops end with its error text.
COST_LIMIT = 100_000
_BUDGET = " budget"  # not a CEL identifier, so no rule can shadow it

_INT_MIN = -(2**63)
_INT_MAX = 2**63 - 1


class EvalFailure(Exception):
    """A CEL evaluation error on the fast path.

    ``definite`` marks errors the CEL spec (and cel-go, hence Kubernetes)
    raises where celpy is lenient, e.g. ``has(self.a.b)`` without ``a``;
    callers report those instead of asking celpy.
    """

    def __init__(self, message: str, *, definite: bool = False) -> None:
        super().__init__(message)
        self.definite = definite


class Unsupported(Exception):
    """The expression uses something the fast path does not compile."""


class Optional_:
    """CEL ``optional`` over a plain value (``oldSelf`` with optionalOldSelf)."""

    __slots__ = ("inner", "present")

    def __init__(self, present: bool, inner: Any = None) -> None:
        self.present = present
        self.inner = inner


# --------------------------------------------------------------------------- value semantics


def _tag(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list | tuple):
        return "list"
    if isinstance(value, dict):
        return "map"
    if isinstance(value, bytes):
        return "bytes"
    if isinstance(value, Optional_):
        return "optional"
    return "unknown"


_NUMERIC = frozenset({"int", "double"})


def equal(a: Any, b: Any) -> bool:
    """CEL equality (heterogeneous: different types are unequal, numbers compare by value)."""
    ta, tb = _tag(a), _tag(b)
    if ta in _NUMERIC and tb in _NUMERIC:
        return bool(a == b)
    if ta != tb:
        return False
    if ta == "list":
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if ta == "map":
        if len(a) != len(b):
            return False
        return all(key in b and equal(value, b[key]) for key, value in a.items())
    if ta == "optional":
        return bool(a.present == b.present and (not a.present or equal(a.inner, b.inner)))
    return bool(a == b)


def _compare(a: Any, b: Any) -> int:
    ta, tb = _tag(a), _tag(b)
    if (ta in _NUMERIC and tb in _NUMERIC) or (ta == tb and ta in ("string", "bool", "bytes")):
        return -1 if a < b else (1 if a > b else 0)
    raise EvalFailure(f"no such overload: {ta} < {tb}")


def _check_int(value: int) -> int:
    if value < _INT_MIN or value > _INT_MAX:
        raise EvalFailure("integer overflow")
    return value


def _add(a: Any, b: Any) -> Any:
    ta, tb = _tag(a), _tag(b)
    if ta != tb:
        raise EvalFailure(f"no such overload: {ta} + {tb}")
    if ta == "int":
        return _check_int(a + b)
    if ta in ("double", "string", "bytes"):
        return a + b
    if ta == "list":
        return [*a, *b]
    raise EvalFailure(f"no such overload: {ta} + {tb}")


def _sub(a: Any, b: Any) -> Any:
    ta, tb = _tag(a), _tag(b)
    if ta != tb or ta not in _NUMERIC:
        raise EvalFailure(f"no such overload: {ta} - {tb}")
    return _check_int(a - b) if ta == "int" else a - b


def _mul(a: Any, b: Any) -> Any:
    ta, tb = _tag(a), _tag(b)
    if ta != tb or ta not in _NUMERIC:
        raise EvalFailure(f"no such overload: {ta} * {tb}")
    return _check_int(a * b) if ta == "int" else a * b


def _div(a: Any, b: Any) -> Any:
    ta, tb = _tag(a), _tag(b)
    if ta != tb or ta not in _NUMERIC:
        raise EvalFailure(f"no such overload: {ta} / {tb}")
    if ta == "int":
        if b == 0:
            raise EvalFailure("divide by zero")
        quotient = abs(a) // abs(b)
        return _check_int(quotient if (a >= 0) == (b >= 0) else -quotient)
    if b == 0:
        return float("inf") if a > 0 else float("-inf") if a < 0 else float("nan")
    return a / b


def _mod(a: Any, b: Any) -> Any:
    ta, tb = _tag(a), _tag(b)
    if ta != tb or ta != "int":
        raise EvalFailure(f"no such overload: {ta} % {tb}")
    if b == 0:
        raise EvalFailure("modulus by zero")
    remainder = abs(a) % abs(b)
    return remainder if a >= 0 else -remainder


def _as_bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise EvalFailure(f"no such overload: expected bool, got {_tag(value)}")
    return value


def _select(target: Any, name: str) -> Any:
    if isinstance(target, dict):
        if name in target:
            return target[name]
        raise EvalFailure(f"no such key: {name}")
    raise EvalFailure(f"no such overload: select {name} on {_tag(target)}")


def _index(target: Any, key: Any) -> Any:
    if isinstance(target, list | tuple):
        if _tag(key) == "double" and float(key).is_integer():
            key = int(key)
        if _tag(key) != "int":
            raise EvalFailure(f"no such overload: list[{_tag(key)}]")
        if key < 0 or key >= len(target):
            raise EvalFailure(f"index out of bounds: {key}")
        return target[key]
    if isinstance(target, dict):
        if isinstance(key, str | int) and not isinstance(key, bool) and key in target:
            return target[key]
        raise EvalFailure(f"no such key: {key}")
    raise EvalFailure(f"no such overload: index {_tag(target)}")


def _contains(container: Any, item: Any) -> bool:
    if isinstance(container, list | tuple):
        return any(equal(item, x) for x in container)
    if isinstance(container, dict):
        return any(equal(item, k) for k in container)
    raise EvalFailure(f"no such overload: in {_tag(container)}")


# --------------------------------------------------------------------------- functions


def _size(value: Any) -> int:
    if isinstance(value, str | bytes | list | tuple | Mapping):
        return len(value)
    raise EvalFailure(f"no such overload: size({_tag(value)})")


def _to_int(value: Any) -> int:
    tag = _tag(value)
    if tag == "int":
        return int(value)
    if tag == "double":
        if math.isnan(value) or math.isinf(value):
            raise EvalFailure("integer overflow")
        return _check_int(int(value))
    if tag == "string":
        try:
            return _check_int(int(value, 10))
        except ValueError as exc:
            raise EvalFailure(f"cannot convert {value!r} to int") from exc
    raise EvalFailure(f"no such overload: int({tag})")


def _to_double(value: Any) -> float:
    tag = _tag(value)
    if tag in _NUMERIC:
        return float(value)
    if tag == "string":
        try:
            return float(value)
        except ValueError as exc:
            raise EvalFailure(f"cannot convert {value!r} to double") from exc
    raise EvalFailure(f"no such overload: double({tag})")


def _to_string(value: Any) -> str:
    tag = _tag(value)
    if tag == "string":
        return str(value)
    if tag == "int":
        return str(value)
    if tag == "bool":
        return "true" if value else "false"
    if tag == "bytes":
        return bytes(value).decode("utf-8")
    raise EvalFailure(f"no such overload: string({tag})")


def _to_bool(value: Any) -> bool:
    tag = _tag(value)
    if tag == "bool":
        return bool(value)
    if tag == "string" and value in ("true", "false", "True", "False", "TRUE", "FALSE", "t",
                                       "f", "1", "0"):
        return value in ("true", "True", "TRUE", "t", "1")
    raise EvalFailure(f"no such overload: bool({tag})")


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise EvalFailure(f"invalid regex {pattern!r}: {exc}") from exc


def _str_arg(value: Any, fn: str) -> str:
    if not isinstance(value, str):
        raise EvalFailure(f"no such overload: {fn}({_tag(value)})")
    return value


def _matches(target: Any, pattern: Any) -> bool:
    return _regex(_str_arg(pattern, "matches")).search(_str_arg(target, "matches")) is not None


def _starts_with(target: Any, prefix: Any) -> bool:
    return _str_arg(target, "startsWith").startswith(_str_arg(prefix, "startsWith"))


def _ends_with(target: Any, suffix: Any) -> bool:
    return _str_arg(target, "endsWith").endswith(_str_arg(suffix, "endsWith"))


def _str_contains(target: Any, part: Any) -> bool:
    return _str_arg(part, "contains") in _str_arg(target, "contains")


def _has_value(target: Any) -> bool:
    if isinstance(target, Optional_):
        return target.present
    raise EvalFailure("no such overload: hasValue")


def _opt_value(target: Any) -> Any:
    if isinstance(target, Optional_) and target.present:
        return target.inner
    raise EvalFailure("optional.none() dereference")


def _or_value(target: Any, default: Any) -> Any:
    if isinstance(target, Optional_):
        return target.inner if target.present else default
    raise EvalFailure("no such overload: orValue")


def _library_call(name: str) -> Callable[..., Any] | None:
    """Kubernetes' string/list/regex extensions, shared with the celpy bridge."""
    raw = cel_library.raw_library().get(name)
    if raw is None:
        return None
    fn: Callable[..., Any] = raw

    def call(*args: Any) -> Any:
        try:
            result = fn(*args)
        except (cel_library.CELError, TypeError, ValueError, IndexError) as exc:
            raise EvalFailure(str(exc)) from exc
        return cel_library.from_cel(result)

    return call


_GLOBALS: dict[str, Callable[..., Any]] = {
    "size": _size,
    "int": _to_int,
    "double": _to_double,
    "string": _to_string,
    "bool": _to_bool,
    "dyn": lambda v: v,
    "matches": _matches,
}

_METHODS: dict[str, Callable[..., Any]] = {
    "size": _size,
    "matches": _matches,
    "startsWith": _starts_with,
    "endsWith": _ends_with,
    "contains": _str_contains,
    "hasValue": _has_value,
    "value": _opt_value,
    "orValue": _or_value,
}

_LIBRARY_METHODS = frozenset(
    {
        "charAt",
        "indexOf",
        "lastIndexOf",
        "lowerAscii",
        "upperAscii",
        "replace",
        "split",
        "substring",
        "trim",
        "join",
        "reverse",
        "isSorted",
        "sum",
        "min",
        "max",
        "find",
        "findAll",
    }
)


# --------------------------------------------------------------------------- literals


_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    '"': '"',
    "'": "'",
    "\\": "\\",
    "`": "`",
    "?": "?",
}
_ESCAPE_RE = re.compile(
    r"\\(?:([abfnrtv\"'\\`?])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|([0-3][0-7]{2}))"
)


def _string_literal(text: str) -> str:
    raw = text[:1] in ("r", "R")
    if raw:
        text = text[1:]
    quote = text[:3] if text[:3] in ('"""', "'''") else text[:1]
    body = text[len(quote) : -len(quote)]
    if raw:
        return body

    def unescape(match: re.Match[str]) -> str:
        simple, hex2, hex4, hex8, octal = match.groups()
        if simple:
            return _ESCAPES[simple]
        code = hex2 or hex4 or hex8
        if code:
            return chr(int(code, 16))
        return chr(int(octal, 8))

    return _ESCAPE_RE.sub(unescape, body)


def _literal(token: lark.Token) -> Any:
    kind, text = token.type, str(token.value)
    if kind == "INT_LIT":
        negative = text.startswith("-")
        digits = text[1:] if negative else text
        value = int(digits, 16) if digits.lower().startswith("0x") else int(digits)
        return _check_int(-value if negative else value)
    if kind == "FLOAT_LIT":
        return float(text)
    if kind in ("STRING_LIT", "MLSTRING_LIT"):
        return _string_literal(text)
    if kind == "BOOL_LIT":
        return text == "true"
    if kind == "NULL_LIT":
        return None
    raise Unsupported(f"literal {kind}")


# --------------------------------------------------------------------------- compiler


def _children(tree: lark.Tree[Any]) -> list[Any]:
    return [c for c in tree.children if c is not None]


def _compile(tree: Any) -> Fn:
    if isinstance(tree, lark.Token):
        raise Unsupported(f"token {tree.type}")
    handler = _HANDLERS.get(str(tree.data))
    if handler is None:
        raise Unsupported(str(tree.data))
    return handler(tree)


def _expr(tree: lark.Tree[Any]) -> Fn:
    kids = _children(tree)
    if len(kids) == 1:
        return _compile(kids[0])
    cond, then, other = (_compile(k) for k in kids)

    def ternary(env: Env) -> Any:
        return then(env) if _as_bool(cond(env)) else other(env)

    return ternary


def _logical(tree: lark.Tree[Any], *, is_or: bool) -> Fn:
    kids = _children(tree)
    if len(kids) == 1:
        return _compile(kids[0])
    left, right = _compile(kids[0]), _compile(kids[1])
    short = is_or

    def logical(env: Env) -> Any:
        error: EvalFailure | None = None
        try:
            if _as_bool(left(env)) is short:
                return short
        except EvalFailure as exc:
            error = exc
        value = _as_bool(right(env))
        if value is short:
            return short
        if error is not None:
            raise error
        return not short

    return logical


_RELATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "relation_lt": lambda a, b: _compare(a, b) < 0,
    "relation_le": lambda a, b: _compare(a, b) <= 0,
    "relation_gt": lambda a, b: _compare(a, b) > 0,
    "relation_ge": lambda a, b: _compare(a, b) >= 0,
    "relation_eq": equal,
    "relation_ne": lambda a, b: not equal(a, b),
    "relation_in": lambda item, container: _contains(container, item),
    "addition_add": _add,
    "addition_sub": _sub,
    "multiplication_mul": _mul,
    "multiplication_div": _div,
    "multiplication_mod": _mod,
}


def _binary(tree: lark.Tree[Any]) -> Fn:
    kids = _children(tree)
    if len(kids) == 1:
        return _compile(kids[0])
    op_tree, right_tree = kids
    op = _RELATIONS[str(op_tree.data)]
    left = _compile(_children(op_tree)[0])
    right = _compile(right_tree)

    def binary(env: Env) -> Any:
        return op(left(env), right(env))

    return binary


def _unary(tree: lark.Tree[Any]) -> Fn:
    kids = _children(tree)
    if len(kids) == 1:
        return _compile(kids[0])
    op, operand_tree = kids
    operand = _compile(operand_tree)
    if op.data == "unary_not":

        def negate(env: Env) -> Any:
            return not _as_bool(operand(env))

        return negate

    def minus(env: Env) -> Any:
        value = operand(env)
        tag = _tag(value)
        if tag == "int":
            return _check_int(-value)
        if tag == "double":
            return -value
        raise EvalFailure(f"no such overload: -{tag}")

    return minus


def _single(tree: lark.Tree[Any]) -> Fn:
    kids = _children(tree)
    if len(kids) != 1:
        raise Unsupported(str(tree.data))
    return _compile(kids[0])


def _member_dot(tree: lark.Tree[Any]) -> Fn:
    target_tree, name_token = _children(tree)
    target = _compile(target_tree)
    name = str(name_token)

    def select(env: Env) -> Any:
        return _select(target(env), name)

    return select


def _args(tree: Any) -> list[Any]:
    if tree is None:
        return []
    return _children(tree)


def _macro(name: str, target: Fn, args: list[Any]) -> Fn:
    var_tree = args[0]
    if not (
        isinstance(var_tree, lark.Tree)
        and _ident_name(var_tree) is not None
    ):
        raise Unsupported("macro variable")
    var = str(_ident_name(var_tree))
    bodies = [_compile(a) for a in args[1:]]

    def items_of(env: Env) -> list[Any]:
        value = target(env)
        if isinstance(value, dict):
            items = list(value.keys())
        elif isinstance(value, list | tuple):
            items = list(value)
        else:
            raise EvalFailure(f"no such overload: {name} on {_tag(value)}")
        budget = env.get(_BUDGET)
        if budget is not None:
            budget[0] -= len(items) + 1
            if budget[0] < 0:
                raise EvalFailure(
                    "operation cancelled: actual cost limit exceeded", definite=True
                )
        return items

    if name in ("all", "exists"):
        (body,) = bodies
        want = name == "exists"

        def quantifier(env: Env) -> Any:
            error: EvalFailure | None = None
            for item in items_of(env):
                try:
                    if _as_bool(body({**env, var: item})) is want:
                        return want
                except EvalFailure as exc:
                    error = exc
            if error is not None:
                raise error
            return not want

        return quantifier
    if name == "exists_one":
        (body,) = bodies

        def exists_one(env: Env) -> Any:
            count = 0
            for item in items_of(env):
                if _as_bool(body({**env, var: item})):
                    count += 1
            return count == 1

        return exists_one
    if name == "filter":
        (body,) = bodies

        def filter_(env: Env) -> Any:
            return [item for item in items_of(env) if _as_bool(body({**env, var: item}))]

        return filter_
    if name == "map":
        if len(bodies) == 1:
            (body,) = bodies

            def map_(env: Env) -> Any:
                return [body({**env, var: item}) for item in items_of(env)]

            return map_
        predicate, body = bodies

        def map_filter(env: Env) -> Any:
            out = []
            for item in items_of(env):
                scope = {**env, var: item}
                if _as_bool(predicate(scope)):
                    out.append(body(scope))
            return out

        return map_filter
    raise Unsupported(name)


def _ident_name(tree: lark.Tree[Any]) -> str | None:
    """The identifier when ``tree`` is a bare identifier expression."""
    node: Any = tree
    while isinstance(node, lark.Tree):
        kids = _children(node)
        if node.data == "ident":
            return str(kids[0])
        if len(kids) != 1:
            return None
        node = kids[0]
    return None


def _member_dot_arg(tree: lark.Tree[Any]) -> Fn:
    kids = tree.children
    target_tree, name_token = kids[0], kids[1]
    args = _args(kids[2] if len(kids) > 2 else None)
    name = str(name_token)
    target = _compile(target_tree)
    if name in ("all", "exists", "exists_one", "map", "filter"):
        if len(args) not in (2, 3) or (len(args) == 3 and name != "map"):
            raise Unsupported(f"{name} arity")
        return _macro(name, target, args)
    fn = _METHODS.get(name)
    if fn is None and name in _LIBRARY_METHODS:
        fn = _library_call(name)
    if fn is None:
        raise Unsupported(name)
    compiled = [_compile(a) for a in args]
    call: Callable[..., Any] = fn

    def method(env: Env) -> Any:
        return call(target(env), *(a(env) for a in compiled))

    return method


def _member_index(tree: lark.Tree[Any]) -> Fn:
    target_tree, key_tree = _children(tree)
    target, key = _compile(target_tree), _compile(key_tree)

    def index(env: Env) -> Any:
        return _index(target(env), key(env))

    return index


def _ident_arg(tree: lark.Tree[Any]) -> Fn:
    kids = tree.children
    name = str(kids[0])
    args = _args(kids[1] if len(kids) > 1 else None)
    if name == "has":
        if len(args) != 1:
            raise Unsupported("has arity")
        inner = _unwrap_member_dot(args[0])
        if inner is None:
            raise Unsupported("has() needs a field selection")
        target_tree, field = inner
        target = _compile(target_tree)

        def has(env: Env) -> Any:
            try:
                value = target(env)
            except EvalFailure as exc:
                raise EvalFailure(str(exc), definite=True) from exc
            if isinstance(value, dict):
                return field in value
            raise EvalFailure(f"no such overload: has() on {_tag(value)}", definite=True)

        return has
    fn = _GLOBALS.get(name)
    if fn is None:
        raise Unsupported(name)
    compiled = [_compile(a) for a in args]
    call: Callable[..., Any] = fn

    def function(env: Env) -> Any:
        return call(*(a(env) for a in compiled))

    return function


def _unwrap_member_dot(tree: Any) -> tuple[Any, str] | None:
    node: Any = tree
    while isinstance(node, lark.Tree):
        if node.data == "member_dot":
            target, name = _children(node)
            return target, str(name)
        kids = _children(node)
        if len(kids) != 1:
            return None
        node = kids[0]
    return None


def _ident(tree: lark.Tree[Any]) -> Fn:
    name = str(_children(tree)[0])
    if name in ("self", "oldSelf"):

        def variable(env: Env) -> Any:
            try:
                return env[name]
            except KeyError as exc:
                raise EvalFailure(f"undeclared reference to '{name}'") from exc

        return variable

    def scoped(env: Env) -> Any:
        try:
            return env[name]
        except KeyError as exc:
            raise EvalFailure(f"undeclared reference to '{name}'") from exc

    return scoped


def _list_lit(tree: lark.Tree[Any]) -> Fn:
    items = [_compile(a) for a in _args(tree.children[0] if tree.children else None)]

    def make_list(env: Env) -> Any:
        return [item(env) for item in items]

    return make_list


def _map_lit(tree: lark.Tree[Any]) -> Fn:
    inits = _args(tree.children[0] if tree.children else None)
    pairs = [(_compile(inits[i]), _compile(inits[i + 1])) for i in range(0, len(inits), 2)]

    def make_map(env: Env) -> Any:
        out: dict[Any, Any] = {}
        for key_fn, value_fn in pairs:
            key = key_fn(env)
            if key in out:
                raise EvalFailure(f"duplicate map key: {key}")
            out[key] = value_fn(env)
        return out

    return make_map


def _literal_node(tree: lark.Tree[Any]) -> Fn:
    token = tree.children[0]
    if not isinstance(token, lark.Token):
        raise Unsupported("literal")
    value = _literal(token)

    def constant(env: Env) -> Any:
        return value

    return constant


_HANDLERS: dict[str, Callable[[lark.Tree[Any]], Fn]] = {
    "expr": _expr,
    "conditionalor": lambda t: _logical(t, is_or=True),
    "conditionaland": lambda t: _logical(t, is_or=False),
    "relation": _binary,
    "addition": _binary,
    "multiplication": _binary,
    "unary": _unary,
    "member": _single,
    "primary": _single,
    "paren_expr": _single,
    "member_dot": _member_dot,
    "member_dot_arg": _member_dot_arg,
    "member_index": _member_index,
    "ident_arg": _ident_arg,
    "ident": _ident,
    "list_lit": _list_lit,
    "map_lit": _map_lit,
    "literal": _literal_node,
}


@functools.lru_cache(maxsize=2048)
def compile_fast(rule: str) -> Fn | None:
    """Closure for ``rule`` over plain values, or None when only celpy can run it."""
    try:
        runner = cel_library.compile_rule(rule)
        compiled = _compile(runner.ast)
    except (Unsupported, cel_library.CELError, EvalFailure, KeyError, ValueError):
        return None

    def run(env: Env) -> Any:
        return compiled({**env, _BUDGET: [COST_LIMIT]})

    return run
