"""The ComputeDomain controller's IMEX daemons, as pure logic.

NVIDIA's DRA driver runs, once its compute-domain controller (Deployment
``nvidia-dra-driver-controller``) is up, an IMEX daemon on every node where a
ComputeDomain's channel claim is allocated. The simulator does the same when
that Deployment has a ready replica (``controller_namespace``); without it
ComputeDomains behave as before (``computedomain.py``: nodes Ready as soon as
a channel claim is allocated there).

Per ComputeDomain, in the controller's namespace:

- the node gets the label ``resource.nvidia.com/computeDomain: <domain uid>``
  (the kubelet plugin sets it when it prepares a channel claim; the simulator
  removes it again when no claim of the domain is allocated there any more);
- a ResourceClaimTemplate asking for one device of DeviceClass
  ``compute-domain-daemon.nvidia.com``;
- a DaemonSet whose selector, pod labels and nodeSelector are that label, with
  service account ``compute-domain-daemon-service-account``, container
  ``compute-domain-daemon`` (image of the controller's first container) and a
  pod claim from the template. The existing DaemonSet simulation makes its pods.

Both carry an ownerReference to the ComputeDomain, so deleting the domain
removes them through localcluster's garbage collector (which follows owner
uids across namespaces). Differences, kept simple on purpose: the real
controller names both with ``generateName`` and removes them itself through a
finalizer (a cross-namespace ownerReference is not valid in Kubernetes); the
simulator uses the deterministic name ``<domain>-<uid prefix>`` so a repeated
reconcile never creates two, and never removes the node label of a deleted
domain. The daemon's command, volumes and tolerations beyond
``nvidia.com/gpu`` are not modelled.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from localcluster.simulator.kubelet import is_pod_ready
from localcluster.simulator.objects import (
    Action,
    Create,
    ObjectLookup,
    Update,
    labels_of,
    name_of,
    namespace_of,
    owner_reference,
    uid_of,
)
from nimctl_runtime.meta import Obj

CONTROLLER_DEPLOYMENT = "nvidia-dra-driver-controller"
DOMAIN_LABEL = "resource.nvidia.com/computeDomain"
DAEMON_CLASS = "compute-domain-daemon.nvidia.com"
DAEMON_SERVICE_ACCOUNT = "compute-domain-daemon-service-account"
DAEMON_CONTAINER = "compute-domain-daemon"
DAEMON_CLAIM = "compute-domain-daemon"

__all__ = [
    "CONTROLLER_DEPLOYMENT",
    "controller_deployment",
    "daemon_claim_template",
    "daemon_daemonset",
    "daemon_name",
    "daemon_objects",
    "node_label_actions",
    "ready_daemon_nodes",
]


def controller_deployment(view: ObjectLookup) -> Obj | None:
    """The driver's compute-domain controller Deployment with a ready replica, if any."""
    for deployment in view.list("Deployment"):
        if name_of(deployment) != CONTROLLER_DEPLOYMENT:
            continue
        status = deployment.get("status") or {}
        if int(status.get("readyReplicas") or 0) >= 1:
            return deployment
    return None


def daemon_name(domain: Mapping[str, Any]) -> str:
    """The name of the domain's daemon DaemonSet and ResourceClaimTemplate."""
    return f"{name_of(domain)[:52]}-{uid_of(domain)[:8]}".strip("-")


def _controller_image(controller: Mapping[str, Any]) -> str:
    template = ((controller.get("spec") or {}).get("template") or {}).get("spec") or {}
    containers = template.get("containers") or [{}]
    return str(containers[0].get("image") or "")


def daemon_claim_template(domain: Obj, namespace: str) -> Obj:
    """The ResourceClaimTemplate of the daemon pods' claim (one daemon device)."""
    labels = {DOMAIN_LABEL: uid_of(domain)}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {
            "name": daemon_name(domain),
            "namespace": namespace,
            "labels": dict(labels),
            "ownerReferences": [owner_reference(domain)],
        },
        "spec": {
            "metadata": {"labels": dict(labels)},
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "daemon",
                            "exactly": {
                                "deviceClassName": DAEMON_CLASS,
                                "allocationMode": "ExactCount",
                                "count": 1,
                            },
                        }
                    ]
                }
            },
        },
    }


def daemon_daemonset(domain: Obj, controller: Mapping[str, Any]) -> Obj:
    """The DaemonSet running the domain's IMEX daemon on the nodes labelled with its uid."""
    labels = {DOMAIN_LABEL: uid_of(domain)}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": daemon_name(domain),
            "namespace": namespace_of(controller),
            "labels": dict(labels),
            "ownerReferences": [owner_reference(domain)],
        },
        "spec": {
            "selector": {"matchLabels": dict(labels)},
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "serviceAccountName": DAEMON_SERVICE_ACCOUNT,
                    "nodeSelector": dict(labels),
                    "tolerations": [
                        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
                    ],
                    "containers": [
                        {"name": DAEMON_CONTAINER, "image": _controller_image(controller)}
                    ],
                    "resourceClaims": [
                        {"name": DAEMON_CLAIM, "resourceClaimTemplateName": daemon_name(domain)}
                    ],
                },
            },
        },
    }


def daemon_objects(domain: Obj, controller: Mapping[str, Any], view: ObjectLookup) -> list[Action]:
    """Create the domain's daemon ResourceClaimTemplate and DaemonSet where they are missing."""
    namespace = namespace_of(controller)
    actions: list[Action] = []
    template = daemon_claim_template(domain, namespace)
    if view.get("ResourceClaimTemplate", namespace, name_of(template)) is None:
        actions.append(Create(template))
    daemonset = daemon_daemonset(domain, controller)
    if view.get("DaemonSet", namespace, name_of(daemonset)) is None:
        actions.append(Create(daemonset))
    return actions


def node_label_actions(domain: Obj, joined: list[str], view: ObjectLookup) -> list[Action]:
    """Label the nodes where the domain's channel is allocated; unlabel those it left."""
    uid = uid_of(domain)
    actions: list[Action] = []
    for node in view.list("Node"):
        has = labels_of(node).get(DOMAIN_LABEL) == uid
        wants = name_of(node) in joined
        if has == wants or (wants and labels_of(node).get(DOMAIN_LABEL)):
            continue  # already right, or another domain's node (one domain per node)
        updated = copy.deepcopy(node)
        node_labels = updated.setdefault("metadata", {}).setdefault("labels", {})
        if wants:
            node_labels[DOMAIN_LABEL] = uid
        else:
            node_labels.pop(DOMAIN_LABEL, None)
        actions.append(Update(updated))
    return actions


def ready_daemon_nodes(domain: Obj, controller: Mapping[str, Any], view: ObjectLookup) -> set[str]:
    """The nodes on which a daemon pod of the domain is Ready."""
    uid = uid_of(domain)
    return {
        str((pod.get("spec") or {}).get("nodeName"))
        for pod in view.list("Pod", namespace_of(controller))
        if labels_of(pod).get(DOMAIN_LABEL) == uid and is_pod_ready(pod)
    }
