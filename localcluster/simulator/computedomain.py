"""ComputeDomains (``resource.nvidia.com/v1beta1``) of NVIDIA's DRA driver, as pure logic.

Used when the ComputeDomain CRD is installed. For each ComputeDomain the
simulated driver:

- creates the ResourceClaimTemplate named in ``spec.channel.resourceClaimTemplate``
  (in the domain's namespace, controlled by the domain) asking for one IMEX
  channel (device class ``compute-domain-default-channel.nvidia.com``), its
  claims labelled ``resource.nvidia.com/computeDomain: <uid>``;
- reports the IMEX domain in ``status``: a node joins once a claim of the
  domain's channel is allocated there (``name``, ``ipAddress``, ``cliqueID``,
  ``index``, ``status: Ready``), and ``status.status`` is ``Ready`` once
  ``spec.numNodes`` nodes have joined, ``NotReady`` before.

When the driver's compute-domain controller (Deployment
``nvidia-dra-driver-controller``) has a ready replica, the domain also gets its
IMEX daemons (``computedomain_daemon.py``): the joined nodes are labelled, a
daemon DaemonSet runs a pod on each, and a node's entry says ``Ready`` only once
its daemon pod is Ready (``NotReady`` before); ``status.status`` counts the
Ready nodes only.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from localcluster.simulator.computedomain_daemon import (
    controller_deployment,
    daemon_objects,
    node_label_actions,
    ready_daemon_nodes,
)
from localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    UpdateStatus,
    is_deleting,
    name_of,
    namespace_of,
    owner_reference,
    status_changed,
    uid_of,
    with_status,
)
from nimctl_runtime.meta import Obj

DOMAIN_LABEL = "resource.nvidia.com/computeDomain"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"

__all__ = ["DOMAIN_LABEL", "channel_template", "reconcile_computedomain"]


def channel_template(domain: Obj) -> Obj | None:
    """The ResourceClaimTemplate of the domain's channel (None: the spec names none)."""
    channel = (domain.get("spec") or {}).get("channel") or {}
    name = (channel.get("resourceClaimTemplate") or {}).get("name")
    if not name:
        return None
    labels = {DOMAIN_LABEL: uid_of(domain)}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": str(name),
            "namespace": namespace_of(domain),
            "labels": dict(labels),
            "ownerReferences": [owner_reference(domain)],
        },
        "spec": {
            "metadata": {"labels": dict(labels)},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "channel",
                            "exactly": {
                                "deviceClassName": CHANNEL_CLASS,
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ]
                }
            },
        },
    }


def _clique(domain: Obj) -> str:
    return hashlib.sha256(uid_of(domain).encode()).hexdigest()[:8] + "-clique"


def _joined_nodes(domain: Obj, ctx: Context) -> list[str]:
    nodes: list[str] = []
    for claim in ctx.view.list("ResourceClaim", namespace_of(domain)):
        labels = (claim.get("metadata") or {}).get("labels") or {}
        if labels.get(DOMAIN_LABEL) != uid_of(domain):
            continue
        selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector") or {}
        for term in selector.get("nodeSelectorTerms") or []:
            for match in term.get("matchFields") or []:
                for node in match.get("values") or []:
                    if node not in nodes:
                        nodes.append(str(node))
    return sorted(nodes)


def _node_ip(ctx: Context, node: str) -> str:
    obj = ctx.view.get("Node", "", node) or {}
    for address in (obj.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address"))
    return ""


def reconcile_computedomain(domain: Obj, ctx: Context) -> list[Action]:
    """Create the channel's template (and daemons); report the IMEX nodes."""
    actions: list[Action] = []
    template = channel_template(domain)
    if template is not None and ctx.view.get(
        "ResourceClaimTemplate", namespace_of(domain), name_of(template)
    ) is None:
        actions.append(Create(template))
    wanted = int((domain.get("spec") or {}).get("numNodes") or 0)
    joined = _joined_nodes(domain, ctx)
    ready = set(joined)
    controller = controller_deployment(ctx.view)
    if controller is not None and not is_deleting(domain):
        actions += daemon_objects(domain, controller, ctx.view)
        actions += node_label_actions(domain, joined, ctx.view)
        ready &= ready_daemon_nodes(domain, controller, ctx.view)
    status = copy.deepcopy(domain.get("status") or {})
    status["status"] = "Ready" if ready and len(ready) >= wanted else "NotReady"
    clique = _clique(domain)
    nodes: list[dict[str, Any]] = [
        {
            "name": node,
            "ipAddress": _node_ip(ctx, node),
            "cliqueID": clique,
            "index": index,
            "status": "Ready" if node in ready else "NotReady",
        }
        for index, node in enumerate(joined)
    ]
    if nodes:
        status["nodes"] = nodes
    else:
        status.pop("nodes", None)
    if status_changed(domain, status):
        actions.append(UpdateStatus(with_status(domain, status)))
    return actions
