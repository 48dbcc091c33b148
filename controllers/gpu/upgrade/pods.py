"""Which pods an upgrade touches on a node, and whether it may (gpu-operator.md §4.2).

- GPU pods (pod deletion): pods that request or limit a resource named
  ``nvidia.com/gpu*`` or ``nvidia.com/mig-*``, or hold a ResourceClaim of the
  ``gpu.nvidia.com`` DRA driver; Running or Pending only.
- Drain candidates (``kubectl drain`` semantics): every pod on the node except
  DaemonSet pods and mirror pods, limited to ``drain.podSelector`` with
  ``nvidia.com/gpu-driver-upgrade-drain.skip!=true`` always added.
- A pod that declares no controller may only go with ``force``; a pod with an
  ``emptyDir`` volume only with ``deleteEmptyDir``. The refusals use kubectl's
  words, so a user recognises them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any, Final

from controllers.gpu.upgrade.consts import DRAIN_SKIP_LABEL
from nimctl_runtime.labels import Selector
from nimctl_runtime.meta import ObjView, controller_of, dig, name_of, namespace_of

GPU_RESOURCE_PREFIXES: Final = ("nvidia.com/gpu", "nvidia.com/mig-")
MIRROR_ANNOTATION: Final = "kubernetes.io/config.mirror"
NO_CONTROLLER: Final = "cannot delete Pods that declare no controller (use --force to override)"
LOCAL_STORAGE: Final = (
    "cannot delete Pods with local storage (use --delete-emptydir-data to override)"
)

__all__ = [
    "LOCAL_STORAGE",
    "NO_CONTROLLER",
    "claim_names",
    "drain_selector",
    "finished",
    "is_gpu_pod",
    "pod_key",
    "refusal",
    "selectable_for_drain",
]


def pod_key(pod: ObjView) -> str:
    """``namespace/name``, as kubectl prints a pod."""
    return f"{namespace_of(pod)}/{name_of(pod)}"


def finished(pod: ObjView) -> bool:
    """The pod ran to completion (Succeeded or Failed)."""
    return dig(pod, "status", "phase") in ("Succeeded", "Failed")


def claim_names(pod: ObjView) -> list[str]:
    """The names of the ResourceClaims the pod holds (spec names resolved through status)."""
    names: list[str] = []
    for claim in dig(pod, "spec", "resourceClaims") or []:
        if claim.get("resourceClaimName"):
            names.append(str(claim["resourceClaimName"]))
    for status in dig(pod, "status", "resourceClaimStatuses") or []:
        if status.get("resourceClaimName"):
            names.append(str(status["resourceClaimName"]))
    return names


def _gpu_resources(resources: Mapping[str, Any] | None) -> bool:
    for field in ("limits", "requests"):
        for name in (resources or {}).get(field) or {}:
            if str(name).startswith(GPU_RESOURCE_PREFIXES):
                return True
    return False


def is_gpu_pod(pod: ObjView, gpu_claims: Collection[tuple[str, str]] = ()) -> bool:
    """NVIDIA's GPU pod filter: GPU resources, or a ``gpu.nvidia.com`` claim (``gpu_claims``
    holds the ``(namespace, name)`` of such claims); Running or Pending pods only."""
    if dig(pod, "status", "phase") not in ("Running", "Pending"):
        return False
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if _gpu_resources(container.get("resources")):
            return True
    namespace = namespace_of(pod)
    return any((namespace, name) in gpu_claims for name in claim_names(pod))


def drain_selector(pod_selector: str | None) -> Selector:
    """``drain.podSelector`` plus the drain-skip exclusion NVIDIA always appends.

    Raises ``ValueError`` (with the selector in the message) when it does not parse.
    """
    text = (pod_selector or "").strip()
    full = f"{text},{DRAIN_SKIP_LABEL}!=true" if text else f"{DRAIN_SKIP_LABEL}!=true"
    try:
        return Selector.parse(full)
    except ValueError as err:
        raise ValueError(f"upgradePolicy.drain.podSelector {text!r}: {err}") from err


def selectable_for_drain(pod: ObjView, selector: Selector) -> bool:
    """Drain takes the pod: not a DaemonSet or mirror pod, and selected."""
    owner = controller_of(pod)
    if owner is not None and owner.get("kind") == "DaemonSet":
        return False
    if MIRROR_ANNOTATION in (dig(pod, "metadata", "annotations") or {}):
        return False
    return selector.matches(dig(pod, "metadata", "labels") or {})


def refusal(pod: ObjView, *, force: bool, delete_empty_dir: bool) -> str | None:
    """Why the pod may not be removed with these options, or None when it may."""
    if finished(pod):
        return None
    if controller_of(pod) is None and not force:
        return NO_CONTROLLER
    volumes: Iterable[Mapping[str, Any]] = dig(pod, "spec", "volumes") or []
    if not delete_empty_dir and any("emptyDir" in v for v in volumes):
        return LOCAL_STORAGE
    return None
