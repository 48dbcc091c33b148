"""Kubernetes' protobuf encoding of built-in objects: request bodies in, responses out.

kubectl's typed clients send built-in objects as ``application/vnd.kubernetes.protobuf``
(``kubectl create deployment|job|cronjob|service|ingress|secret ...``, ``kubectl
expose``), and a Go client configured for protobuf also asks for protobuf answers.
A real API server speaks both, so localcluster must too.

The body is Kubernetes' envelope (magic ``k8s\\0`` + ``runtime.Unknown`` carrying
apiVersion, kind and the raw message). The message layouts (field numbers, types,
map entries) come from ``protobuf_types.json``, which ``protobuf_gen`` reads out of
kubectl's own binary, so every built-in kind kubectl knows is covered. Decoding
yields the object in its JSON form, as Go's JSON encoding of the same struct shows
it: ``omitempty`` zero values absent, bytes base64-encoded, times RFC 3339,
quantities and int-or-strings in their JSON shapes.

One thing the wire does not say is whether a Go field is a pointer: a non-pointer
scalar is always on the wire, even when zero, while a pointer is there only when
set. Zero values are therefore dropped, except for the fields in ``KEEP_ZERO``
(pointer fields where zero means something: ``replicas: 0``, ``runAsUser: 0``,
``automountServiceAccountToken: false`` ...) and the required identity fields in
``KEEP_EMPTY``.
"""

from __future__ import annotations

import base64
import datetime
import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MAGIC = b"k8s\x00"
_TABLE_FILE = Path(__file__).with_name("protobuf_types.json")
_META = "k8s.io.apimachinery.pkg.apis.meta.v1"

# Pointer-typed scalar fields whose zero value differs from "not set".
KEEP_ZERO = frozenset(
    {
        "replicas", "revisionHistoryLimit", "progressDeadlineSeconds",
        "terminationGracePeriodSeconds", "activeDeadlineSeconds", "parallelism",
        "completions", "backoffLimit", "backoffLimitPerIndex", "maxFailedIndexes",
        "ttlSecondsAfterFinished", "startingDeadlineSeconds", "successfulJobsHistoryLimit",
        "failedJobsHistoryLimit", "runAsUser", "runAsGroup", "fsGroup", "defaultMode",
        "mode", "expirationSeconds", "minReplicas", "priority", "tolerationSeconds",
        "partition", "stabilizationWindowSeconds", "gracePeriodSeconds",
        "deletionGracePeriodSeconds", "automountServiceAccountToken", "enableServiceLinks",
        "shareProcessNamespace", "setHostnameAsFQDN", "hostUsers", "suspend",
        "manualSelector", "immutable", "optional", "privileged", "runAsNonRoot",
        "readOnlyRootFilesystem", "allowPrivilegeEscalation",
        "allocateLoadBalancerNodePorts", "value",
    }
)  # fmt: skip
# Fields without ``omitempty``: an empty string is kept, as Go's JSON writes it.
KEEP_EMPTY: Mapping[str, frozenset[str]] = {
    "RoleRef": frozenset({"apiGroup", "kind", "name"}),
    "Subject": frozenset({"kind", "name"}),
    "OwnerReference": frozenset({"apiVersion", "kind", "name", "uid"}),
}
_LIST_WRAPPERS = frozenset({"Verbs", "ExtraValue"})
# Embedded Go structs (``json:",inline"``): their fields sit in the parent's JSON object.
INLINE = frozenset(
    {
        "volumeSource", "persistentVolumeSource", "ingressRuleValue", "handler",
        "localObjectReference", "ephemeralContainerCommon", "typeMeta", "rule",
        "ruleWithOperations", "deviceConfiguration",
    }
)  # fmt: skip
_GROUP_PACKAGE = {"": "core", "internal.apiserver.k8s.io": "apiserverinternal"}


class ProtobufError(ValueError):
    """The body is not a well-formed Kubernetes protobuf envelope or message."""


class UnsupportedKind(ProtobufError):
    """A well-formed body of a kind whose protobuf layout we do not have."""


# Fields whose protobuf name is not their JSON name (message, proto name -> JSON name).
_JSON_NAMES: Mapping[tuple[str, str], str] = {
    ("BoundObjectReference", "uID"): "uid",
    ("MutatingWebhookConfiguration", "Webhooks"): "webhooks",
    ("ValidatingWebhookConfiguration", "Webhooks"): "webhooks",
    ("Validation", "Expression"): "expression",
    ("Variable", "Name"): "name",
    ("Variable", "Expression"): "expression",
}


@functools.cache
def load_table() -> tuple[dict[str, list[list[Any]]], dict[str, list[Any]]]:
    data = json.loads(_TABLE_FILE.read_text())
    messages: dict[str, list[list[Any]]] = data["messages"]
    for type_name, rows in messages.items():
        short = type_name.rsplit(".", 1)[-1]
        for row in rows:
            row[0] = _JSON_NAMES.get((short, row[0]), row[0])
    return messages, data["maps"]


def message_name(api_version: str, kind: str) -> str | None:
    """The protobuf message of a built-in kind (``apps/v1``, ``Deployment``), or None."""
    group, _, version = api_version.rpartition("/")
    if kind == "Status":
        name = f"{_META}.Status"
    else:
        package = _GROUP_PACKAGE.get(group, group.split(".", 1)[0])
        name = f"k8s.io.api.{package}.{version}.{kind}"
    messages, _maps = load_table()
    return name if name in messages else None


# -- wire format ---------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ProtobufError("varint longer than 64 bits")


def fields(buf: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value) for every field of one message, in order.

    Length-delimited values are returned as bytes; varints as int.
    """
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0 is not allowed")
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if pos + length > len(buf):
                raise ProtobufError(f"field {number}: length {length} runs past the message")
            value, pos = buf[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ProtobufError(f"field {number}: unsupported wire type {wire}")
        if pos > len(buf):
            raise ProtobufError(f"field {number}: truncated")
        out.append((number, wire, value))
    return out


def _put_varint(out: bytearray, value: int) -> None:
    if value < 0:
        value += 1 << 64
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _put_bytes(out: bytearray, number: int, data: bytes) -> None:
    _put_varint(out, number << 3 | 2)
    _put_varint(out, len(data))
    out += data


# -- decoding ------------------------------------------------------------------


def _scalar(kind: str, value: Any, where: str) -> Any:
    if kind == "string":
        if not isinstance(value, bytes):
            raise ProtobufError(f"{where}: expected a length-delimited string")
        return value.decode("utf-8")
    if kind == "bytes":
        if not isinstance(value, bytes):
            raise ProtobufError(f"{where}: expected length-delimited bytes")
        return base64.b64encode(value).decode()
    if not isinstance(value, int):
        raise ProtobufError(f"{where}: expected a varint")
    if kind == "bool":
        return bool(value)
    if kind in ("int32", "int64"):
        return value - (1 << 64) if value >= 1 << 63 else value
    return value


def _format_time(seconds: int, nanos: int, micro: bool) -> str:
    stamp = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    if micro:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S") + f".{nanos // 1000:06d}Z"
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_duration(nanoseconds: int) -> str:
    """Go's ``time.Duration.String()``: ``1h0m0s``, ``1m30s``, ``500ms``, ``0s``."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    n = abs(nanoseconds)
    if n < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if n >= size:
                text = f"{n / size:.9f}".rstrip("0").rstrip(".")
                return f"{sign}{text}{unit}"
    hours, rest = divmod(n, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds = f"{rest / 1e9:.9f}".rstrip("0").rstrip(".")
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{seconds}s"


def _special(type_name: str, raw: bytes) -> tuple[bool, Any]:
    """Messages whose JSON form is not an object (times, quantities, int-or-string ...)."""
    short = type_name.rsplit(".", 1)[-1]
    if type_name in (f"{_META}.Time", f"{_META}.MicroTime"):
        parts = {n: v for n, _w, v in fields(raw)}
        seconds, nanos = _scalar("int64", parts.get(1, 0), short), parts.get(2, 0)
        if not seconds and not nanos:
            return True, None
        return True, _format_time(seconds, nanos, short == "MicroTime")
    if type_name == f"{_META}.Duration":
        parts = {n: v for n, _w, v in fields(raw)}
        return True, format_duration(_scalar("int64", parts.get(1, 0), "duration"))
    if type_name.endswith(("resource.Quantity", "resource.QuantityValue")):
        parts = {n: v for n, _w, v in fields(raw)}
        return True, _scalar("string", parts.get(1, b""), "quantity")
    if type_name.endswith("intstr.IntOrString"):
        parts = {n: v for n, _w, v in fields(raw)}
        if parts.get(1, 0) == 1:
            return True, _scalar("string", parts.get(3, b""), "int-or-string")
        return True, _scalar("int32", parts.get(2, 0), "int-or-string")
    if type_name.endswith("runtime.RawExtension") or type_name == f"{_META}.FieldsV1":
        parts = {n: v for n, _w, v in fields(raw)}
        data = parts.get(1, b"")
        if not isinstance(data, bytes) or not data:
            return True, None
        if data.startswith(MAGIC):
            return True, decode(data)
        try:
            return True, json.loads(data)
        except ValueError as exc:
            raise ProtobufError(f"{short}: the embedded object is not JSON: {exc}") from exc
    if short in _LIST_WRAPPERS:
        return True, [_scalar("string", v, short) for n, _w, v in fields(raw) if n == 1]
    return False, None


def _is_zero(value: Any) -> bool:
    return value is None or value == "" or value is False or (type(value) is int and value == 0)


def _decode_value(kind: str, type_name: str | None, value: Any, where: str) -> Any:
    if kind == "message":
        if not isinstance(value, bytes):
            raise ProtobufError(f"{where}: expected an embedded message")
        return decode_message(type_name or "", value)
    return _scalar(kind, value, where)


def decode_message(type_name: str, raw: bytes) -> Any:
    """Decode one message of the named protobuf type into its JSON form."""
    handled, special = _special(type_name, raw)
    if handled:
        return special
    messages, maps = load_table()
    spec = messages.get(type_name)
    if spec is None:
        raise ProtobufError(f"no protobuf layout for {type_name}")
    by_number = {row[1]: row for row in spec}
    short = type_name.rsplit(".", 1)[-1]
    keep_empty = KEEP_EMPTY.get(short, frozenset())
    out: dict[str, Any] = {}
    for number, wire, value in fields(raw):
        row = by_number.get(number)
        if row is None:
            continue  # unknown fields are dropped, like the API server's decoder
        name, _n, kind, repeated, sub = row
        where = f"{short}.{name}"
        if sub is not None and sub in maps:
            key_kind, value_kind, value_type = maps[sub]
            entry = {n: v for n, _w, v in fields(value)}
            key = _scalar(key_kind, entry.get(1, b"" if key_kind == "string" else 0), where)
            default: Any = b"" if value_kind in ("string", "bytes", "message") else 0
            item = _decode_value(value_kind, value_type, entry.get(2, default), where)
            out.setdefault(name, {})[key] = item
        elif repeated:
            if wire == 2 and kind not in ("string", "bytes", "message"):
                packed, pos = [], 0
                while pos < len(value):
                    v, pos = _varint(value, pos)
                    packed.append(_scalar(kind, v, where))
                out.setdefault(name, []).extend(packed)
            else:
                out.setdefault(name, []).append(_decode_value(kind, sub, value, where))
        elif name in INLINE and kind == "message":
            inlined = _decode_value(kind, sub, value, where)
            if isinstance(inlined, dict):
                out.update(inlined)
        else:
            decoded = _decode_value(kind, sub, value, where)
            if kind != "message" and _is_zero(decoded):
                kept_zero = (
                    name in KEEP_ZERO
                    and not isinstance(decoded, str)
                    and not short.endswith("Status")
                )
                if not (name in keep_empty or kept_zero):
                    continue
            if decoded is None:
                continue
            out[name] = decoded
    return out


def _envelope(body: bytes) -> tuple[str, str, bytes]:
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with Kubernetes' protobuf magic 'k8s\\x00'")
    api_version = kind = encoding = ""
    raw = b""
    for number, _wire, value in fields(body[len(MAGIC) :]):
        if number == 1:
            type_meta = {n: v for n, _w, v in fields(value)}
            api_version = _scalar("string", type_meta.get(1, b""), "typeMeta.apiVersion")
            kind = _scalar("string", type_meta.get(2, b""), "typeMeta.kind")
        elif number == 2:
            raw = value if isinstance(value, bytes) else b""
        elif number == 3:
            encoding = _scalar("string", value, "contentEncoding")
    if encoding:
        raise ProtobufError(f"content encoding {encoding!r} is not supported")
    return api_version, kind, raw


def decode(body: bytes) -> dict[str, Any]:
    """Decode a ``k8s\\0``-framed protobuf object into its JSON form.

    Raises :class:`UnsupportedKind` for kinds without a layout and
    :class:`ProtobufError` for malformed bodies.
    """
    api_version, kind, raw = _envelope(body)
    name = message_name(api_version, kind)
    if name is None:
        raise UnsupportedKind(
            f"no protobuf layout for {api_version or '<no apiVersion>'} {kind or '<no kind>'}: "
            "send it as JSON (`kubectl apply -f`), as every custom resource is sent"
        )
    obj = decode_message(name, raw)
    return {"apiVersion": api_version, "kind": kind, **obj}


# -- encoding ------------------------------------------------------------------

_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(h|m(?!s)|s|ms|us|µs|ns)")
_DURATION_UNIT = {
    "h": 3_600_000_000_000, "m": 60_000_000_000, "s": 1_000_000_000,
    "ms": 1_000_000, "us": 1_000, "µs": 1_000, "ns": 1,
}  # fmt: skip


def _parse_time(text: str) -> tuple[int, int]:
    match = _TIME.match(text)
    if match is None:
        raise ProtobufError(f"{text!r} is not an RFC 3339 time")
    stamp = datetime.datetime.fromisoformat(match.group(1) + match.group(3).replace("Z", "+00:00"))
    nanos = int((match.group(2) or "0").ljust(9, "0"))
    return int(stamp.timestamp()), nanos


def _parse_duration(text: str) -> int:
    sign = -1 if text.startswith("-") else 1
    total = 0.0
    for amount, unit in _DURATION_PART.findall(text.lstrip("+-")):
        total += float(amount) * _DURATION_UNIT[unit]
    return sign * int(total)


def _encode_special(type_name: str, value: Any) -> bytes | None:
    short = type_name.rsplit(".", 1)[-1]
    out = bytearray()
    if type_name in (f"{_META}.Time", f"{_META}.MicroTime"):
        seconds, nanos = _parse_time(str(value))
        if seconds:
            _put_varint(out, 1 << 3)
            _put_varint(out, seconds)
        if nanos and short == "MicroTime":
            _put_varint(out, 2 << 3)
            _put_varint(out, nanos)
        return bytes(out)
    if type_name == f"{_META}.Duration":
        _put_varint(out, 1 << 3)
        _put_varint(out, _parse_duration(str(value)))
        return bytes(out)
    if type_name.endswith(("resource.Quantity", "resource.QuantityValue")):
        _put_bytes(out, 1, str(value).encode())
        return bytes(out)
    if type_name.endswith("intstr.IntOrString"):
        if isinstance(value, str):
            _put_varint(out, 1 << 3)
            _put_varint(out, 1)
            _put_bytes(out, 3, value.encode())
        else:
            _put_varint(out, 2 << 3)
            _put_varint(out, int(value))
        return bytes(out)
    if type_name.endswith("runtime.RawExtension") or type_name == f"{_META}.FieldsV1":
        _put_bytes(out, 1, json.dumps(value, separators=(",", ":")).encode())
        return bytes(out)
    if short in _LIST_WRAPPERS:
        for item in value:
            _put_bytes(out, 1, str(item).encode())
        return bytes(out)
    return None


def _encode_value(out: bytearray, number: int, kind: str, sub: str | None, value: Any) -> None:
    if kind == "message":
        _put_bytes(out, number, encode_message(sub or "", value))
    elif kind == "string":
        _put_bytes(out, number, str(value).encode())
    elif kind == "bytes":
        _put_bytes(out, number, base64.b64decode(value))
    else:
        _put_varint(out, number << 3)
        _put_varint(out, int(value))


def encode_message(type_name: str, value: Any) -> bytes:
    """Encode a JSON-shaped value as the named protobuf message (unknown keys ignored)."""
    special = _encode_special(type_name, value)
    if special is not None:
        return special
    messages, maps = load_table()
    spec = messages.get(type_name)
    if spec is None:
        raise ProtobufError(f"no protobuf layout for {type_name}")
    if not isinstance(value, Mapping):
        raise ProtobufError(f"{type_name}: expected an object, got {type(value).__name__}")
    out = bytearray()
    for name, number, kind, repeated, sub in sorted(spec, key=lambda row: row[1]):
        if name in INLINE and kind == "message":
            _put_bytes(out, number, encode_message(sub or "", value))
            continue
        item = value.get(name)
        if item is None:
            continue
        if sub is not None and sub in maps:
            key_kind, value_kind, value_type = maps[sub]
            for key in sorted(item):
                entry = bytearray()
                _encode_value(entry, 1, key_kind, None, key)
                if item[key] is not None:
                    _encode_value(entry, 2, value_kind, value_type, item[key])
                _put_bytes(out, number, bytes(entry))
        elif repeated:
            for element in item:
                _encode_value(out, number, kind, sub, element)
        else:
            _encode_value(out, number, kind, sub, item)
    return bytes(out)


def encode(obj: Mapping[str, Any]) -> bytes:
    """Encode a built-in object (its apiVersion and kind name the layout) in the envelope.

    Raises :class:`UnsupportedKind` when the kind has no protobuf layout (custom
    resources, which a real server serves only as JSON too).
    """
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    name = message_name(api_version, kind)
    if name is None:
        raise UnsupportedKind(f"no protobuf layout for {api_version} {kind}")
    type_meta = bytearray()
    _put_bytes(type_meta, 1, api_version.encode())
    _put_bytes(type_meta, 2, kind.encode())
    out = bytearray(MAGIC)
    _put_bytes(out, 1, bytes(type_meta))
    _put_bytes(out, 2, encode_message(name, obj))
    _put_bytes(out, 3, b"")
    _put_bytes(out, 4, b"")
    return bytes(out)
