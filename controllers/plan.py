"""Pure planning of one reconcile's writes: desired objects + what the cache holds -> actions.

``plan(desired, owned, live)`` decides, without any I/O, which desired objects
must be created or updated (by desired-object hash, ``controllers.sync``) and
which owned objects the latest render no longer contains and must be pruned.
``controllers.reconciler`` executes the actions; a unit test can check a
reconcile's writes by calling ``plan`` alone, as the simulator's controllers
are tested.

How each object is written is its ``WritePolicy``, which ``plan`` asks of a
``policy(obj)`` function (a kind's ``Kind.write_policy``) and carries on the
action for the executor:

- ``create_only``: created once and never updated (PersistentVolumeClaims:
  their spec is immutable and they hold data; Jobs; a ClusterPolicy's
  ServiceAccounts);
- ``keep_on_prune``: never pruned (PVCs: deleting one loses the model store;
  garbage collection removes it with the owner);
- ``overwrite_foreign=False``: a same-named object the owner does not control
  is never written; the executor reports it as ``foreign`` (NIMPipeline);
- ``propagation``: the ``propagationPolicy`` of a prune (``Orphan``: a
  ClusterPolicy's driver DaemonSets once NVIDIADrivers own the drivers, so the
  drivers keep running; ``None``: the server's default);
- ``drain_on_delete``: when the owner is deleted, the object goes first, in
  the foreground (its pods with it), and the owner's finalizer is kept until
  it is gone (``drain``): a GPUCluster's ResourceClaim-consuming DaemonSets,
  so the kubelet plugin outlives the claims it must unprepare;
- ``keep_live_replicas``: set by ``plan`` itself, the one HPA rule: a
  Deployment whose scale a desired HorizontalPodAutoscaler targets is hashed
  without ``replicas`` and updates carry the live value, so the HPA scaling
  never makes the operator write (a render sets the replicas a create starts
  with and need not know the live count).

Pruning deletes only objects controlled by the owner (ownerReference UID) and
not already being deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from controllers.sync import ensure_hash, hpa_owned, needs_write
from nimctl_runtime.meta import Obj, ObjView, dig, is_controlled_by, name_of

Key = tuple[str, str, str]

CREATE_ONLY_KINDS: frozenset[str] = frozenset({"PersistentVolumeClaim"})
KEEP_ON_PRUNE_KINDS: frozenset[str] = frozenset({"PersistentVolumeClaim"})
FOREGROUND = "Foreground"

__all__ = [
    "CREATE_ONLY_KINDS",
    "KEEP_ON_PRUNE_KINDS",
    "Action",
    "WritePolicy",
    "by_kind",
    "drain",
    "key",
    "plan",
    "scaled_by_hpa",
]


@dataclass(frozen=True)
class WritePolicy:
    """How one object is written and pruned (see the module docstring)."""

    create_only: bool = False
    keep_on_prune: bool = False
    overwrite_foreign: bool = True
    propagation: str | None = None
    drain_on_delete: bool = False
    keep_live_replicas: bool = False


DEFAULT_POLICY = WritePolicy()


def by_kind(
    create_only: frozenset[str] = CREATE_ONLY_KINDS,
    keep_on_prune: frozenset[str] = KEEP_ON_PRUNE_KINDS,
    **rest: Any,
) -> Callable[[ObjView], WritePolicy]:
    """A policy function from sets of kinds (the common case), ``rest`` for every object."""

    def policy(obj: ObjView) -> WritePolicy:
        kind = str(obj.get("kind", ""))
        return WritePolicy(
            create_only=kind in create_only, keep_on_prune=kind in keep_on_prune, **rest
        )

    return policy


def key(obj: Mapping[str, Any]) -> Key:
    """``(apiVersion, kind, name)``."""
    return (str(obj.get("apiVersion", "")), str(obj.get("kind", "")), name_of(obj))


@dataclass(frozen=True)
class Action:
    """One write: ``apply`` a desired object (create or update) or ``delete`` a stale one.

    ``live`` is what the cache holds (None: absent). ``policy`` tells the
    executor how to write (``sync_object``) or delete.
    """

    verb: Literal["apply", "delete"]
    obj: Obj
    live: Obj | None = None
    policy: WritePolicy = DEFAULT_POLICY

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    @property
    def name(self) -> str:
        return name_of(self.obj)


def scaled_by_hpa(desired: Sequence[Mapping[str, Any]]) -> set[str]:
    """Names of Deployments a desired HorizontalPodAutoscaler scales."""
    out: set[str] = set()
    for obj in desired:
        if obj.get("kind") != "HorizontalPodAutoscaler":
            continue
        target = dig(obj, "spec", "scaleTargetRef", default={})
        if target.get("kind") == "Deployment" and target.get("name"):
            out.add(str(target["name"]))
    return out


def plan(
    desired: Sequence[Obj],
    owned: Iterable[Mapping[str, Any]],
    live: Mapping[Key, Obj],
    *,
    owner_uid: str,
    policy: Callable[[ObjView], WritePolicy] | None = None,
) -> list[Action]:
    """The writes that bring the cluster to ``desired``, in render order, then the prunes.

    ``owned`` are the objects the cache holds controlled by ``owner_uid`` in
    every kind the contract may own; ``live`` maps each desired key to its
    cached object. An ``apply`` is listed only when the live object differs by
    hash (or replica drift) from the desired one, or is absent; the executor
    still double-checks cache lag against its write log. ``policy`` gives each
    object's ``WritePolicy`` (default: ``by_kind()``, PVCs created once and kept).
    """
    policy_of = policy or by_kind()
    hpa_targets = scaled_by_hpa(desired)
    actions: list[Action] = []
    wanted: set[Key] = set()
    for obj in desired:
        k = key(obj)
        wanted.add(k)
        p = policy_of(obj)
        if obj.get("kind") == "Deployment" and name_of(obj) in hpa_targets:
            p = replace(p, keep_live_replicas=True)
        # a render that did not stamp its hash still gets updates when it changes
        d = hpa_owned(obj) if p.keep_live_replicas else ensure_hash(obj)
        current = live.get(k)
        if current is not None and (
            p.create_only or not needs_write(d, current, keep_live_replicas=p.keep_live_replicas)
        ):
            continue
        actions.append(Action("apply", d, current, p))
    for stale in owned:
        k = key(stale)
        if k in wanted or not is_controlled_by(stale, owner_uid):
            continue
        if (stale.get("metadata") or {}).get("deletionTimestamp"):
            continue  # already going
        p = policy_of(stale)
        if p.keep_on_prune:
            continue
        actions.append(Action("delete", dict(stale), dict(stale), p))
    return actions



def drain(
    owned: Iterable[Mapping[str, Any]],
    *,
    owner_uid: str,
    policy: Callable[[ObjView], WritePolicy] | None = None,
) -> tuple[list[Action], list[str]]:
    """What a deleting owner removes before its finalizer goes: the foreground deletes
    to send, and the names of every object still to wait for (by name).

    Only objects the owner controls whose policy says ``drain_on_delete``; one
    already being deleted is waited for, not deleted again.
    """
    policy_of = policy or by_kind()
    first = sorted(
        (o for o in owned if is_controlled_by(o, owner_uid) and policy_of(o).drain_on_delete),
        key=name_of,
    )
    actions = [
        Action("delete", dict(o), dict(o), replace(policy_of(o), propagation=FOREGROUND))
        for o in first
        if not (o.get("metadata") or {}).get("deletionTimestamp")
    ]
    return actions, [name_of(o) for o in first]
