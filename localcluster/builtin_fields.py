"""Decoding built-in kinds as Go's typed decoding does: types, then unknown fields.

kube-apiserver decodes a Deployment into Go structs, so a value of the wrong JSON
type (a number in a ConfigMap's ``data``, a string for ``replicas``, a malformed
quantity) is a 400 in the decoder's words, and a field the type does not have is
dropped (and reported: a warning by default, a 400 with ``fieldValidation=Strict``,
which kubectl sends). Go types come from the protobuf layouts (``protobuf_types.json``:
int32 vs int64, messages, maps). localcluster stores plain
dicts, so it prunes against Kubernetes' v1.32 type schemas (the definitions
kubernetes-validate ships, read through ``patch.strategic_schema``). A typo in
an operator's manifest builder therefore shows up here as it would on a real
cluster, instead of being stored silently.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, cast

_MAX_DEPTH = 64


class BuiltinPruner:
    """Prunes built-in objects; resolved schemas are cached per instance (one per server)."""

    def __init__(self) -> None:
        self._resolved: dict[str, Mapping[str, Any] | None] = {}
        self._types: _TypeChecker | None = None
        self._shapes: dict[int, tuple[Mapping[str, Any], _Shape]] = {}
        self._messages: dict[tuple[str, str], str | None] = {}  # kind -> its Go type

    def check_types(self, kind_key: tuple[str, str], obj: dict[str, Any]) -> None:
        """A 400, worded as kube-apiserver's decoder, when *obj* does not fit its Go type.

        ``json: cannot unmarshal number into Go struct field ConfigMap.data of type
        string``, wrapped as ``ConfigMap in version "v1" cannot be handled as a
        ConfigMap: ...``. Kinds without a protobuf layout (none built in) pass.
        """
        name = self._messages.get(kind_key, "")
        if name == "":
            from . import protobuf

            name = self._messages[kind_key] = protobuf.message_name(*kind_key)
        if name is None:
            return
        if self._types is None:
            self._types = _TypeChecker()
        try:
            self._types.check(name, obj, [])
        except TypeMismatch as exc:
            from . import errors

            api_version, kind = kind_key
            version = api_version.rpartition("/")[2]
            raise errors.bad_request(
                f'{kind} in version "{version}" cannot be handled as a {kind}: {exc}'
            ) from exc

    def _definition(self, name: str) -> Mapping[str, Any] | None:
        if name not in self._resolved:
            from . import patch

            self._resolved[name] = patch.strategic_schema(name)
        return self._resolved[name]

    def _kind(self, kind_key: tuple[str, str]) -> Mapping[str, Any] | None:
        key = f"{kind_key[0]}, Kind={kind_key[1]}"
        if key not in self._resolved:
            from . import patch

            self._resolved[key] = patch.strategic_schema(kind_key)
        return self._resolved[key]

    def _resolve(self, schema: Mapping[str, Any]) -> Mapping[str, Any]:
        ref = schema.get("$ref")
        if isinstance(ref, str):
            resolved = self._definition(ref.rsplit("/", 1)[-1])
            if resolved is not None:
                if len(schema) == 1:
                    return resolved
                merged = dict(resolved)
                merged.update({k: v for k, v in schema.items() if k != "$ref"})
                return merged
        return schema

    def prune(self, kind_key: tuple[str, str], obj: dict[str, Any]) -> list[str]:
        """Remove fields the built-in kind does not declare, in place; return their paths.

        A value of the wrong type is a 400 first (:meth:`check_types`), as Go's
        decoder refuses it before anything else looks at the object.
        """
        self.check_types(kind_key, obj)
        schema = self._kind(kind_key)
        if schema is None:
            return []
        pruned: list[str] = []
        self._prune(schema, obj, [], pruned, 0)
        return pruned

    def _shape(self, schema: Mapping[str, Any]) -> _Shape:
        """What pruning needs of *schema* ($ref resolved), worked out once per schema node.

        The schemas are the server's (``_resolved`` keeps them for its lifetime), so
        a node is keyed by identity; the entry holds the node, so the id stays its own.
        """
        entry = self._shapes.get(id(schema))
        if entry is not None and entry[0] is schema:
            return entry[1]
        shape = _Shape(self._resolve(schema), self._resolve)
        self._shapes[id(schema)] = (schema, shape)
        return shape

    def _prune(
        self,
        schema: Mapping[str, Any],
        value: dict[str, Any] | list[Any],
        path: list[str | int],
        pruned: list[str],
        depth: int,
    ) -> None:
        self._prune_shape(self._shape(schema), value, path, pruned, depth)

    def _prune_shape(
        self,
        shape: _Shape,
        value: dict[str, Any] | list[Any],
        path: list[str | int],
        pruned: list[str],
        depth: int,
    ) -> None:
        # Only objects and lists reach here: scalars hold nothing to prune. The
        # path of a field is joined only when the field is dropped; child shapes
        # are looked up once per schema node (``_Shape.kid``).
        if depth > _MAX_DEPTH or shape.preserve:
            return
        if type(value) is dict or isinstance(value, dict):
            props = shape.props
            if props:
                unknown: list[str] | None = None
                for key, item in value.items():
                    if key not in props and shape.additional is None:
                        if not shape.additional_true:  # dropped once the loop is done
                            unknown = [key] if unknown is None else [*unknown, key]
                            pruned.append(_joined(path, key))
                        continue
                    if isinstance(item, (dict, list)):
                        path.append(key)
                        self._prune_shape(shape.kid(key, self), item, path, pruned, depth + 1)
                        path.pop()
                if unknown is not None:
                    for key in unknown:
                        del value[key]
            elif shape.additional is not None and shape.additional_structured:
                additional = shape.kid("", self)
                for key, item in value.items():
                    if isinstance(item, (dict, list)):
                        path.append(key)
                        self._prune_shape(additional, item, path, pruned, depth + 1)
                        path.pop()
        elif isinstance(value, list) and shape.items is not None:
            items = shape.kid(None, self)
            for i, item in enumerate(value):
                if isinstance(item, (dict, list)):
                    path.append(i)
                    self._prune_shape(items, item, path, pruned, depth + 1)
                    path.pop()


class _Shape:
    """One schema node as pruning reads it: declared properties, what other keys
    may hold, and list items (only when they can hold fields to prune)."""

    __slots__ = (
        "additional",
        "additional_structured",
        "additional_true",
        "items",
        "kids",
        "preserve",
        "props",
    )

    def __init__(
        self,
        schema: Mapping[str, Any],
        resolve: Callable[[Mapping[str, Any]], Mapping[str, Any]],
    ) -> None:
        self.preserve = bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        props = schema.get("properties")
        self.props: Mapping[str, Mapping[str, Any]] | None = (
            {k: v for k, v in props.items() if isinstance(v, Mapping)}
            if isinstance(props, Mapping) and props
            else None
        )
        additional = schema.get("additionalProperties")
        self.additional: Mapping[str, Any] | None = (
            additional if isinstance(additional, Mapping) else None
        )
        self.additional_true = additional is True
        self.additional_structured = self.additional is not None and _has_structure(
            resolve(self.additional)
        )
        items = schema.get("items")
        self.items: Mapping[str, Any] | None = (
            items if isinstance(items, Mapping) and _has_structure(resolve(items)) else None
        )
        self.kids: dict[str | None, _Shape] = {}

    def kid(self, key: str | None, pruner: BuiltinPruner) -> _Shape:
        """The shape of property *key* (of any other key for "" when no property
        is declared, of the list items for None), looked up once per node."""
        if key is not None and not (self.props and key in self.props):
            key = ""  # one slot for every other key: the cache stays as small as the schema
        kid = self.kids.get(key)
        if kid is None:
            if key is None:
                schema = self.items
            elif key:
                schema = self.props[key]  # type: ignore[index]
            else:
                schema = self.additional
            assert schema is not None
            kid = self.kids[key] = pruner._shape(schema)
        return kid


def _joined(path: list[str | int], key: str) -> str:
    """The dotted path of a dropped field (``spec.template.spec.containers[0].foo``)."""
    text = ""
    for part in [*path, key]:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text = f"{text}.{part}" if text else part
    return text


def _has_structure(schema: Mapping[str, Any]) -> bool:
    """Whether values of this schema can hold fields to prune (objects or lists of them)."""
    return bool(
        schema.get("properties") or schema.get("additionalProperties") or schema.get("items")
    )


# -- Go's typed decoding: a value of the wrong JSON type is a 400 ---------------

_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "bool"),
    (str, "string"),
    (int, "number"),
    (float, "number"),
    (dict, "object"),
    (list, "array"),
)
_INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}
_QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_ANY = ("runtime.RawExtension", "meta.v1.FieldsV1")


# Go kinds whose values of these exact Python types are right without a look at
# the value (an int64 is range-checked, so ints are not listed for it)
_SCALAR_KINDS: dict[str, tuple[type, ...]] = {"string": (str,), "bool": (bool,)}


# How a value of a Go field is checked, worked out once per (kind, message type)
_MESSAGE, _STRING, _BYTES, _BOOL, _INTEGER = "message", "string", "bytes", "bool", "integer"
_ANY_VALUE, _QUANTITY, _INT_OR_STRING, _TIME, _STRINGS = (
    "any",
    "quantity",
    "intorstring",
    "time",
    "strings",
)
_UNCHECKED = "unchecked"


def _how_to_check(kind: str, sub: str | None) -> str:
    if kind == "message" and sub is not None:
        if sub.endswith(_ANY):
            return _ANY_VALUE
        if sub.endswith("resource.Quantity"):
            return _QUANTITY
        if sub.endswith("intstr.IntOrString"):
            return _INT_OR_STRING
        if sub.endswith(("meta.v1.Time", "meta.v1.MicroTime", "meta.v1.Duration")):
            return _TIME
        if sub.endswith(("meta.v1.Verbs", ".ExtraValue")):
            return _STRINGS
        return _MESSAGE
    if kind == "string":
        return _STRING
    if kind == "bytes":
        return _BYTES
    if kind == "bool":
        return _BOOL
    if kind in _INT_RANGES:
        return _INTEGER
    return _UNCHECKED


class _Step:
    """How a field's common values are settled without the general check:
    ``settles`` is the Python type a single value has when right as it is (str,
    bool, an int within ``low``..``high``, dict for a nested struct ``sub``);
    a ``repeated`` struct field settles a list of dicts item by item."""

    __slots__ = ("high", "low", "repeated", "settles", "sub")

    def __init__(
        self, settles: type | None, repeated: bool, sub: str | None, low: int, high: int
    ) -> None:
        self.settles = settles
        self.repeated = repeated
        self.sub = sub
        self.low = low
        self.high = high


class TypeMismatch(ValueError):
    """A value of the wrong JSON type for its Go field (message in Go's json wording)."""


def _json_type(value: Any) -> str:
    for py, name in _JSON_TYPES:
        if isinstance(value, py):
            return name
    return type(value).__name__


def _go_type(kind: str, sub: str | None) -> str:
    if kind == "message" and sub:
        package, _, short = sub.rpartition(".")
        return f"{package.rsplit('.', 1)[-1]}.{short}"
    return {"bytes": "[]uint8"}.get(kind, kind)


class _TypeChecker:
    """Checks a built-in object against Kubernetes' Go types (from the protobuf layouts)."""

    def __init__(self) -> None:
        from . import protobuf

        self._messages, self._maps = protobuf.load_table()
        self._inline = protobuf.INLINE
        self._fields: dict[str, dict[str, tuple[list[Any], str]]] = {}
        self._how: dict[tuple[str, str | None], str] = {}
        self._plans: dict[str, dict[str, _Step]] = {}

    def fields_of(self, type_name: str) -> dict[str, tuple[list[Any], str]]:
        """JSON name -> (layout row, Go struct name), embedded structs flattened."""
        cached = self._fields.get(type_name)
        if cached is None:
            cached = {}
            struct = type_name.rsplit(".", 1)[-1]
            for row in self._messages.get(type_name, []):
                if row[0] in self._inline and row[2] == "message":
                    # promoted fields: Go names the outer struct in its errors
                    inner = self.fields_of(row[4])
                    cached.update({key: (sub, struct) for key, (sub, _s) in inner.items()})
                else:
                    cached[row[0]] = (row, struct)
            self._fields[type_name] = cached
        return cached

    def _plan(self, type_name: str) -> dict[str, _Step]:
        """Per JSON field of *type_name*, how its common values are settled at once
        (see ``_Step``). Worked out once per type."""
        plan = self._plans.get(type_name)
        if plan is None:
            plan = {}
            for key, ((_name, _n, kind, repeated, sub), _s) in self.fields_of(type_name).items():
                how = _how_to_check(kind, sub) if sub is None or sub not in self._maps else None
                settles: type | None = None
                low, high = 0, -1
                if how is None and self._maps[sub][1] == "string":
                    # a map of strings (labels, annotations, data...): no struct below
                    plan[key] = _Step(dict, False, None, low, high)
                    continue
                if how is _STRING or how is _BOOL:
                    settles = str if how is _STRING else bool
                elif how is _MESSAGE:
                    settles = dict
                elif how is _INTEGER:
                    settles = int
                    low, high = _INT_RANGES[kind]
                plan[key] = _Step(settles, bool(repeated), sub, low, high)
            self._plans[type_name] = plan
        return plan

    def check(self, type_name: str, value: dict[str, Any], stack: list[str]) -> None:
        # *stack* is the path of *value*'s fields, pushed and popped in place: error
        # messages read it when they are raised, and a valid object allocates none
        plan = self._plan(type_name)
        item: Any
        for key, item in value.items():
            step = plan.get(key)
            if step is None or item is None:
                continue  # unknown fields are the pruner's business; null is Go's zero value
            settles = step.settles
            if settles is not None:
                if not step.repeated:
                    if item.__class__ is settles:
                        if settles is not dict:
                            if settles is not int or step.low <= item <= step.high:  # type: ignore[operator]
                                continue  # a string, bool or in-range integer: settled
                        elif step.sub is not None:  # a nested struct, without _value's dispatch
                            stack.append(key)
                            self.check(step.sub, cast("dict[str, Any]", item), stack)
                            stack.pop()
                            continue
                        elif all(type(v) is str for v in cast("dict[str, Any]", item).values()):
                            continue  # a map of strings (labels, annotations, data...): settled
                elif type(item) is list and settles is str:
                    if all(type(element) is str for element in item):
                        continue  # a list of strings (verbs, args, finalizers...): settled
                elif (
                    type(item) is list
                    and settles is dict
                    and all(type(element) is dict for element in item)
                ):
                    # a list of structs (containers, env, ports...): each item checked
                    # directly; anything else goes the long way below
                    stack.append(key)
                    for element in item:
                        self.check(step.sub, element, stack)  # type: ignore[arg-type]
                    stack.pop()
                    continue
            self._check_field(type_name, key, item, stack)

    def _check_field(self, type_name: str, key: str, item: Any, stack: list[str]) -> None:
        """One field's value checked the long way: maps, lists, quantities... and errors."""
        (name, _n, kind, repeated, sub), struct = self.fields_of(type_name)[key]
        stack.append(name)
        if sub is not None and sub in self._maps:
            key_kind, value_kind, value_type = self._maps[sub]
            go = f"map[{key_kind}]{_go_type(value_kind, value_type)}"
            if not isinstance(item, dict):
                self._fail(item, struct, stack, go)
            for element in item.values():
                self._value(value_kind, value_type, element, struct, stack)
        elif repeated:
            if not isinstance(item, list):
                self._fail(item, struct, stack, "[]" + _go_type(kind, sub))
            for element in item:
                self._value(kind, sub, element, struct, stack)
        else:
            self._value(kind, sub, item, struct, stack)
        stack.pop()

    def _value(self, kind: str, sub: str | None, item: Any, struct: str, path: list[str]) -> None:
        if item is None:
            return
        how = self._how.get((kind, sub))
        if how is None:
            how = self._how[(kind, sub)] = _how_to_check(kind, sub)
        if how is _MESSAGE:
            if isinstance(item, dict):
                self.check(sub, item, path)  # type: ignore[arg-type]
            else:
                self._fail(item, struct, path, _go_type(kind, sub))
        elif how is _STRING:
            if not isinstance(item, str):
                self._fail(item, struct, path, _go_type(kind, sub))
        elif how is _ANY_VALUE:
            return
        elif how is _QUANTITY:
            self._quantity(item, struct, path)
        elif how is _INT_OR_STRING:
            if not isinstance(item, str):
                self._integer("int32", item, struct, path, "int32")
        elif how is _TIME:
            if not isinstance(item, str):
                self._fail(item, struct, path, _go_type(kind, sub))
        elif how is _STRINGS:
            if not isinstance(item, list) or not all(isinstance(v, str) for v in item):
                self._fail(item, struct, path, "[]string")
        elif how is _BYTES:
            if not isinstance(item, str):
                self._fail(item, struct, path, _go_type(kind, sub))
            _check_base64(item)
        elif how is _BOOL:
            if not isinstance(item, bool):
                self._fail(item, struct, path, _go_type(kind, sub))
        elif how is _INTEGER:
            self._integer(kind, item, struct, path, _go_type(kind, sub))

    def _integer(self, kind: str, item: Any, struct: str, path: list[str], go: str) -> None:
        if isinstance(item, bool) or not isinstance(item, (int, float)):
            self._fail(item, struct, path, go)
        low, high = _INT_RANGES[kind]
        if isinstance(item, float) or not low <= item <= high:
            text = repr(item) if isinstance(item, float) else str(item)
            raise TypeMismatch(
                f"json: cannot unmarshal number {text} into Go struct field "
                f"{struct}.{'.'.join(path)} of type {go}"
            )

    def _quantity(self, item: Any, struct: str, path: list[str]) -> None:
        from nimctl_runtime.quantity import QuantityError, parse_quantity

        if isinstance(item, bool) or not isinstance(item, (str, int, float)):
            self._fail(item, struct, path, "resource.Quantity")
        try:
            parse_quantity(item)
        except (QuantityError, ValueError) as exc:
            raise TypeMismatch(_QUANTITY_FORMAT) from exc

    @staticmethod
    def _fail(item: Any, struct: str, path: list[str], go: str) -> None:
        raise TypeMismatch(
            f"json: cannot unmarshal {_json_type(item)} into Go struct field "
            f"{struct}.{'.'.join(path)} of type {go}"
        )


def _check_base64(text: str) -> None:
    import binascii
    from base64 import b64decode

    try:
        b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        bad = next((i for i, ch in enumerate(text) if not (ch.isalnum() or ch in "+/=")), len(text))
        raise TypeMismatch(f"illegal base64 data at input byte {bad}") from exc
