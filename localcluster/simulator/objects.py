"""Small helpers on plain-dict Kubernetes objects shared by the simulated controllers:
owner references, conditions, label selectors, template hashes, and the
actions a controller asks the engine to carry out.
"""

from __future__ import annotations

import builtins
import copy
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nimctl_runtime.labels import Selector
from nimctl_runtime.meta import Obj

SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


@dataclass(frozen=True)
class Create:
    """Create *obj* (``metadata.generateName`` allowed)."""

    obj: Obj


@dataclass(frozen=True)
class Update:
    """Replace *obj*'s metadata and spec (optimistic concurrency on its resourceVersion)."""

    obj: Obj


@dataclass(frozen=True)
class UpdateStatus:
    """Write *obj*'s status through the status subresource."""

    obj: Obj


@dataclass(frozen=True)
class Delete:
    """Delete an object; ``grace_period_seconds=0`` removes a pod at once."""

    api_version: str
    kind: str
    namespace: str
    name: str
    propagation_policy: str | None = None
    grace_period_seconds: int | None = None
    uid: str = ""


@dataclass(frozen=True)
class Requeue:
    """Look at this object again after *after* simulated seconds."""

    after: float


@dataclass(frozen=True)
class Emit:
    """Record an Event about *obj* (type Normal/Warning, reason, message)."""

    obj: Obj
    type: str
    reason: str
    message: str


Action = Create | Update | UpdateStatus | Delete | Requeue | Emit


@dataclass
class Context:
    """What a controller may read: the simulator's view of the cluster and the time."""

    view: ObjectLookup
    now: float
    stamp: Callable[[], str]
    sim_of: Callable[[str], float]
    options: Mapping[str, Any] = field(default_factory=dict)


class ObjectLookup:
    """Read access to the simulator's cache, keyed by kind (``Pod``, ``ReplicaSet``, ...)."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}
        self._owned: dict[str, set[tuple[str, str, str]]] = {}

    def put(self, obj: Obj) -> None:
        kind = obj.get("kind", "")
        key = (namespace_of(obj), name_of(obj))
        previous = self._objects.setdefault(kind, {}).get(key)
        if previous is not None:
            self._unindex(kind, previous)
        self._objects[kind][key] = obj
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            self._owned.setdefault(ref.get("uid", ""), set()).add((kind, *key))

    def remove(self, obj: Mapping[str, Any]) -> None:
        kind = obj.get("kind", "")
        previous = self._objects.get(kind, {}).pop((namespace_of(obj), name_of(obj)), None)
        if previous is not None:
            self._unindex(kind, previous)

    def _unindex(self, kind: str, obj: Obj) -> None:
        key = (kind, namespace_of(obj), name_of(obj))
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            owned = self._owned.get(ref.get("uid", ""))
            if owned is not None:
                owned.discard(key)
                if not owned:
                    del self._owned[ref.get("uid", "")]

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self._objects.get(kind, {}).get((namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> builtins.list[Obj]:
        objs = self._objects.get(kind, {})
        if namespace is None:
            return list(objs.values())
        return [o for (ns, _), o in objs.items() if ns == namespace]

    def owned(self, owner: Mapping[str, Any], kind: str) -> builtins.list[Obj]:
        """Objects of *kind* whose controller ownerReference points at *owner*."""
        uid = uid_of(owner)
        out = []
        for k, ns, name in sorted(self._owned.get(uid, set())):
            if k != kind:
                continue
            obj = self.get(k, ns, name)
            if obj is not None and controller_uid(obj) == uid:
                out.append(obj)
        return out

    def kinds(self) -> builtins.list[str]:
        return list(self._objects)


def name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace", "") or "")


def uid_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid", ""))


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


def annotations_of(obj: Mapping[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def generation_of(obj: Mapping[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 1)


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            found: Mapping[str, Any] = ref
            return found
    return None


def controller_uid(obj: Mapping[str, Any]) -> str:
    ref = controller_ref(obj)
    return str(ref.get("uid", "")) if ref else ""


def owner_reference(owner: Mapping[str, Any]) -> Obj:
    """A controller ownerReference to *owner* with blockOwnerDeletion, as controllers set it."""
    return {
        "apiVersion": owner.get("apiVersion", ""),
        "kind": owner.get("kind", ""),
        "name": name_of(owner),
        "uid": uid_of(owner),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector; an empty or missing selector matches nothing (as for workloads)."""
    if not selector:
        return False
    return Selector.from_label_selector(dict(selector)).matches(labels)


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h ^= byte
        h = (h * 0x01000193) & 0xFFFFFFFF
    return h


def template_hash(template: Any, collision_count: int = 0) -> str:
    """A pod-template-hash / controller-revision-hash in Kubernetes' safe alphabet."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    value = fnv32a(data + (str(collision_count).encode() if collision_count else b""))
    return "".join(SAFE_ALPHABET[int(ch) % len(SAFE_ALPHABET)] for ch in str(value))


def get_condition(obj: Mapping[str, Any], type_: str) -> Obj | None:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == type_:
            found: Obj = cond
            return found
    return None


def set_condition(
    conditions: list[Obj],
    type_: str,
    status: str,
    *,
    reason: str,
    message: str,
    stamp: str,
    with_update_time: bool = False,
) -> list[Obj]:
    """Set a condition, keeping lastTransitionTime unless the status flips."""
    out = [copy.deepcopy(c) for c in conditions]
    for cond in out:
        if cond.get("type") != type_:
            continue
        changed = (cond.get("reason"), cond.get("message")) != (reason, message)
        if cond.get("status") != status:
            cond["lastTransitionTime"] = stamp
            changed = True
        cond.update(status=status, reason=reason, message=message)
        if with_update_time and changed:
            cond["lastUpdateTime"] = stamp
        return out
    new: Obj = {"type": type_, "status": status}
    if with_update_time:
        new["lastUpdateTime"] = stamp
    new.update(lastTransitionTime=stamp, reason=reason, message=message)
    out.append(new)
    return out


def pod_from_template(
    template: Mapping[str, Any],
    owner: Mapping[str, Any],
    *,
    name: str | None = None,
    generate_name: str | None = None,
    extra_labels: Mapping[str, str] | None = None,
) -> Obj:
    """A Pod made from a pod template, controlled by *owner*."""
    meta = copy.deepcopy(dict(template.get("metadata") or {}))
    labels = dict(meta.get("labels") or {})
    labels.update(extra_labels or {})
    metadata: Obj = {"namespace": namespace_of(owner), "labels": labels}
    if meta.get("annotations"):
        metadata["annotations"] = meta["annotations"]
    if meta.get("finalizers"):
        metadata["finalizers"] = meta["finalizers"]
    if name:
        metadata["name"] = name
    else:
        metadata["generateName"] = generate_name or f"{name_of(owner)}-"
    metadata["ownerReferences"] = [owner_reference(owner)]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": copy.deepcopy(dict(template.get("spec") or {})),
    }


def status_changed(obj: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    return dict(obj.get("status") or {}) != dict(status)


def with_status(obj: Mapping[str, Any], status: Mapping[str, Any]) -> Obj:
    out = copy.deepcopy(dict(obj))
    out["status"] = dict(status)
    return out


def pods_active(pods: Iterable[Obj]) -> list[Obj]:
    """Pods that are neither finished nor being deleted."""
    return [
        p
        for p in pods
        if not is_deleting(p)
        and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
    ]


def int_or_percent(value: Any, total: int, *, round_up: bool) -> int:
    """Resolve an IntOrString such as ``25%`` against *total*."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        pct = int(text[:-1])
        scaled = pct * total
        return -(-scaled // 100) if round_up else scaled // 100
    return int(text)
