"""Create-or-update of rendered objects by desired-object hash, shared by the controllers.

A rendered object carries ``nvidia.com/last-applied-hash``; the live object is
written only when its hash differs (or, for a Deployment not under an HPA,
when someone changed its replica count). Reads come from the cache; when the
cache may lag behind one of our own writes, the live object is read through
the uncached reader before writing again, so a reconcile that finds nothing
changed writes nothing even under load.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from manifests.hashing import LAST_APPLIED_HASH_ANNOTATION, desired_hash, stamp_hash
from manifests.labels import OPERATOR_VERSION_LABEL
from nimctl_runtime.client.errors import AlreadyExists, ApiError, Conflict, NotFound
from nimctl_runtime.client.interfaces import KeyReader, Writer
from nimctl_runtime.meta import Obj

K = TypeVar("K")
V = TypeVar("V")

# Fields the API server allocates on create that an update must carry over.
_SERVICE_ALLOCATED = (
    "clusterIP",
    "clusterIPs",
    "ipFamilies",
    "ipFamilyPolicy",
    "healthCheckNodePort",
)


# Pod-template labels nimctl does not render but an update keeps when the live
# template has them: NVIDIA's operator puts its version on the pod templates
# (docs/differences.md item 4), and dropping a pod label restarts every pod of
# the workload, so a Deployment or LeaderWorkerSet taken over from NVIDIA keeps it.
KEPT_POD_TEMPLATE_LABELS: tuple[str, ...] = (OPERATOR_VERSION_LABEL,)


def pod_templates(obj: Mapping[str, Any], kind: str) -> list[Any]:
    """The pod templates of a workload of ``kind`` (Deployment-like or LeaderWorkerSet)."""
    spec = obj.get("spec") or {}
    if kind == "LeaderWorkerSet":
        lwt = spec.get("leaderWorkerTemplate") or {}
        return [lwt.get("leaderTemplate"), lwt.get("workerTemplate")]
    return [spec.get("template")]


def keep_live_pod_labels(body: Obj, live: Mapping[str, Any]) -> None:
    """Carry :data:`KEPT_POD_TEMPLATE_LABELS` of ``live``'s pod templates into ``body``'s."""
    kind = str(body.get("kind", ""))
    for want, have in zip(pod_templates(body, kind), pod_templates(live, kind), strict=True):
        if not isinstance(want, dict) or not isinstance(have, Mapping):
            continue
        have_labels = (have.get("metadata") or {}).get("labels") or {}
        kept = {k: have_labels[k] for k in KEPT_POD_TEMPLATE_LABELS if k in have_labels}
        if kept:
            labels = want.setdefault("metadata", {}).setdefault("labels", {})
            for k, v in kept.items():
                labels.setdefault(k, v)


def hash_of(obj: Mapping[str, Any] | None) -> str | None:
    if not obj:
        return None
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(LAST_APPLIED_HASH_ANNOTATION)
    return str(value) if value is not None else None


def key_of(obj: Mapping[str, Any]) -> tuple[str, str, str, str]:
    meta = obj.get("metadata") or {}
    return (
        str(obj.get("apiVersion", "")),
        str(obj.get("kind", "")),
        str(meta.get("namespace") or ""),
        str(meta.get("name", "")),
    )


def ensure_hash(obj: Obj) -> Obj:
    """Stamp the desired-object hash when the renderer did not."""
    if hash_of(obj) is None:
        stamp_hash(obj)
    return obj


def hpa_owned(obj: Obj) -> Obj:
    """A Deployment whose replica count belongs to an HPA: hash it without ``replicas``.

    The replica count stays in the object for the create; updates keep the
    live count (``update_body(..., keep_live_replicas=True)``), so the HPA
    scaling never makes the operator write.
    """
    out = copy.deepcopy(obj)
    bare = copy.deepcopy(obj)
    (bare.get("spec") or {}).pop("replicas", None)
    (bare.get("metadata") or {}).get("annotations", {}).pop(LAST_APPLIED_HASH_ANNOTATION, None)
    stamp_hash(bare)
    out.setdefault("metadata", {}).setdefault("annotations", {})[LAST_APPLIED_HASH_ANNOTATION] = (
        bare["metadata"]["annotations"][LAST_APPLIED_HASH_ANNOTATION]
    )
    return out


def needs_write(
    desired: Mapping[str, Any], live: Mapping[str, Any] | None, *, keep_live_replicas: bool = False
) -> bool:
    """Whether the live object differs from what we want (hash or replica drift)."""
    if live is None:
        return True
    if hash_of(live) != hash_of(desired):
        return True
    if desired.get("kind") == "Deployment" and not keep_live_replicas:
        want = (desired.get("spec") or {}).get("replicas")
        have = (live.get("spec") or {}).get("replicas")
        if want is not None and want != have:
            return True
    return False


def update_body(
    desired: Mapping[str, Any], live: Mapping[str, Any], *, keep_live_replicas: bool = False
) -> Obj:
    """The object to PUT: ours, on the live object's identity and server-owned fields."""
    body = copy.deepcopy(dict(desired))
    if keep_live_replicas and body.get("kind") == "Deployment":
        (body.get("spec") or {}).pop("replicas", None)
    live_meta = live.get("metadata") or {}
    meta = body.setdefault("metadata", {})
    meta["resourceVersion"] = live_meta.get("resourceVersion")
    for keep in ("uid", "finalizers", "creationTimestamp"):
        if keep in live_meta and keep not in meta:
            meta[keep] = copy.deepcopy(live_meta[keep])
    if body.get("kind") == "Service":
        spec = body.setdefault("spec", {})
        live_spec = live.get("spec") or {}
        for f in _SERVICE_ALLOCATED:
            if f in live_spec and f not in spec:
                spec[f] = copy.deepcopy(live_spec[f])
        live_ports = {p.get("name"): p for p in live_spec.get("ports") or ()}
        keeps_node_ports = spec.get("type") in ("NodePort", "LoadBalancer")
        for p in spec.get("ports") or ():
            node_port = (live_ports.get(p.get("name")) or {}).get("nodePort")
            if node_port and "nodePort" not in p and keeps_node_ports:
                p["nodePort"] = node_port
    if body.get("kind") in ("Deployment", "LeaderWorkerSet"):
        keep_live_pod_labels(body, live)
    if body.get("kind") == "Deployment" and "replicas" not in (body.get("spec") or {}):
        replicas = (live.get("spec") or {}).get("replicas")
        if replicas is not None:
            body.setdefault("spec", {})["replicas"] = replicas
    return body


@dataclass
class WriteLog:
    """Hashes of what this process last wrote, to tell cache lag from a real change."""

    written: dict[tuple[str, str, str, str], str] = field(default_factory=dict)

    def record(self, obj: Mapping[str, Any]) -> None:
        h = hash_of(obj)
        if h is not None:
            self.written[key_of(obj)] = h

    def forget(self, key: tuple[str, str, str, str]) -> None:
        self.written.pop(key, None)

    def forget_namespace_name(self, namespace: str, name: str) -> None:
        for k in [k for k in self.written if k[2] == namespace and k[3] == name]:
            del self.written[k]

    def wrote_key(self, key: tuple[str, str, str, str]) -> bool:
        return key in self.written

    def wrote(self, desired: Mapping[str, Any]) -> bool:
        return self.written.get(key_of(desired)) == hash_of(desired)


@dataclass
class WriteMemo(Generic[K, V]):
    """What this process last wrote to an object, with the resourceVersion it was written over.

    The one "RV-keyed memo of what I last wrote": while the cache still shows
    that resourceVersion it has not seen our write yet, so the value written
    is what the server holds (``written``) and the same write is not sent
    again (``pending``). A newer resourceVersion makes the memo stale.
    """

    _memo: dict[K, tuple[str, V]] = field(default_factory=dict)

    def record(self, key: K, resource_version: str, value: V) -> None:
        self._memo[key] = (resource_version, value)

    def written(self, key: K, resource_version: str) -> V | None:
        """The value written over ``resource_version`` (None: none, or the cache moved on)."""
        memo = self._memo.get(key)
        return memo[1] if memo is not None and memo[0] == resource_version else None

    def pending(self, key: K, resource_version: str, value: V) -> bool:
        """Whether ``value`` was written over ``resource_version``: the cache has not caught up."""
        return self._memo.get(key) == (resource_version, value)

    def forget(self, key: K) -> None:
        self._memo.pop(key, None)

    def __len__(self) -> int:
        return len(self._memo)


@dataclass
class SyncOutcome:
    """What ``sync_object`` did."""

    live: Obj
    action: str  # "none" | "created" | "updated" | "foreign"


async def sync_object(
    desired: Obj,
    *,
    cached: Obj | None,
    reader: KeyReader,
    writer: Writer,
    log: WriteLog,
    create_only: bool = False,
    keep_live_replicas: bool = False,
    controller_uid: str | None = None,
) -> SyncOutcome:
    """Bring one object to ``desired``; no request when the cached/live object matches.

    With ``controller_uid``, an existing object of the same name that this
    controller does not control is left as it is (action ``"foreign"``): the
    caller reports it instead of overwriting someone else's object.
    """
    api_version, kind, namespace, name = key_of(desired)
    live = cached

    def differs(obj: Mapping[str, Any] | None) -> bool:
        return needs_write(desired, obj, keep_live_replicas=keep_live_replicas)

    if differs(live) and log.wrote(desired):
        # We wrote exactly this already; the cache has not caught up. Look at the server.
        try:
            live = await reader.get(api_version, kind, name, namespace or None)
        except NotFound:
            live = None
    if live is not None and _foreign(live, controller_uid):
        return SyncOutcome(live, "foreign")
    if live is not None and (create_only or not differs(live)):
        return SyncOutcome(live, "none")
    if live is None:
        try:
            created = await writer.create(desired)
        except AlreadyExists:
            live = await reader.get(api_version, kind, name, namespace or None)
            if _foreign(live, controller_uid):
                return SyncOutcome(live, "foreign")
            if create_only or not differs(live):
                log.record(desired)
                return SyncOutcome(live, "none")
        else:
            log.record(desired)
            return SyncOutcome(created, "created")
    updated = await writer.update(update_body(desired, live, keep_live_replicas=keep_live_replicas))
    log.record(desired)
    return SyncOutcome(updated, "updated")


def _foreign(live: Mapping[str, Any], controller_uid: str | None) -> bool:
    """``live`` exists and is not controlled by ``controller_uid`` (when one is given)."""
    if controller_uid is None:
        return False
    for ref in (live.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("uid") == controller_uid:
            return False
    return True


__all__ = [
    "SyncOutcome",
    "WriteLog",
    "WriteMemo",
    "desired_hash",
    "ensure_hash",
    "hash_of",
    "hpa_owned",
    "needs_write",
    "sync_object",
    "update_body",
]


async def patch_finalizers(
    client: Writer, api_version: str, kind: str, obj: Obj, finalizers: list[str]
) -> Obj:
    """Set ``metadata.finalizers`` only if *obj* is still the version we read.

    A JSON patch with a ``test`` on the resourceVersion: a concurrent change
    answers 409 (or 422 for the failed test) and is raised as Conflict so the
    reconcile retries on fresh data instead of overwriting someone's finalizer.
    """
    meta = obj.get("metadata") or {}
    body: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")},
        {"op": "add", "path": "/metadata/finalizers", "value": finalizers},
    ]
    try:
        return await client.patch(
            api_version,
            kind,
            str(meta.get("name", "")),
            body,
            namespace=meta.get("namespace"),
            patch_type="json",
        )
    except ApiError as exc:
        if exc.status in (409, 422):
            raise Conflict(409, "Conflict", str(exc)) from exc
        raise
