"""A NIMService's ``status.draResourceStatuses`` and ``status.computeDomainStatus`` (pure).

NVIDIA's words (nim-operator.md §2.10): one entry per pod claim the render
made, named like the pod claim. A claim the spec names
(``resourceClaimName``) reports that claim; a template (named, or created from
``claimCreationSpec``) reports every ResourceClaim made from it for the
NIMService's pods, found by the ``resource.kubernetes.io/pod-claim-name``
annotation and listed oldest first. A claim's ``state`` joins ``deleted``,
``pending``, ``allocated`` and ``reserved``.

The ComputeDomain status is the ComputeDomain's own: name, overall status and
its nodes (name, clique, status).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nimctl_runtime.meta import ObjView, dig, name_of

POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"

__all__ = [
    "POD_CLAIM_NAME_ANNOTATION",
    "claim_state",
    "compute_domain_status",
    "dra_resource_statuses",
]



def claim_state(claim: ObjView) -> str:
    """NVIDIA's state words for one ResourceClaim, comma-joined."""
    deleting = bool(dig(claim, "metadata", "deletionTimestamp"))
    states = ["deleted"] if deleting else []
    if not dig(claim, "status", "allocation"):
        if not deleting:
            states.append("pending")
    else:
        states.append("allocated")
        if dig(claim, "status", "reservedFor"):
            states.append("reserved")
    return ",".join(states)


def _claim_status(claim: ObjView) -> dict[str, Any]:
    return {"name": name_of(claim), "state": claim_state(claim)}


def dra_resource_statuses(
    pod_claims: Iterable[ObjView], claims: Iterable[ObjView]
) -> list[dict[str, Any]]:
    """One status per pod claim (``{name, resourceClaimName|resourceClaimTemplateName}``)."""
    claims = list(claims)
    by_name = {name_of(c): c for c in claims}
    out: list[dict[str, Any]] = []
    for pod_claim in pod_claims:
        name = str(pod_claim.get("name", ""))
        if pod_claim.get("resourceClaimName"):
            ref = str(pod_claim["resourceClaimName"])
            claim = by_name.get(ref)
            status = _claim_status(claim) if claim is not None else {"name": ref}
            out.append({"name": name, "resourceClaimStatus": status})
            continue
        made = [
            c
            for c in claims
            if (dig(c, "metadata", "annotations", default={}) or {}).get(
                POD_CLAIM_NAME_ANNOTATION
            )
            == name
        ]
        made.sort(key=lambda c: (str(dig(c, "metadata", "creationTimestamp", default="")),
                                 name_of(c)))  # fmt: skip
        template: dict[str, Any] = {"name": str(pod_claim.get("resourceClaimTemplateName", ""))}
        if made:
            template["resourceClaimStatuses"] = [_claim_status(c) for c in made]
        out.append({"name": name, "resourceClaimTemplateStatus": template})
    return out


def compute_domain_status(compute_domain: ObjView | None) -> dict[str, Any] | None:
    """``{name, status, nodes}`` copied from a ComputeDomain (None: there is none yet)."""
    if not compute_domain:
        return None
    out: dict[str, Any] = {"name": name_of(compute_domain)}
    status = dig(compute_domain, "status", "status")
    if status:
        out["status"] = str(status)
    nodes = []
    for node in dig(compute_domain, "status", "nodes", default=[]) or []:
        entry: dict[str, Any] = {"name": node.get("name")}
        if node.get("cliqueID") is not None:
            entry["cliqueID"] = node["cliqueID"]
        entry["status"] = node.get("status") or "NotReady"
        nodes.append(entry)
    if nodes:
        out["nodes"] = nodes
    return out
