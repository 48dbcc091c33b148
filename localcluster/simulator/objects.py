"""Small helpers on plain-dict Kubernetes objects shared by the simulated controllers:
owner references, conditions, label selectors, template hashes, and the
actions a controller asks the engine to carry out.
"""

from __future__ import annotations

import builtins
import copy
import itertools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson

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


# Kinds whose labels are indexed (``labelled``) and kinds whose ``spec.selector`` label map
# is indexed (``selecting``): the per-event questions "which pods does this Service select"
# and "which Services select this pod" then cost what they find, not every object.
LABEL_INDEXED = frozenset({"Pod"})
SELECTOR_INDEXED = frozenset({"Service"})


class ObjectLookup:
    """Read access to the simulator's cache, keyed by kind (``Pod``, ``ReplicaSet``, ...)."""

    def __init__(self) -> None:
        self._objects: dict[str, dict[tuple[str, str], Obj]] = {}
        # kind -> namespace -> name -> object, in the order of _objects (first put)
        self._by_namespace: dict[str, dict[str, dict[str, Obj]]] = {}
        self._owned: dict[str, set[tuple[str, str, str]]] = {}
        # (kind, namespace, label key, label value) -> names, for LABEL_INDEXED kinds
        self._labels: dict[tuple[str, str, str, str], dict[str, None]] = {}
        # (kind, namespace, one selector key, its value) -> names, for SELECTOR_INDEXED kinds
        self._selectors: dict[tuple[str, str, str, str], dict[str, None]] = {}
        # (kind, namespace, name) -> when first put: ``selecting`` answers in ``list`` order
        self._order: dict[tuple[str, str, str], int] = {}
        self._seq = itertools.count()
        # objects looked at by ``labelled`` and ``selecting`` (a counting test reads it)
        self.visited = 0

    def put(self, obj: Obj) -> None:
        kind = obj.get("kind", "")
        key = (namespace_of(obj), name_of(obj))
        objects = self._objects.setdefault(kind, {})
        previous = objects.get(key)
        objects[key] = obj
        self._by_namespace.setdefault(kind, {}).setdefault(key[0], {})[key[1]] = obj
        if previous is None:
            self._order[(kind, *key)] = next(self._seq)
        # A status write changes neither owners, labels nor selector: keep the indexes.
        meta, old_meta = obj.get("metadata") or {}, (previous or {}).get("metadata") or {}
        if previous is None or meta.get("ownerReferences") != old_meta.get("ownerReferences"):
            if previous is not None:
                self._unindex_owners(kind, previous)
            for ref in meta.get("ownerReferences") or []:
                self._owned.setdefault(ref.get("uid", ""), set()).add((kind, *key))
        if kind in LABEL_INDEXED and (
            previous is None or meta.get("labels") != old_meta.get("labels")
        ):
            if previous is not None:
                self._unindex_labels(kind, previous)
            for k, v in (meta.get("labels") or {}).items():
                self._labels.setdefault((kind, key[0], k, str(v)), {})[key[1]] = None
        if kind in SELECTOR_INDEXED:
            pair, old_pair = _selector_pair(obj), _selector_pair(previous or {})
            if previous is None or pair != old_pair:
                if old_pair is not None:
                    _discard(self._selectors, (kind, key[0], *old_pair), key[1])
                if pair is not None:
                    self._selectors.setdefault((kind, key[0], *pair), {})[key[1]] = None

    def remove(self, obj: Mapping[str, Any]) -> None:
        kind = obj.get("kind", "")
        namespace, name = namespace_of(obj), name_of(obj)
        previous = self._objects.get(kind, {}).pop((namespace, name), None)
        if previous is None:
            return
        self._order.pop((kind, namespace, name), None)
        in_namespace = self._by_namespace[kind][namespace]
        del in_namespace[name]
        if not in_namespace:
            del self._by_namespace[kind][namespace]
        self._unindex_owners(kind, previous)
        if kind in LABEL_INDEXED:
            self._unindex_labels(kind, previous)
        if kind in SELECTOR_INDEXED:
            pair = _selector_pair(previous)
            if pair is not None:
                _discard(self._selectors, (kind, namespace, *pair), name)

    def _unindex_owners(self, kind: str, obj: Obj) -> None:
        key = (kind, namespace_of(obj), name_of(obj))
        for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
            owned = self._owned.get(ref.get("uid", ""))
            if owned is not None:
                owned.discard(key)
                if not owned:
                    del self._owned[ref.get("uid", "")]

    def _unindex_labels(self, kind: str, obj: Obj) -> None:
        namespace, name = namespace_of(obj), name_of(obj)
        for k, v in ((obj.get("metadata") or {}).get("labels") or {}).items():
            _discard(self._labels, (kind, namespace, k, str(v)), name)

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self._objects.get(kind, {}).get((namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> builtins.list[Obj]:
        if namespace is None:
            return list(self._objects.get(kind, {}).values())
        return list(self._by_namespace.get(kind, {}).get(namespace, {}).values())

    def labelled(
        self, kind: str, namespace: str, selector: Mapping[str, str]
    ) -> builtins.list[Obj]:
        """Objects of a LABEL_INDEXED *kind* in *namespace* whose labels hold every pair of
        *selector* (an equality map; empty selects all), in no particular order."""
        if kind not in LABEL_INDEXED or not selector:
            found = self.list(kind, namespace)
            self.visited += len(found)
            return [o for o in found if _has_labels(o, selector)]
        smallest: dict[str, None] | None = None
        for k, v in selector.items():
            names = self._labels.get((kind, namespace, k, str(v)))
            if not names:
                return []
            if smallest is None or len(names) < len(smallest):
                smallest = names
        in_namespace = self._by_namespace.get(kind, {}).get(namespace, {})
        out = []
        for name in smallest or {}:
            obj = in_namespace.get(name)
            self.visited += 1
            if obj is not None and _has_labels(obj, selector):
                out.append(obj)
        return out

    def selecting(self, kind: str, namespace: str, labels: Mapping[str, str]) -> builtins.list[Obj]:
        """Objects of a SELECTOR_INDEXED *kind* in *namespace* whose non-empty
        ``spec.selector`` map matches *labels*, in ``list`` order."""
        if kind not in SELECTOR_INDEXED:
            found = self.list(kind, namespace)
            self.visited += len(found)
            return [o for o in found if _selects(o, labels)]
        in_namespace = self._by_namespace.get(kind, {}).get(namespace, {})
        matched: set[str] = set()
        for k, v in labels.items():
            for name in self._selectors.get((kind, namespace, k, str(v)), ()):
                obj = in_namespace.get(name)
                self.visited += 1
                if obj is not None and _selects(obj, labels):
                    matched.add(name)
        ordered = sorted(matched, key=lambda n: self._order.get((kind, namespace, n), 0))
        return [in_namespace[n] for n in ordered]

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


def _selector_pair(obj: Mapping[str, Any]) -> tuple[str, str] | None:
    """The one ``spec.selector`` pair an object is indexed under (its smallest key)."""
    selector = (obj.get("spec") or {}).get("selector")
    if not isinstance(selector, Mapping) or not selector:
        return None
    key = min(selector)
    return str(key), str(selector[key])


def _selects(obj: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    selector = (obj.get("spec") or {}).get("selector") or {}
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _has_labels(obj: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _discard(index: dict[Any, dict[str, None]], key: Any, name: str) -> None:
    names = index.get(key)
    if names is not None:
        names.pop(name, None)
        if not names:
            del index[key]


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


# What orjson must hand to ``_refuse`` instead of writing it its own way: a subclass of
# str, int, dict or list (an enum's value, a bool kept apart), a datetime, a dataclass.
_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_SUBCLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
)


def _refuse(value: Any) -> Any:
    raise TypeError(f"not JSON: {type(value).__name__}")


def json_copy(value: Any) -> Any:
    """A deep copy of JSON-shaped data (dicts, lists and scalars: what the storage holds
    and the view is made of), as ``copy.deepcopy`` makes of it but several times faster.

    Through orjson (written and read back in C: about three times cheaper than a copy
    in Python for a pod or a template); what orjson refuses or would change (integers
    beyond 64 bits, keys that are not str, subclasses, datetimes, dataclasses) is
    copied in Python instead. As in the storage, a tuple comes back a list and a NaN
    or infinite float as None (no Kubernetes object holds either).
    """
    if type(value) is dict or type(value) is list:
        try:
            return orjson.loads(orjson.dumps(value, default=_refuse, option=_PASSTHROUGH))
        except TypeError:  # orjson.JSONEncodeError
            return _python_copy(value)
    return _python_copy(value)


def _python_copy(value: Any) -> Any:
    if type(value) is dict:
        return {k: _python_copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_python_copy(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return copy.deepcopy(value)


def fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


# canonical template text -> its hash: a controller re-hashes the same template on every
# reconcile, and FNV-1a byte by byte in Python costs ~0.3 ms for a NIM pod template.
_HASHES: dict[bytes, str] = {}
_HASHES_MAX = 4096


def template_hash(template: Any, collision_count: int = 0) -> str:
    """A pod-template-hash / controller-revision-hash in Kubernetes' safe alphabet."""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    found = _HASHES.get(data)
    if found is not None:
        return found
    value = fnv32a(data)
    found = "".join(SAFE_ALPHABET[int(ch) % len(SAFE_ALPHABET)] for ch in str(value))
    if len(_HASHES) >= _HASHES_MAX:
        _HASHES.clear()
    _HASHES[data] = found
    return found


# (owner uid, generation, collision count) -> (the template's JSON, its hash). A Deployment
# is reconciled about five times per rollout and each reconcile asked template_hash, whose
# canonical text (a sorted json.dumps, ~0.1 ms for a NIM template) is most of its cost.
_OWNER_HASHES: dict[tuple[str, int, int], tuple[bytes, str]] = {}


def owner_template_hash(owner: Mapping[str, Any], collision_count: int = 0) -> str:
    """:func:`template_hash` of *owner*'s ``spec.template``, remembered per owner uid,
    generation and collision count. The template's JSON kept beside the hash must still
    be the owner's, byte for byte (a spec change bumps the generation; the check guards
    objects that did not come from storage), so the value is always ``template_hash``'s.
    Its JSON (orjson, in C: ~2 us for a NIM template) is cheaper to write and compare
    than the template was to copy and compare as dicts."""
    template = (owner.get("spec") or {}).get("template") or {}
    meta = owner.get("metadata") or {}
    uid, generation = meta.get("uid"), meta.get("generation")
    if not uid or not isinstance(generation, int):
        return template_hash(template, collision_count)
    try:
        text = orjson.dumps(template, default=_refuse, option=_PASSTHROUGH)
    except TypeError:  # orjson.JSONEncodeError: not JSON orjson writes as json does
        return template_hash(template, collision_count)
    key = (str(uid), generation, collision_count)
    found = _OWNER_HASHES.get(key)
    if found is not None and found[0] == text:
        return found[1]
    value = template_hash(template, collision_count)
    if len(_OWNER_HASHES) >= _HASHES_MAX:
        _OWNER_HASHES.clear()
    _OWNER_HASHES[key] = (text, value)
    return value


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
    out = [json_copy(c) for c in conditions]
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
    meta = json_copy(dict(template.get("metadata") or {}))
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
        "spec": json_copy(dict(template.get("spec") or {})),
    }


def status_changed(obj: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    return dict(obj.get("status") or {}) != dict(status)


def with_status(obj: Mapping[str, Any], status: Mapping[str, Any]) -> Obj:
    """*obj* with *status*, for an ``UpdateStatus``: a shallow copy (the rest is shared with
    the view and read only; storage copies what it stores)."""
    out = dict(obj)
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
