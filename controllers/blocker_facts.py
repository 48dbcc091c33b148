"""What ``platforms.blockers`` reads, from the cache, and the watches that keep it current.

A blocker shows on a pod (a waiting container, the scheduler's condition) or in
a Warning Event about it (``FailedMount`` for a missing ConfigMap, a pull
secret that cannot be read). Neither changes the workload's status, so the
kinds that name blockers watch both and wake the custom resource the pod
belongs to: at once, not at the next 30 s requeue.

- Pods: the operator's filtered Pod informer (managed-by label) already holds
  the NIM's and the caching Jobs' pods; ``pod_watch`` adds a map function and
  a predicate that passes an update only when the pod's blocker changed.
- Events: one informer for ``type=Warning`` Events only, trimmed to what the
  finder reads (``warning_event_cache``), indexed by the UID of the object
  they are about. Normal Events (most of a cluster's) are never cached.
- Nodes: read from the Node informer only when a pod waits for a GPU.

No API read per reconcile: everything here is a cache lookup.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from nimctl_runtime.cache.cache import ByObject, Cache
from nimctl_runtime.client.errors import ApiError, NotFound
from nimctl_runtime.client.interfaces import Reader
from nimctl_runtime.handler import UpdateEvent
from nimctl_runtime.meta import dig, name_of, namespace_of, uid_of
from nimctl_runtime.predicate import Funcs
from nimctl_runtime.reconcile import Request
from platforms.blockers import needs_nodes, pod_blocker

__all__ = [
    "EVENT",
    "EVENT_OBJECT_INDEX",
    "PodFacts",
    "event_object_uid",
    "gather_pod_facts",
    "pod_blocker_changed",
    "pod_event_watches",
    "trim_event",
    "warning_event_cache",
]

from nimctl_runtime.meta import Obj, ObjView

PodFacts = tuple[tuple[Obj, ...], tuple[Obj, ...], tuple[ObjView, ...] | None]
"""``(pods, warning events about them, nodes)``; nodes None when no pod waits for a GPU."""

EVENT = ("v1", "Event")
EVENT_OBJECT_INDEX = "involvedObject.uid"
_EVENT_KEPT = ("type", "reason", "message", "lastTimestamp", "eventTime", "count")


def trim_event(event: dict[str, Any]) -> dict[str, Any]:
    """Cache transform: what the blocker finder reads of an Event, nothing else."""
    meta = event.get("metadata") or {}
    about = event.get("involvedObject") or event.get("regarding") or {}
    out: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            k: meta[k]
            for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
            if k in meta
        },
        "involvedObject": {k: about[k] for k in ("kind", "name", "namespace", "uid") if k in about},
    }
    out.update({k: event[k] for k in _EVENT_KEPT if k in event})
    return out


def event_object_uid(event: Mapping[str, Any]) -> list[str]:
    uid = dig(event, "involvedObject", "uid")
    return [str(uid)] if uid else []


def warning_event_cache(cache: Cache) -> None:
    """Cache Warning Events only, trimmed and indexed by the object they are about.

    Call in a controller's setup, before the Event informer exists. Idempotent.
    """
    cache.by_object.setdefault(
        EVENT,
        ByObject(
            field_selector="type=Warning",
            transform=trim_event,
            index_labels=False,
            keep_labels=False,
        ),
    )
    with contextlib.suppress(ValueError):  # another controller added it
        cache.add_index(*EVENT, EVENT_OBJECT_INDEX, event_object_uid)


def _waits_for_a_node(pod: Mapping[str, Any]) -> bool:
    """The scheduler cannot place the pod for want of a GPU or of an uncordoned node."""
    for cond in dig(pod, "status", "conditions", default=[]) or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return needs_nodes(str(cond.get("message") or ""))
    return False


async def gather_pod_facts(
    reader: Reader,
    namespace: str,
    selectors: Iterable[Mapping[str, str]],
    *,
    events: bool,
    workloads: Iterable[Mapping[str, Any] | None] = (),
) -> PodFacts:
    """The pods matching any selector, the Warning Events about them (and about the
    ``workloads``: a Job's ``FailedCreate``), and the nodes (only when a pod waits for a
    GPU). A kind the cache cannot list gives nothing."""
    pods: dict[str, Obj] = {}
    for selector in selectors:
        try:
            for pod in await reader.list("v1", "Pod", namespace, label_selector=dict(selector)):
                pods.setdefault(uid_of(pod) or name_of(pod), pod)
        except ApiError:
            continue
    found: list[Obj] = []
    if events:
        about = [*pods, *(str(uid_of(w)) for w in workloads if w and uid_of(w))]
        for uid in about:
            try:
                found.extend(await reader.list(*EVENT, namespace, index=(EVENT_OBJECT_INDEX, uid)))
            except (ApiError, ValueError):
                break
    nodes: tuple[ObjView, ...] | None = None
    if any(_waits_for_a_node(p) for p in pods.values()):
        with contextlib.suppress(ApiError):
            nodes = await _all_nodes(reader)
    return tuple(pods.values()), tuple(found), nodes


async def _all_nodes(reader: Reader) -> tuple[ObjView, ...]:
    """Every Node: the cache's shared snapshot (decoded once per change of the Nodes,
    not once per pass of every service whose pod waits for a GPU), else a list."""
    shared = getattr(reader, "list_shared", None)
    if shared is not None:
        nodes: tuple[ObjView, ...] = await shared("v1", "Node")
        return nodes
    return tuple(await reader.list("v1", "Node"))


def pod_blocker_changed() -> Funcs:
    """Pod updates pass only when what blocks the pod changed (or it went Ready)."""

    def update(event: UpdateEvent) -> bool:
        old, new = pod_blocker(event.object_old), pod_blocker(event.object_new)
        if old != new:
            return True
        ready = [
            any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in dig(o, "status", "conditions", default=[]) or []
            )
            for o in (event.object_old, event.object_new)
        ]
        return ready[0] != ready[1]

    return Funcs(update=update, create=lambda _: False, generic=lambda _: False)


_EVENT_SUBJECTS = {"Pod": ("v1", "Pod"), "Job": ("batch/v1", "Job")}
"""Kinds whose Warning Events wake the owner: pods, and Jobs (a refused pod create).
A Job carries its pod template's labels, so the owner is found the same way."""

OwnerOfPod = Callable[[Mapping[str, Any]], str | None]
"""The name of the custom resource a pod belongs to (from its labels), or None."""


def pod_event_watches(
    cache: Reader, owner_of: OwnerOfPod
) -> tuple[Callable[[Obj], Awaitable[list[Request]]], Callable[[Obj], Awaitable[list[Request]]]]:
    """Map functions for Pod and Warning Event watches to the owning custom resource."""

    async def of_pod(pod: Obj) -> list[Request]:
        owner = owner_of(pod)
        return [Request(namespace_of(pod), owner)] if owner else []

    async def of_event(event: Obj) -> list[Request]:
        about = event.get("involvedObject") or {}
        gvk = _EVENT_SUBJECTS.get(str(about.get("kind", "")))
        if gvk is None:
            return []
        namespace = str(about.get("namespace") or namespace_of(event))
        try:
            subject = await cache.get(*gvk, str(about.get("name", "")), namespace)
        except (NotFound, ApiError):
            return []
        return await of_pod(subject)

    return of_pod, of_event
