"""The object strategy of localcluster: what kube-apiserver's REST strategies decide.

Pure functions on one object (and its stored predecessor), no store access:

* names: ``generateName`` suffixes and the name rules per resource (DNS-1123
  subdomain, DNS-1123 label for namespaces and services, path segment for RBAC);
* metadata: labels, annotations, ownerReferences and finalizers validated as
  kube-apiserver's ObjectMeta validation does; empty collections dropped as Go's
  ``omitempty`` encoding does;
* namespaces: the object's namespace must exist and not be terminating;
* create/update: server-owned fields (uid, creationTimestamp, generation,
  deletionTimestamp), ``metadata.generation`` bumped on spec changes only,
  the status subresource, no new finalizers on an object being deleted,
  built-in normalisation (Secret ``stringData``, Namespace finalizer/phase, Pod
  phase);
* delete: the Foreground/Orphan finalizers a propagation policy adds.

Errors are :class:`~localcluster.errors.StatusError` values with
the causes and wording kube-apiserver uses.
"""

from __future__ import annotations

import base64
import datetime
import os
import random
import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from nimctl_runtime import field
from nimctl_runtime.labels import SelectorParseError, validate_label_key, validate_label_value
from nimctl_runtime.meta import Obj

from . import errors
from .registry import ResourceInfo

FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
NAMESPACE_FINALIZER = "kubernetes"
UNDELETABLE_NAMESPACES = frozenset({"default", "kube-system", "kube-public"})
PROPAGATION_POLICIES = (None, "", "Background", "Foreground", "Orphan")

_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_PATH_SEGMENT_BAD = re.compile(r"[/%]")
_PATH_SEGMENT_NAMES = {"roles", "rolebindings", "clusterroles", "clusterrolebindings"}
_DNS1123_LABEL_RESOURCES = {"namespaces", "services"}
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_OMIT_EMPTY_META = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")
_SERVER_OWNED_ON_UPDATE = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
)


class _Stamp:
    """The last second formatted (see :func:`now_rfc3339`)."""

    second = -1
    text = ""


def now_rfc3339() -> str:
    """The current time to the second, as metadata timestamps are written.

    Every create stamps ``creationTimestamp``; the text is formatted once per
    second of the clock, not once per write.
    """
    second = int(time.time())
    if _Stamp.second != second:
        moment = datetime.datetime.fromtimestamp(second, datetime.UTC)
        _Stamp.text = moment.strftime("%Y-%m-%dT%H:%M:%SZ")
        _Stamp.second = second
    return _Stamp.text


class _RandomPool:
    """Random bytes read 4 KiB at a time (see :func:`new_uid`)."""

    data = b""
    offset = 0


def new_uid() -> str:
    """A random (version 4) UUID, as ``uuid.uuid4()`` makes, from a pool of random
    bytes read 4 KiB at a time instead of one ``os.urandom`` call per object."""
    offset = _RandomPool.offset
    if offset + 16 > len(_RandomPool.data):
        _RandomPool.data, offset = os.urandom(4096), 0
    _RandomPool.offset = offset + 16
    raw = bytearray(_RandomPool.data[offset : offset + 16])
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


_valid_label_keys: set[str] = set()


def _check_label_key(key: str) -> None:
    """``validate_label_key`` once per distinct key (a server sees few distinct keys)."""
    if key in _valid_label_keys:
        return
    validate_label_key(key)
    if len(_valid_label_keys) >= 4096:
        _valid_label_keys.clear()
    _valid_label_keys.add(key)


# --------------------------------------------------------------------------- names


def generate_name(prefix: str, taken: Callable[[str], bool]) -> str:
    """``prefix`` + a random 5-character suffix not yet *taken* (as the apiserver's generator)."""
    candidate = prefix
    for _ in range(8):
        candidate = prefix + "".join(random.choices(_SUFFIX_ALPHABET, k=5))
        if not taken(candidate):
            break
    return candidate


def require_name(info: ResourceInfo, message: str) -> errors.StatusError:
    """The 422 for a missing ``metadata.name``."""
    return errors.invalid(
        info.group,
        info.kind,
        "",
        [field.required("metadata.name", message).cause()],
    )


def check_name(info: ResourceInfo, name: str) -> None:
    if info.resource in _PATH_SEGMENT_NAMES:
        ok = name not in (".", "..") and not _PATH_SEGMENT_BAD.search(name)
        rule = "may not contain '/' or '%'"
    elif info.resource in _DNS1123_LABEL_RESOURCES:
        ok = len(name) <= 63 and bool(_DNS1123_LABEL.match(name))
        rule = (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
            "or '-', and must start and end with an alphanumeric character"
        )
    else:
        ok = len(name) <= 253 and bool(_DNS1123_SUBDOMAIN.match(name))
        rule = (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
            "characters, '-' or '.', and must start and end with an alphanumeric character"
        )
    if not ok:
        raise errors.invalid(
            info.group,
            info.kind,
            name,
            [field.invalid("metadata.name", name, rule).cause()],
        )


# --------------------------------------------------------------------------- metadata


def check_metadata(info: ResourceInfo, name: str, meta: Mapping[str, Any]) -> None:
    """Labels, annotations, ownerReferences and finalizers as kube-apiserver validates them."""
    causes: list[dict[str, str]] = []
    labels = meta.get("labels")
    if labels is not None and not isinstance(labels, dict):
        causes.append(
            field.invalid("metadata.labels", field.OMIT, "must be a map of strings").cause()
        )
    for key, value in (labels or {}).items() if isinstance(labels, dict) else ():
        try:
            _check_label_key(str(key))
            if not isinstance(value, str):
                raise SelectorParseError(f"label value for {key!r} must be a string")
            validate_label_value(value)
        except SelectorParseError as exc:
            causes.append(field.invalid("metadata.labels", field.OMIT, str(exc)).cause())
    annotations = meta.get("annotations")
    if annotations is not None and (
        not isinstance(annotations, dict)
        or not all(isinstance(v, str) for v in annotations.values())
    ):
        causes.append(
            field.invalid(
                "metadata.annotations", field.OMIT, "annotations must be a map of strings"
            ).cause()
        )
    refs = meta.get("ownerReferences")
    if refs is not None:
        if not isinstance(refs, list):
            causes.append(
                field.invalid("metadata.ownerReferences", field.OMIT, "must be a list").cause()
            )
            refs = []
        controllers = 0
        for i, ref in enumerate(refs):
            path = f"metadata.ownerReferences[{i}]"
            if not isinstance(ref, dict):
                causes.append(field.invalid(path, field.OMIT, "must be an object").cause())
                continue
            for f in ("apiVersion", "kind", "name", "uid"):
                if not ref.get(f):
                    causes.append(field.required(f"{path}.{f}").cause())
            if ref.get("controller"):
                controllers += 1
        if controllers > 1:
            causes.append(
                field.invalid(
                    "metadata.ownerReferences",
                    field.OMIT,
                    "Only one reference can have Controller set to true",
                ).cause()
            )
    finalizers = meta.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
    ):
        causes.append(
            field.invalid("metadata.finalizers", field.OMIT, "must be a list of strings").cause()
        )
    if causes:
        raise errors.invalid(info.group, info.kind, name, causes)


def normalize_meta(meta: dict[str, Any]) -> None:
    """Drop empty ObjectMeta collections, as Go's ``omitempty`` encoding does."""
    for key in _OMIT_EMPTY_META:
        if key in meta and not meta[key]:
            del meta[key]


def check_namespace(
    info: ResourceInfo, namespace: str, name: str, namespace_obj: Mapping[str, Any] | None
) -> None:
    """A namespaced object needs a namespace that exists (*namespace_obj*) and is not ending."""
    if not info.namespaced:
        return
    if not namespace:
        raise errors.bad_request("the namespace of the object must be set")
    if namespace_obj is None:
        raise errors.not_found("", "namespaces", namespace)
    if namespace_obj["metadata"].get("deletionTimestamp"):
        refused = errors.forbidden(
            f'{info.qualified} "{name}" is forbidden: unable to create new content in '
            f"namespace {namespace} because it is being terminated",
            info.group,
            info.resource,
            name,
        )
        # the NamespaceLifecycle plugin's cause, which clients test for
        refused.details = refused.details or {}
        refused.details["causes"] = [
            {
                "reason": "NamespaceTerminating",
                "message": f"namespace {namespace} is being terminated",
                "field": "metadata.namespace",
            }
        ]
        raise refused


# --------------------------------------------------------------------------- built-in kinds


def normalize_builtin(info: ResourceInfo, obj: Obj) -> None:
    """Server-side normalisation of built-in kinds (Secret ``stringData`` -> ``data``)."""
    if info.group == "" and info.resource == "secrets":
        string_data = obj.pop("stringData", None)
        if isinstance(string_data, dict) and string_data:
            data = obj.get("data")
            if not isinstance(data, dict):
                data = obj["data"] = {}
            for key, value in string_data.items():
                data[key] = base64.b64encode(str(value).encode()).decode()
        obj.setdefault("type", "Opaque")


def _prepare_builtin_create(info: ResourceInfo, obj: Obj) -> None:
    if info.crd:
        return
    normalize_builtin(info, obj)
    if info.resource == "namespaces":
        obj.setdefault("spec", {})["finalizers"] = [NAMESPACE_FINALIZER]
        obj["status"] = {"phase": "Active"}
        obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = obj["metadata"][
            "name"
        ]
    elif info.resource == "pods" and "status" not in obj:
        obj["status"] = {"phase": "Pending"}


# --------------------------------------------------------------------------- create / update


def prepare_for_create(info: ResourceInfo, obj: Obj, *, reset_status: bool | None) -> None:
    """Set the server-owned fields of a new object in place (name and namespace already set).

    ``reset_status`` None means "as the resource's REST strategy does": a
    resource with a status subresource starts without status (Nodes keep theirs).
    """
    meta = obj["metadata"]
    obj["apiVersion"] = f"{info.group}/{info.storage_version}" if info.group else "v1"
    obj["kind"] = info.kind
    if reset_status is None:
        reset_status = info.has_status and info.resource != "nodes"
    if reset_status:
        obj.pop("status", None)
    for server_owned in ("deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        meta.pop(server_owned, None)
    meta["uid"] = new_uid()
    meta["creationTimestamp"] = now_rfc3339()
    if info.crd or "spec" in obj:
        meta["generation"] = 1
    else:
        meta.pop("generation", None)
    _prepare_builtin_create(info, obj)
    normalize_meta(meta)


def _strip_spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def prepare_for_status_update(obj: Mapping[str, Any], old: Obj) -> Obj:
    """The stored object with only its status taken from *obj* (PUT .../status)."""
    new = {k: v for k, v in old.items() if k != "status"}
    if "status" in obj:
        new["status"] = obj["status"]
    new["metadata"] = dict(old["metadata"])
    return new


def prepare_for_update(info: ResourceInfo, obj: Obj, old: Obj, namespace: str) -> Obj:
    """The object a PUT stores: *obj* with server-owned fields kept from *old*, validated.

    Status is kept from *old* when the resource has a status subresource;
    ``metadata.generation`` goes up when anything outside metadata and status
    changed; an object being deleted may not gain finalizers.
    """
    meta = obj["metadata"]
    old_meta = old["metadata"]
    name = meta["name"]
    new = dict(obj)
    new_meta = dict(meta)
    new["metadata"] = new_meta
    for owned in _SERVER_OWNED_ON_UPDATE:
        if owned in old_meta:
            new_meta[owned] = old_meta[owned]
        else:
            new_meta.pop(owned, None)
    new_meta["name"] = name
    if info.namespaced:
        new_meta["namespace"] = namespace
    else:
        new_meta.pop("namespace", None)
    if "managedFields" not in meta and "managedFields" in old_meta:
        new_meta["managedFields"] = old_meta["managedFields"]
    if info.has_status:
        if "status" in old:
            new["status"] = old["status"]
        else:
            new.pop("status", None)
    check_metadata(info, name, new_meta)
    if not info.crd:
        normalize_builtin(info, new)
    if "generation" in old_meta and _strip_spec(new) != _strip_spec(old):
        new_meta["generation"] = int(old_meta.get("generation", 1)) + 1
    if old_meta.get("deletionTimestamp"):
        added = set(new_meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
        added -= {FOREGROUND_FINALIZER, ORPHAN_FINALIZER}
        if added:
            raise errors.invalid(
                info.group,
                info.kind,
                name,
                [
                    field.forbidden(
                        "metadata.finalizers",
                        "no new finalizers can be added if the object is being deleted, "
                        f"found new finalizers {sorted(added)}",
                    ).cause()
                ],
            )
    return new


def finished_deleting(info: ResourceInfo, obj: Mapping[str, Any]) -> bool:
    """True when an object marked for deletion has no finalizers left (it can go).

    A pod in its termination grace period stays until the kubelet deletes it with
    a grace period of 0.
    """
    meta = obj["metadata"]
    return bool(
        meta.get("deletionTimestamp")
        and not meta.get("finalizers")
        and not (info.resource == "namespaces" and (obj.get("spec") or {}).get("finalizers"))
        and not (_is_pod(info) and meta.get("deletionGracePeriodSeconds"))
    )


def _is_pod(info: ResourceInfo) -> bool:
    return info.resource == "pods" and not info.group


def pod_grace_period(info: ResourceInfo, obj: Mapping[str, Any], requested: Any) -> int:
    """The termination grace period of a delete, as the pod strategy's CheckGracefulDelete.

    0 (deleted at once) for everything but pods, for pods no kubelet runs (not bound
    to a node) and for finished pods; else the request's ``gracePeriodSeconds`` or
    the pod's ``terminationGracePeriodSeconds`` (30 by default).
    """
    if not _is_pod(info):
        return 0
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        return 0
    value = requested if requested is not None else spec.get("terminationGracePeriodSeconds", 30)
    try:
        return max(int(value), 0)
    except (TypeError, ValueError) as exc:
        raise errors.bad_request(f"gracePeriodSeconds must be an integer, not {value!r}") from exc


# --------------------------------------------------------------------------- delete


def check_preconditions(
    info: ResourceInfo, name: str, meta: Mapping[str, Any], pre: Mapping[str, Any]
) -> None:
    """DeleteOptions.preconditions: uid and resourceVersion must match (409 otherwise)."""
    if pre.get("uid") and pre["uid"] != meta.get("uid"):
        raise errors.conflict(
            info.group,
            info.resource,
            name,
            f"Precondition failed: UID in precondition: {pre['uid']}, UID in object meta: "
            f"{meta.get('uid')}",
        )
    if pre.get("resourceVersion") and str(pre["resourceVersion"]) != meta.get("resourceVersion"):
        raise errors.conflict(
            info.group,
            info.resource,
            name,
            f"Precondition failed: ResourceVersion in precondition: {pre['resourceVersion']}, "
            f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
        )


def deletion_finalizers(
    meta: Mapping[str, Any], propagation_policy: str | None
) -> tuple[list[str], bool]:
    """The finalizers after a delete with *propagation_policy*, and whether they changed."""
    if propagation_policy not in PROPAGATION_POLICIES:
        raise errors.bad_request(
            f'Unsupported value: "{propagation_policy}": supported values: "Orphan", '
            '"Background", "Foreground"'
        )
    finalizers = list(meta.get("finalizers") or [])
    if propagation_policy == "Foreground" and FOREGROUND_FINALIZER not in finalizers:
        if ORPHAN_FINALIZER in finalizers:
            finalizers.remove(ORPHAN_FINALIZER)
        finalizers.append(FOREGROUND_FINALIZER)
        return finalizers, True
    if propagation_policy == "Orphan" and ORPHAN_FINALIZER not in finalizers:
        if FOREGROUND_FINALIZER in finalizers:
            finalizers.remove(FOREGROUND_FINALIZER)
        finalizers.append(ORPHAN_FINALIZER)
        return finalizers, True
    return finalizers, False


def check_deletable(info: ResourceInfo, name: str) -> None:
    """The system namespaces may not be deleted (403), as kube-apiserver's lifecycle plugin."""
    if info.resource == "namespaces" and not info.group and name in UNDELETABLE_NAMESPACES:
        raise errors.forbidden(
            f'namespaces "{name}" is forbidden: this namespace may not be deleted',
            "",
            "namespaces",
            name,
        )


def mark_deleting(info: ResourceInfo, obj: Obj, finalizers: list[str], grace: int = 0) -> None:
    """Set deletionTimestamp (once) and the finalizers; a Namespace turns Terminating.

    A pod deleted with a *grace* period gets ``deletionTimestamp`` that far in the
    future and ``deletionGracePeriodSeconds``; a later, shorter grace shortens it.
    """
    meta = obj["metadata"]
    if finalizers:
        meta["finalizers"] = finalizers
    current = meta.get("deletionGracePeriodSeconds")
    if not meta.get("deletionTimestamp") or (grace and current and grace < current):
        stamp = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=grace)
        meta["deletionTimestamp"] = stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
        meta["deletionGracePeriodSeconds"] = grace
    if info.resource == "namespaces" and not info.group:
        obj.setdefault("status", {})["phase"] = "Terminating"
