"""The namespace controller's view of a terminating namespace, as pure functions.

kube-controller-manager empties a namespace being deleted in order (Kubernetes'
OrderedNamespaceDeletion, on by default since 1.33): the pods first, and only
when no pod is left everything else, so no workload is still running while its
Services, Secrets and PVCs vanish. Meanwhile it reports progress in the
namespace's status conditions, which ``kubectl describe namespace`` shows:

* ``NamespaceContentRemaining``: ``Some resources are remaining: pods. has 2
  resource instances``;
* ``NamespaceFinalizersRemaining``: ``Some content in the namespace has finalizers
  remaining: kubernetes.io/pvc-protection in 1 resource instances``;
* and the three failure conditions, False once discovery and deletion worked.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

Key = tuple[str, str, str, str]  # group, resource, namespace, name


def deletion_phase(keys: Iterable[Key]) -> tuple[list[Key], bool]:
    """The objects to delete now, and whether the pods still hold the rest back."""
    keys = list(keys)
    pods = [k for k in keys if k[0] == "" and k[1] == "pods"]
    if pods:
        return pods, True
    return keys, False


def _condition(type_: str, ok: bool, reason: str, message: str, stamp: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True" if ok else "False",
        "lastTransitionTime": stamp,
        "reason": reason,
        "message": message,
    }


def conditions(
    remaining: Iterable[tuple[Key, Mapping[str, Any]]], stamp: str
) -> list[dict[str, Any]]:
    """The status conditions of a terminating namespace holding *remaining* objects."""
    counts: Counter[str] = Counter()
    finalizers: Counter[str] = Counter()
    for key, obj in remaining:
        counts[f"{key[1]}.{key[0]}"] += 1
        for finalizer in (obj.get("metadata") or {}).get("finalizers") or []:
            finalizers[str(finalizer)] += 1
    out = [
        _condition(
            "NamespaceDeletionDiscoveryFailure",
            False,
            "ResourcesDiscovered",
            "All resources successfully discovered",
            stamp,
        ),
        _condition(
            "NamespaceDeletionGroupVersionParsingFailure",
            False,
            "ParsedGroupVersions",
            "All legacy kube types successfully parsed",
            stamp,
        ),
        _condition(
            "NamespaceDeletionContentFailure",
            False,
            "ContentDeleted",
            "All content successfully deleted, may be waiting on finalization",
            stamp,
        ),
    ]
    if counts:
        listed = ", ".join(f"{r} has {n} resource instances" for r, n in sorted(counts.items()))
        out.append(
            _condition(
                "NamespaceContentRemaining",
                True,
                "SomeResourcesRemain",
                f"Some resources are remaining: {listed}",
                stamp,
            )
        )
    else:
        out.append(
            _condition(
                "NamespaceContentRemaining",
                False,
                "ContentRemoved",
                "All content successfully removed",
                stamp,
            )
        )
    if finalizers:
        listed = ", ".join(f"{f} in {n} resource instances" for f, n in sorted(finalizers.items()))
        out.append(
            _condition(
                "NamespaceFinalizersRemaining",
                True,
                "SomeFinalizersRemain",
                f"Some content in the namespace has finalizers remaining: {listed}",
                stamp,
            )
        )
    else:
        out.append(
            _condition(
                "NamespaceFinalizersRemaining",
                False,
                "ContentHasNoFinalizers",
                "All content-preserving finalizers finished",
                stamp,
            )
        )
    return out


def same_conditions(old: Iterable[Mapping[str, Any]], new: Iterable[Mapping[str, Any]]) -> bool:
    """Equal apart from transition times (so an unchanged report is not written again)."""

    def strip(items: Iterable[Mapping[str, Any]]) -> list[tuple[Any, ...]]:
        return [(c.get("type"), c.get("status"), c.get("reason"), c.get("message")) for c in items]

    return strip(old) == strip(new)
