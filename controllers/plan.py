"""Pure planning of one reconcile's writes: desired objects + what the cache holds -> actions.

``plan(desired, owned, live)`` decides, without any I/O, which desired objects
must be created or updated (by desired-object hash, ``controllers.sync``) and
which owned objects the latest render no longer contains and must be pruned.
``controllers.reconciler`` executes the actions; a unit test can check a
reconcile's writes by calling ``plan`` alone, as the simulator's controllers
are tested.

Rules every kind shares:
- an object is identified by ``(apiVersion, kind, name)`` within the owner's
  namespace (or cluster-wide for cluster-scoped objects);
- ``create_only`` kinds (PersistentVolumeClaims: their spec is immutable and
  they hold data) are created once and never updated;
- a Deployment whose scale a desired HorizontalPodAutoscaler targets keeps
  the live replica count: it is hashed without ``replicas`` and updates carry
  the live value, so the HPA scaling never makes the operator write;
- pruning deletes only objects controlled by the owner (ownerReference UID)
  whose kind is not in ``keep_on_prune`` (PVCs are kept: deleting one loses
  the model store; garbage collection removes it with the owner).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from controllers.sync import ensure_hash, hpa_owned, needs_write
from nimctl_runtime.meta import Obj, dig, is_controlled_by, name_of

Key = tuple[str, str, str]

CREATE_ONLY_KINDS: frozenset[str] = frozenset({"PersistentVolumeClaim"})
KEEP_ON_PRUNE_KINDS: frozenset[str] = frozenset({"PersistentVolumeClaim"})

__all__ = [
    "CREATE_ONLY_KINDS",
    "KEEP_ON_PRUNE_KINDS",
    "Action",
    "key",
    "plan",
    "scaled_by_hpa",
]


def key(obj: Mapping[str, Any]) -> Key:
    """``(apiVersion, kind, name)``."""
    return (str(obj.get("apiVersion", "")), str(obj.get("kind", "")), name_of(obj))


@dataclass(frozen=True)
class Action:
    """One write: ``apply`` a desired object (create or update) or ``delete`` a stale one.

    ``live`` is what the cache holds (None: absent). ``create_only`` and
    ``keep_live_replicas`` tell the executor how to write (``sync_object``).
    """

    verb: Literal["apply", "delete"]
    obj: Obj
    live: Obj | None = None
    create_only: bool = False
    keep_live_replicas: bool = False

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
    create_only: frozenset[str] = CREATE_ONLY_KINDS,
    keep_on_prune: frozenset[str] = KEEP_ON_PRUNE_KINDS,
) -> list[Action]:
    """The writes that bring the cluster to ``desired``, in render order, then the prunes.

    ``owned`` are the objects the cache holds controlled by ``owner_uid`` in
    every kind the contract may own; ``live`` maps each desired key to its
    cached object. An ``apply`` is listed only when the live object differs by
    hash (or replica drift) from the desired one, or is absent; the executor
    still double-checks cache lag against its write log.
    """
    hpa_targets = scaled_by_hpa(desired)
    actions: list[Action] = []
    wanted: set[Key] = set()
    for obj in desired:
        k = key(obj)
        wanted.add(k)
        keep_replicas = obj.get("kind") == "Deployment" and name_of(obj) in hpa_targets
        # a render that did not stamp its hash still gets updates when it changes
        d = hpa_owned(obj) if keep_replicas else ensure_hash(obj)
        current = live.get(k)
        only_create = str(obj.get("kind")) in create_only
        if current is not None and (
            only_create or not needs_write(d, current, keep_live_replicas=keep_replicas)
        ):
            continue
        actions.append(
            Action(
                "apply",
                d,
                current,
                create_only=only_create,
                keep_live_replicas=keep_replicas,
            )
        )
    for stale in owned:
        k = key(stale)
        if k in wanted or k[1] in keep_on_prune:
            continue
        if not is_controlled_by(stale, owner_uid):
            continue
        if (stale.get("metadata") or {}).get("deletionTimestamp"):
            continue  # already going
        actions.append(Action("delete", dict(stale), dict(stale)))
    return actions
