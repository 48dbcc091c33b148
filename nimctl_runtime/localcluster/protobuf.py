"""Decoding the protobuf request bodies kubectl sends for ``kubectl create``.

kubectl's typed clients send built-in objects as ``application/vnd.kubernetes.protobuf``
(``kubectl create namespace|secret|configmap|serviceaccount|role|rolebinding ...``),
while ``kubectl apply`` sends JSON. A real API server accepts both, so localcluster
must too: the first thing a NIM user runs is ``kubectl create secret generic
ngc-api-secret ...``.

The body is Kubernetes' envelope (magic ``k8s\\0`` + ``runtime.Unknown`` carrying
apiVersion, kind and the raw message). This module holds a protobuf wire-format
reader and message descriptors (field numbers from Kubernetes' ``generated.proto``)
for the kinds kubectl's ``create`` sub-commands produce that nimctl users need.
Other kinds get a 415 whose message says to use ``kubectl apply``. The result is
the object as JSON (bytes fields base64-encoded, as the JSON API shows them).
"""

from __future__ import annotations

import base64
import datetime
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """The body is not a well-formed Kubernetes protobuf envelope or message."""


class UnsupportedKind(ProtobufError):
    """A well-formed body of a kind whose protobuf descriptor we do not have."""


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


# -- descriptors ---------------------------------------------------------------

Decoder = Callable[[Any], Any]


@dataclass(frozen=True)
class F:
    """One field: JSON name, how to decode a value, repeated or a map.

    Protobuf carries empty strings and ``false`` explicitly; Go's JSON drops them
    for ``omitempty`` fields, which is almost all of them. ``keep_empty`` marks the
    few that are not ``omitempty`` (RoleRef, OwnerReference identity fields).
    """

    name: str
    decode: Decoder
    repeated: bool = False
    map_value: Decoder | None = None
    keep_empty: bool = False


def _str(v: Any) -> str:
    if not isinstance(v, bytes):
        raise ProtobufError("expected a length-delimited string")
    return v.decode("utf-8")


def _b64(v: Any) -> str:
    if not isinstance(v, bytes):
        raise ProtobufError("expected length-delimited bytes")
    return base64.b64encode(v).decode()


def _int(v: Any) -> int:
    if not isinstance(v, int):
        raise ProtobufError("expected a varint")
    return v - (1 << 64) if v >= 1 << 63 else v


def _bool(v: Any) -> bool:
    return bool(_int(v))


def message(*spec: tuple[int, F]) -> Decoder:
    table = dict(spec)

    def decode(v: Any) -> dict[str, Any]:
        if not isinstance(v, bytes):
            raise ProtobufError("expected an embedded message")
        out: dict[str, Any] = {}
        for number, _wire, value in fields(v):
            f = table.get(number)
            if f is None:
                continue  # unknown fields are dropped, like the API server's decoder
            if f.map_value is not None:
                entry = dict((n, val) for n, _w, val in fields(value))
                key = _str(entry.get(1, b""))
                out.setdefault(f.name, {})[key] = f.map_value(entry.get(2, b""))
            elif f.repeated:
                out.setdefault(f.name, []).append(f.decode(value))
            else:
                decoded = f.decode(value)
                if not f.keep_empty and (
                    decoded in ("", None)
                    or decoded is False
                    or (type(decoded) is int and decoded == 0)
                ):
                    continue
                out[f.name] = decoded
        return out

    return decode


def _time(v: Any) -> str | None:
    """A metav1.Time; the zero time is absent, as Go's JSON writes it."""
    t = message((1, F("seconds", _int)), (2, F("nanos", _int)))(v)
    if not t.get("seconds") and not t.get("nanos"):
        return None
    stamp = datetime.datetime.fromtimestamp(t.get("seconds", 0), datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


OWNER_REFERENCE = message(
    (1, F("kind", _str, keep_empty=True)),
    (3, F("name", _str, keep_empty=True)),
    (4, F("uid", _str, keep_empty=True)),
    (5, F("apiVersion", _str, keep_empty=True)),
    (6, F("controller", _bool)),
    (7, F("blockOwnerDeletion", _bool)),
)
OBJECT_META = message(
    (1, F("name", _str)),
    (2, F("generateName", _str)),
    (3, F("namespace", _str)),
    (5, F("uid", _str)),
    (6, F("resourceVersion", _str)),
    (7, F("generation", _int)),
    (8, F("creationTimestamp", _time)),
    (9, F("deletionTimestamp", _time)),
    (10, F("deletionGracePeriodSeconds", _int)),
    (11, F("labels", _str, map_value=_str)),
    (12, F("annotations", _str, map_value=_str)),
    (13, F("ownerReferences", OWNER_REFERENCE, repeated=True)),
    (14, F("finalizers", _str, repeated=True)),
)
OBJECT_REFERENCE = message(
    (1, F("kind", _str)),
    (2, F("namespace", _str)),
    (3, F("name", _str)),
    (4, F("uid", _str)),
    (5, F("apiVersion", _str)),
    (6, F("resourceVersion", _str)),
    (7, F("fieldPath", _str)),
)
LOCAL_OBJECT_REFERENCE = message((1, F("name", _str)))
POLICY_RULE = message(
    (1, F("verbs", _str, repeated=True)),
    (2, F("apiGroups", _str, repeated=True)),
    (3, F("resources", _str, repeated=True)),
    (4, F("resourceNames", _str, repeated=True)),
    (5, F("nonResourceURLs", _str, repeated=True)),
)
SUBJECT = message(
    (1, F("kind", _str, keep_empty=True)),
    (2, F("apiGroup", _str)),
    (3, F("name", _str, keep_empty=True)),
    (4, F("namespace", _str)),
)
ROLE_REF = message(
    (1, F("apiGroup", _str, keep_empty=True)),
    (2, F("kind", _str, keep_empty=True)),
    (3, F("name", _str, keep_empty=True)),
)
LABEL_SELECTOR_REQUIREMENT = message(
    (1, F("key", _str)), (2, F("operator", _str)), (3, F("values", _str, repeated=True))
)
LABEL_SELECTOR = message(
    (1, F("matchLabels", _str, map_value=_str)),
    (2, F("matchExpressions", LABEL_SELECTOR_REQUIREMENT, repeated=True)),
)

KINDS: Mapping[tuple[str, str], Decoder] = {
    ("v1", "Namespace"): message(
        (1, F("metadata", OBJECT_META)),
        (2, F("spec", message((1, F("finalizers", _str, repeated=True))))),
    ),
    ("v1", "Secret"): message(
        (1, F("metadata", OBJECT_META)),
        (2, F("data", _str, map_value=_b64)),
        (3, F("type", _str)),
        (4, F("stringData", _str, map_value=_str)),
        (5, F("immutable", _bool)),
    ),
    ("v1", "ConfigMap"): message(
        (1, F("metadata", OBJECT_META)),
        (2, F("data", _str, map_value=_str)),
        (3, F("binaryData", _str, map_value=_b64)),
        (4, F("immutable", _bool)),
    ),
    ("v1", "ServiceAccount"): message(
        (1, F("metadata", OBJECT_META)),
        (2, F("secrets", OBJECT_REFERENCE, repeated=True)),
        (3, F("imagePullSecrets", LOCAL_OBJECT_REFERENCE, repeated=True)),
        (4, F("automountServiceAccountToken", _bool)),
    ),
    ("rbac.authorization.k8s.io/v1", "Role"): message(
        (1, F("metadata", OBJECT_META)), (2, F("rules", POLICY_RULE, repeated=True))
    ),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): message(
        (1, F("metadata", OBJECT_META)),
        (2, F("rules", POLICY_RULE, repeated=True)),
        (
            3,
            F(
                "aggregationRule",
                message((1, F("clusterRoleSelectors", LABEL_SELECTOR, repeated=True))),
            ),
        ),
    ),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): message(
        (1, F("metadata", OBJECT_META)),
        (2, F("subjects", SUBJECT, repeated=True)),
        (3, F("roleRef", ROLE_REF)),
    ),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): message(
        (1, F("metadata", OBJECT_META)),
        (2, F("subjects", SUBJECT, repeated=True)),
        (3, F("roleRef", ROLE_REF)),
    ),
    ("scheduling.k8s.io/v1", "PriorityClass"): message(
        (1, F("metadata", OBJECT_META)),
        (2, F("value", _int, keep_empty=True)),
        (3, F("globalDefault", _bool)),
        (4, F("description", _str)),
        (5, F("preemptionPolicy", _str)),
    ),
}

_TYPE_META = message((1, F("apiVersion", _str)), (2, F("kind", _str)))
_UNKNOWN = message(
    (1, F("typeMeta", _TYPE_META)),
    (2, F("raw", lambda v: v)),
    (3, F("contentEncoding", _str)),
    (4, F("contentType", _str)),
)


def decode(body: bytes) -> dict[str, Any]:
    """Decode a ``k8s\\0``-framed protobuf object into its JSON form.

    Raises :class:`UnsupportedKind` for kinds without a descriptor and
    :class:`ProtobufError` for malformed bodies.
    """
    if not body.startswith(MAGIC):
        raise ProtobufError("the body does not start with Kubernetes' protobuf magic 'k8s\\x00'")
    envelope = _UNKNOWN(body[len(MAGIC) :])
    type_meta = envelope.get("typeMeta") or {}
    api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "")
    if envelope.get("contentEncoding"):
        raise ProtobufError(f"content encoding {envelope['contentEncoding']!r} is not supported")
    decoder = KINDS.get((api_version, kind))
    if decoder is None:
        known = ", ".join(sorted(k for _v, k in KINDS))
        raise UnsupportedKind(
            f"localcluster decodes protobuf bodies only for {known}; {api_version} {kind} "
            "was sent as protobuf: create it with `kubectl apply -f` (JSON) instead"
        )
    obj = decoder(envelope.get("raw", b""))
    return {"apiVersion": api_version, "kind": kind, **obj}
