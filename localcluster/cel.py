"""``x-kubernetes-validations`` (CEL) evaluation for custom resources in localcluster.

Rules are evaluated with cel-python (``celpy``) at every schema node that
declares them, with ``self`` bound to the node's value (converted by schema
type: ``number`` fields become doubles, ``integer`` fields ints). Transition
rules (rules that mention ``oldSelf``) run only on update and only where an
old value correlates with the new one: by property name through objects and
``additionalProperties`` maps, and by key through ``x-kubernetes-list-type:
map`` lists (atomic lists and sets do not correlate, as in Kubernetes). With
``optionalOldSelf: true`` a transition rule also runs on create, ``oldSelf``
then being an optional value (``hasValue()``, ``value()``, ``orValue(x)``).

Failures become causes shaped like kube-apiserver's: ``Invalid value:
"object": <message>`` (or Forbidden/Required/Duplicate per ``reason``), at the
node's path plus ``fieldPath``. The message is ``messageExpression``'s result,
else ``message``, else ``failed rule: <rule>``. A rule that cannot be compiled
or evaluated is logged (with the rule text and path) and reported as a cause;
it never passes silently.

Kubernetes CEL library functions that celpy lacks and are bridged here:
strings (``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``,
``upperAscii``, ``replace``, ``split``, ``substring``, ``trim``, ``join``,
``reverse``), lists (``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``,
``lastIndexOf``), regex (``find``, ``findAll``). Not bridged: ``url``,
``quantity``, ``ip``/``cidr``, ``format``, the ``optional`` library beyond
``oldSelf``, and static cost estimation (the fast path has a runtime budget
on macro iterations instead).

Speed: programs are compiled once per rule text; each rule's result is
memoised by the canonical JSON of ``self``/``oldSelf`` (values over 4 KiB are
not memoised), so unchanged specs (status writes, repeated objects) cost a
dictionary lookup; and :mod:`localcluster.cel_compile` runs
the rules as Python closures, leaving celpy (the reference) to errors and to
syntax the fast path does not cover.

On update, causes about values the update left unchanged are dropped by
``schema.ratchet`` (validation ratcheting, as kube-apiserver v1.30+).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from typing import Any

import celpy.celtypes as ct

from nimctl_runtime import field
from nimctl_runtime.field import Cause, child_path, go_quote, index_path
from nimctl_runtime.logsetup import get_logger

from .cel_compile import EvalFailure, Optional_, compile_fast
from .cel_library import (
    CELError,
    OptionalValue,
    compile_rule,
    evaluate,
    from_cel,
    raw_library,
    to_cel,
    warm_up,
)
from .schema_validate import map_list_key

__all__ = [
    "CELError",
    "OptionalValue",
    "check_rules",
    "compile_rule",
    "evaluate",
    "from_cel",
    "is_transition_rule",
    "raw_library",
    "to_cel",
    "validate_rules",
    "warm_up",
]

_OLD_SELF_RE = re.compile(r"\boldSelf\b")
_ROOT_META_VISIBLE = ("name", "generateName")


# --------------------------------------------------------------------------- walking


@functools.lru_cache(maxsize=2048)
def is_transition_rule(rule: str) -> bool:
    """True when the rule refers to ``oldSelf``."""
    return bool(_OLD_SELF_RE.search(rule))


def validate_rules(
    schema: Mapping[str, Any],
    obj: Any,
    old: Any | None,
    *,
    root: str = "",
    skip: frozenset[str] = frozenset(),
) -> list[Cause]:
    """Evaluate every ``x-kubernetes-validations`` rule reachable in ``obj``.

    ``old`` is the previous object on update, None on create. The rules below the
    top-level fields named in ``skip`` are not evaluated (the root's own rules,
    which see the whole object, still are).
    """
    causes: list[Cause] = []
    _walk(
        schema,
        obj,
        old,
        has_old=old is not None,
        path=root,
        causes=causes,
        is_root=not root,
        skip=skip,
    )
    return causes


def _walk(
    schema: Any,
    value: Any,
    old: Any,
    *,
    has_old: bool,
    path: str,
    causes: list[Cause],
    is_root: bool = False,
    skip: frozenset[str] = frozenset(),
) -> None:
    if not isinstance(schema, dict) or value is None:
        return
    rules = schema.get("x-kubernetes-validations")
    if isinstance(rules, list) and rules:
        _run_rules(
            schema, rules, value, old, has_old=has_old, path=path, causes=causes, is_root=is_root
        )
    if isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        additional = schema.get("additionalProperties")
        old_map = old if has_old and isinstance(old, dict) else None
        for key, child in value.items():
            if is_root and (key == "metadata" or key in skip):
                continue
            sub = props.get(key)
            if not isinstance(sub, dict):
                sub = additional if isinstance(additional, dict) else None
            if sub is None:
                continue
            child_has_old = old_map is not None and key in old_map
            _walk(
                sub,
                child,
                old_map.get(key) if old_map is not None else None,
                has_old=child_has_old,
                path=child_path(path, key),
                causes=causes,
            )
    elif isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return
        old_by_key: dict[str, Any] = {}
        keys = schema.get("x-kubernetes-list-map-keys") or []
        correlate = (
            schema.get("x-kubernetes-list-type") == "map"
            and bool(keys)
            and has_old
            and isinstance(old, list)
        )
        if correlate:
            for old_item in old:
                if isinstance(old_item, dict):
                    key_obj = map_list_key(old_item, keys, items)
                    if key_obj is not None:
                        old_by_key[repr(sorted(key_obj.items()))] = old_item
        for i, item in enumerate(value):
            old_item = None
            item_has_old = False
            if correlate and isinstance(item, dict):
                key_obj = map_list_key(item, keys, items)
                if key_obj is not None:
                    marker = repr(sorted(key_obj.items()))
                    if marker in old_by_key:
                        old_item = old_by_key[marker]
                        item_has_old = True
            _walk(
                items,
                item,
                old_item,
                has_old=item_has_old,
                path=index_path(path, i),
                causes=causes,
            )


def _root_view(value: Any) -> Any:
    """At the root, CEL sees only metadata.name and metadata.generateName."""
    if not isinstance(value, dict) or not isinstance(value.get("metadata"), Mapping):
        return value
    view = dict(value)
    meta = value["metadata"]
    view["metadata"] = {k: meta[k] for k in _ROOT_META_VISIBLE if k in meta}
    return view


def _schema_type_name(schema: Mapping[str, Any]) -> str:
    """The bad value Kubernetes prints for a failed rule: the node's schema type
    (empty for untyped int-or-string / preserve-unknown-fields nodes)."""
    stype = schema.get("type")
    return stype if isinstance(stype, str) else ""


def _normalize(value: Any, schema: Any) -> Any:
    """Plain JSON typed by schema (``number`` -> float, ``integer`` -> int).

    Its canonical JSON text then identifies the CEL value exactly, which lets
    rule results be memoised.
    """
    stype = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return float(value) if stype == "number" else value
    if isinstance(value, float):
        return int(value) if stype == "integer" and value.is_integer() else value
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema, dict) else None
        additional = schema.get("additionalProperties") if isinstance(schema, dict) else None
        out: dict[str, Any] = {}
        for key, child in value.items():
            sub = props.get(key) if isinstance(props, dict) else None
            if sub is None and isinstance(additional, dict):
                sub = additional
            out[str(key)] = _normalize(child, sub)
        return out
    if isinstance(value, list | tuple):
        items = schema.get("items") if isinstance(schema, dict) else None
        return [_normalize(v, items) for v in value]
    return str(value)


def _same_json(a: Any, b: Any) -> bool:
    """Equal with the same types all the way down (``==`` alone takes 1 for 1.0 and True)."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return a.keys() == b.keys() and all(_same_json(v, b[k]) for k, v in a.items())
    if type(a) is list:
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b, strict=True))
    return type(a) in _SCALARS and bool(a == b)


_SCALARS = (str, int, float, bool, type(None))


def _value_key(value: Any, schema: Mapping[str, Any]) -> str:
    return json.dumps(_normalize(value, schema), sort_keys=True, separators=(",", ":"))


# Old-value modes of an evaluation: no oldSelf, oldSelf bound, optional oldSelf.
_OLD_NONE = 0
_OLD_PLAIN = 1
_OLD_OPTIONAL = 2


def _activation(self_key: str, old_key: str | None, old_mode: int) -> dict[str, Any]:
    activation: dict[str, Any] = {"self": to_cel(json.loads(self_key))}
    if old_mode == _OLD_PLAIN:
        activation["oldSelf"] = to_cel(json.loads(old_key)) if old_key is not None else None
    elif old_mode == _OLD_OPTIONAL:
        present = old_key is not None
        inner = to_cel(json.loads(old_key)) if old_key is not None else None
        activation["oldSelf"] = OptionalValue(present, inner)
    return activation


_MEMO_MAX_KEY = 4 * 1024


def _evaluate_memo(
    expr: str, self_key: str, old_key: str | None, old_mode: int
) -> tuple[bool, Any]:
    """Memoised :func:`_evaluate_plain` for values small enough to keep as keys."""
    if len(self_key) + len(old_key or "") > _MEMO_MAX_KEY:
        return _evaluate_plain(expr, self_key, old_key, old_mode)
    return _evaluate_cached(expr, self_key, old_key, old_mode)


def _evaluate_plain(
    expr: str, self_key: str, old_key: str | None, old_mode: int
) -> tuple[bool, Any]:
    """(True, plain result) or (False, error text); pure, hence memoisable.

    The compiled fast path answers when it can; errors and expressions it does
    not cover go to celpy, the reference evaluator, except errors where celpy
    is known to be laxer than the CEL spec (``has()`` on a missing parent).
    """
    fast = compile_fast(expr)
    if fast is not None:
        env: dict[str, Any] = {"self": json.loads(self_key)}
        if old_mode == _OLD_PLAIN:
            env["oldSelf"] = json.loads(old_key) if old_key is not None else None
        elif old_mode == _OLD_OPTIONAL:
            inner = json.loads(old_key) if old_key is not None else None
            env["oldSelf"] = Optional_(old_key is not None, inner)
        try:
            return True, fast(env)
        except EvalFailure as exc:
            if exc.definite:
                return False, str(exc)
        except Exception as exc:  # a fast-path gap: celpy, the reference, decides
            get_logger(__name__).warning(
                "CEL fast path failed; using celpy", rule=expr, error=repr(exc)
            )
    try:
        result = evaluate(expr, _activation(self_key, old_key, old_mode))
    except CELError as exc:
        return False, str(exc)
    if isinstance(result, ct.BoolType | bool):
        return True, bool(result)
    if isinstance(result, ct.StringType | str):
        return True, str(result)
    return True, from_cel(result)


_evaluate_cached = functools.lru_cache(maxsize=2048)(_evaluate_plain)


def _run_rules(
    schema: Mapping[str, Any],
    rules: list[Any],
    value: Any,
    old: Any,
    *,
    has_old: bool,
    path: str,
    causes: list[Cause],
    is_root: bool,
) -> None:
    self_value = _root_view(value) if is_root else value
    self_key = _value_key(self_value, schema)
    old_key: str | None = None
    if has_old:
        old_value = _root_view(old) if is_root else old
        # an unchanged value (a status write leaves spec alone) has the same key
        old_key = self_key if _same_json(old_value, self_value) else _value_key(old_value, schema)
    type_name = _schema_type_name(schema)
    for index, spec in enumerate(rules):
        if not isinstance(spec, dict) or not isinstance(spec.get("rule"), str):
            continue
        rule: str = spec["rule"]
        old_mode = _OLD_NONE
        if is_transition_rule(rule):
            if spec.get("optionalOldSelf"):
                old_mode = _OLD_OPTIONAL
            elif not has_old:
                continue
            else:
                old_mode = _OLD_PLAIN
        ok, result = _evaluate_memo(rule, self_key, old_key, old_mode)
        if not ok:
            get_logger(__name__).error(
                "CEL rule could not be evaluated",
                rule=rule,
                path=path or "<root>",
                rule_index=index,
                error=result,
            )
            text = str(result)
            detail = (
                text if text.startswith("compilation failed") else f"{text} evaluating rule: {rule}"
            )
            causes.append(field.invalid(path, type_name, detail).cause())
            continue
        if not isinstance(result, bool):
            get_logger(__name__).error(
                "CEL rule did not return a bool", rule=rule, path=path or "<root>"
            )
            causes.append(
                field.invalid(path, type_name, f"rule did not evaluate to a bool: {rule}").cause()
            )
            continue
        if result:
            continue
        message = _failure_message(spec, rule, (self_key, old_key, old_mode), path)
        error_path = _with_field_path(path, spec.get("fieldPath"))
        causes.append(_cause_for_reason(spec.get("reason"), error_path, type_name, message))


def _failure_message(
    spec: Mapping[str, Any], rule: str, keys: tuple[str, str | None, int], path: str
) -> str:
    fallback = spec.get("message") if isinstance(spec.get("message"), str) else ""
    if not fallback:
        fallback = f"failed rule: {rule}"
    expr = spec.get("messageExpression")
    if not isinstance(expr, str) or not expr:
        return fallback
    ok, result = _evaluate_memo(expr, *keys)
    if not ok:
        get_logger(__name__).error(
            "CEL messageExpression could not be evaluated",
            rule=expr,
            path=path or "<root>",
            error=result,
        )
        return fallback
    if not isinstance(result, str):
        get_logger(__name__).error(
            "CEL messageExpression did not return a string", rule=expr, path=path or "<root>"
        )
        return fallback
    if not result.strip() or "\n" in result:
        return fallback
    return result


def _cause_for_reason(reason: Any, path: str, type_name: str, message: str) -> Cause:
    if reason == "FieldValueForbidden":
        return field.forbidden(path, message).cause()
    if reason == "FieldValueRequired":
        return field.required(path, message).cause()
    if reason == "FieldValueDuplicate":
        return field.duplicate(path, type_name).cause()
    return field.invalid(path, type_name, message).cause()


_FIELD_PATH_TOKEN = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\['((?:[^'\\]|\\.)*)'\]")


def _with_field_path(path: str, field_path: Any) -> str:
    """Append a rule's ``fieldPath`` (``.a.b`` / ``['a.b']``) to the node path."""
    if not isinstance(field_path, str) or not field_path:
        return path
    out = path
    pos = 0
    while pos < len(field_path):
        match = _FIELD_PATH_TOKEN.match(field_path, pos)
        if match is None:
            return path
        out = child_path(out, match.group(1) or match.group(2))
        pos = match.end()
    return out


# --------------------------------------------------------------------------- registration check


def check_rules(schema: Mapping[str, Any], *, root: str = "openAPIV3Schema") -> list[str]:
    """Messages for rules that do not compile (CRD registration time)."""
    errors: list[str] = []
    _check(schema, root, errors, correlatable=True)
    return errors


def _check(schema: Any, path: str, errors: list[str], *, correlatable: bool) -> None:
    if not isinstance(schema, dict):
        return
    rules = schema.get("x-kubernetes-validations")
    if isinstance(rules, list):
        for i, spec in enumerate(rules):
            where = f"{path}.x-kubernetes-validations[{i}]"
            if not isinstance(spec, dict) or not isinstance(spec.get("rule"), str):
                errors.append(f"{where}.rule: Required value")
                continue
            for key in ("rule", "messageExpression"):
                text = spec.get(key)
                if not isinstance(text, str) or not text:
                    continue
                try:
                    compile_rule(text)
                except CELError as exc:
                    errors.append(f"{where}.{key}: Invalid value: {go_quote(text)}: {exc}")
            if not correlatable and is_transition_rule(spec["rule"]):
                errors.append(
                    f"{where}.rule: Invalid value: {go_quote(spec['rule'])}: oldSelf cannot be "
                    "used on the uncorrelatable portion of the schema"
                )
            if spec.get("optionalOldSelf") and not is_transition_rule(spec["rule"]):
                errors.append(
                    f"{where}.optionalOldSelf: Forbidden: may not be set if oldSelf is not "
                    "used in rule"
                )
            reason = spec.get("reason")
            if reason is not None and reason not in (
                "FieldValueInvalid",
                "FieldValueForbidden",
                "FieldValueRequired",
                "FieldValueDuplicate",
            ):
                errors.append(
                    f'{where}.reason: Unsupported value: "{reason}": supported values: '
                    '"FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid", '
                    '"FieldValueRequired"'
                )
    props = schema.get("properties")
    if isinstance(props, dict):
        for key, sub in props.items():
            _check(sub, f"{path}.properties[{key}]", errors, correlatable=correlatable)
    # Only map lists correlate old and new elements (by key); sets and atomic
    # lists do not, so transition rules below them could never run.
    items_correlate = correlatable and schema.get("x-kubernetes-list-type") == "map"
    _check(schema.get("items"), f"{path}.items", errors, correlatable=items_correlate)
    _check(
        schema.get("additionalProperties"),
        f"{path}.additionalProperties",
        errors,
        correlatable=correlatable,
    )
