"""GPU operand readiness, as pure functions of what the cache holds (§2.4, §6.1).

``daemonset_ready`` is the one DaemonSet check of the GPU kinds. It is
NVIDIA's ``isDaemonSetReady`` (ClusterPolicy) with one guard added: a
DaemonSet whose status the DaemonSet controller has not computed yet for the
current spec (``observedGeneration < generation``) is not ready. NVIDIA reads
an unobserved, just-created DaemonSet (``desiredNumberScheduled == 0``) as
ready; we do not, so ``ready`` never flickers on before the first pod exists.

For ``OnDelete`` DaemonSets (the driver: its pods are replaced by the upgrade
controller, never by the DaemonSet controller) a caller that passes ``pods``
(ClusterPolicy) has readiness read from the pods: every pod the DaemonSet owns
must run the newest ControllerRevision (hash = the revision name's suffix), be
Running and have every container ready. A caller that reads no pods
(NVIDIADriver and GPUCluster, NVIDIA's state skeleton) gets the skeleton's
rule from the counts alone: every desired pod available and updated, and, when
none is desired, none left scheduled or misscheduled either.

``daemonset_blocker`` says which pod holds a DaemonSet back, and on which node,
through the blocker finder (``platforms.blockers``): ``container
nvidia-driver-ctr of pod nvidia-driver-daemonset-x2x4q keeps crashing: last
exit code 1 (Error) (on node gpu-1)``; else, when none of its pods is ready,
``DaemonSet <name>: none of its <n> pods is ready``. The ClusterPolicy and
NVIDIADriver add it to NVIDIA's not-ready message (issue 25).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nimctl_runtime.meta import dig, name_of, uid_of
from platforms.blockers import Blocker, find_blocker

REVISION_HASH_LABEL = "controller-revision-hash"

__all__ = ["REVISION_HASH_LABEL", "daemonset_blocker", "daemonset_ready", "newest_revision_hash"]


def _int(obj: Mapping[str, Any], *path: str) -> int:
    value = dig(obj, *path)
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def newest_revision_hash(
    daemonset: Mapping[str, Any], revisions: Iterable[Mapping[str, Any]]
) -> str | None:
    """The hash of the DaemonSet's newest ControllerRevision (name ``<ds>-<hash>``).

    Revisions are matched by name prefix as NVIDIA does, and also by controller
    owner UID when they carry one (a revision of a same-prefixed DaemonSet such
    as ``nvidia-driver-daemonset-5.15...`` is not ours).
    """
    prefix = f"{name_of(daemonset)}-"
    uid = uid_of(daemonset)
    best: tuple[int, str] | None = None
    for rev in revisions:
        name = name_of(rev)
        if not name.startswith(prefix):
            continue
        suffix = name[len(prefix) :]
        if "-" in suffix:
            continue
        owners = dig(rev, "metadata", "ownerReferences", default=[]) or []
        if owners and uid and not any(o.get("uid") == uid for o in owners):
            continue
        number = _int(rev, "revision")
        if best is None or number > best[0]:
            best = (number, suffix)
    return best[1] if best else None


def _pod_ready(pod: Mapping[str, Any]) -> bool:
    if dig(pod, "status", "phase") != "Running":
        return False
    statuses = dig(pod, "status", "containerStatuses", default=[]) or []
    return bool(statuses) and all(bool(s.get("ready")) for s in statuses)


def _owned_by(pod: Mapping[str, Any], uid: str) -> bool:
    owners = dig(pod, "metadata", "ownerReferences", default=[]) or []
    return any(o.get("uid") == uid for o in owners)


def daemonset_ready(
    daemonset: Mapping[str, Any] | None,
    *,
    pods: Iterable[Mapping[str, Any]] | None = None,
    revisions: Iterable[Mapping[str, Any]] = (),
) -> tuple[bool, str]:
    """Whether the DaemonSet is ready, and why not (a fixed phrase, no counts: it goes
    into the ClusterPolicy's condition message, which must not change on every pod).

    ``pods`` and ``revisions`` are read only for ``OnDelete`` DaemonSets; pass
    the pods of the operator namespace that may belong to it. ``pods=None``
    (the default) is NVIDIA's state-skeleton rule, from the status counts only.
    """
    if daemonset is None:
        return False, "not found"
    generation = _int(daemonset, "metadata", "generation")
    observed = _int(daemonset, "status", "observedGeneration")
    if generation and observed < generation:
        return False, "status not observed yet"
    desired = _int(daemonset, "status", "desiredNumberScheduled")
    if desired == 0:
        if pods is None and (
            _int(daemonset, "status", "numberMisscheduled")
            or _int(daemonset, "status", "currentNumberScheduled")
        ):
            return False, "pods still scheduled"
        return True, ""
    if _int(daemonset, "status", "numberUnavailable") != 0:
        return False, "pods unavailable"
    strategy = dig(daemonset, "spec", "updateStrategy", "type") or "RollingUpdate"
    if strategy != "OnDelete" or pods is None:
        updated = _int(daemonset, "status", "updatedNumberScheduled")
        available = _int(daemonset, "status", "numberAvailable")
        if updated == desired and available == desired:
            return True, ""
        return False, "pods not updated or not available"
    # NVIDIA lists by the selector, then keeps the pods this DaemonSet owns: the
    # owner UID alone says the same (and survives the cache's label trimming).
    uid = uid_of(daemonset)
    owned = [p for p in pods if _owned_by(p, uid)]
    if not owned:
        return False, "no pods"
    current = newest_revision_hash(daemonset, revisions)
    if current is None:
        return False, "no ControllerRevision"
    for pod in owned:
        labels = dig(pod, "metadata", "labels") or {}
        if labels.get(REVISION_HASH_LABEL) != current:
            return False, "pods run an old revision"
        if not _pod_ready(pod):
            return False, "pods not ready"
    return True, ""


def daemonset_blocker(
    daemonset: Mapping[str, Any] | None, pods: Iterable[Mapping[str, Any]] = ()
) -> Blocker | None:
    """What holds the DaemonSet back: its first blocked pod (reason, message naming the pod
    and its node), else ``DaemonSetNotReady`` when none of its pods is ready; None when
    nothing is known to block (still rolling out, or ready)."""
    if not daemonset:
        return None
    name = name_of(daemonset)
    uid = uid_of(daemonset)
    owned = [p for p in pods if _owned_by(p, uid)] if uid else list(pods)
    found = find_blocker([daemonset], owned)
    if found is not None:
        pod_name = found.hop.removeprefix("pod/")
        node = next(
            (
                str(dig(p, "spec", "nodeName") or "")
                for p in owned
                if name_of(p) == pod_name and found.hop.startswith("pod/")
            ),
            "",
        )
        where = f" (on node {node})" if node else ""
        return Blocker(found.reason, f"{found.message}{where}", found.hop, found.terminal)
    desired = _int(daemonset, "status", "desiredNumberScheduled")
    if desired and not _int(daemonset, "status", "numberReady"):
        words = "its pod is not ready" if desired == 1 else f"none of its {desired} pods is ready"
        return Blocker(
            "DaemonSetNotReady",
            f"DaemonSet {name}: {words}",
            f"daemonset/{name}",
        )
    return None
