"""The ``pods/eviction`` subresource (policy/v1 ``Eviction``), as kube-apiserver serves it.

``POST .../pods/{name}/eviction`` deletes the pod when no PodDisruptionBudget
forbids it, and answers what kube-apiserver answers, so ``kubectl drain`` and
controllers that drain (the GPU driver upgrade) behave as on a real cluster:

- a pod that is finished, Pending or already being deleted is deleted without
  looking at budgets;
- more than one PDB selecting the pod: 500 (the eviction subresource does not
  support it);
- a PDB whose status the disruption controller has not caught up with, or
  whose ``disruptionsAllowed`` is 0: 429 ``TooManyRequests``, "Cannot evict
  pod as it would violate the pod's disruption budget." with a
  ``DisruptionBudget`` cause saying how many healthy pods it needs;
- a pod that is not Ready while the budget is met is evicted without using up
  a disruption (``unhealthyPodEvictionPolicy: IfHealthyBudget``);
- otherwise ``disruptionsAllowed`` is decremented, the pod recorded in
  ``disruptedPods`` (both through the PDB's status, with optimistic
  concurrency) and the pod deleted with the Eviction's ``deleteOptions``.

The answer to an eviction is a ``Status`` ``Success`` with code 201.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from aiohttp import web

from nimctl_runtime.labels import Selector

from . import errors
from .codec import json_response

if TYPE_CHECKING:
    from .handlers import RequestContext, ResourceHandlers

from nimctl_runtime.meta import Obj

EVICTION_VERSIONS: Final = ("policy/v1", "policy/v1beta1")
VIOLATION: Final = "Cannot evict pod as it would violate the pod's disruption budget."
MANY_PDBS: Final = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)

__all__ = ["VIOLATION", "evict"]


def _ready(pod: Obj) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def _violation(cause: str) -> errors.StatusError:
    return errors.StatusError(
        429,
        "TooManyRequests",
        VIOLATION,
        {"causes": [{"reason": "DisruptionBudget", "message": cause}]},
        retry_after=None,
    )


def _check_body(ctx: RequestContext, body: Any) -> Obj:
    if not isinstance(body, dict) or body.get("kind") not in (None, "Eviction"):
        raise errors.bad_request("the body of an eviction request must be an Eviction object")
    if body.get("apiVersion") not in (None, *EVICTION_VERSIONS):
        raise errors.bad_request(
            f"the API version in the data ({body.get('apiVersion')}) does not match the "
            "expected API version (policy/v1)"
        )
    name = (body.get("metadata") or {}).get("name")
    if name != ctx.info.name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    return body


def _pdbs_of(handlers: ResourceHandlers, pod: Obj, namespace: str) -> list[Obj]:
    info = handlers.storage.resolve("policy/v1", "PodDisruptionBudget")
    entries, _, _ = handlers.storage.list_entries(info, namespace)
    labels = (pod.get("metadata") or {}).get("labels") or {}
    out = []
    for entry in entries:
        pdb = entry.decode()
        selector = (pdb.get("spec") or {}).get("selector")
        if selector is not None and Selector.from_label_selector(selector).matches(labels):
            out.append(pdb)
    return out


def _take_disruption(handlers: ResourceHandlers, pdb: Obj, pod: Obj) -> None:
    """Use up one disruption of ``pdb`` for ``pod`` (raises the 429 when none is left)."""
    meta = pdb.get("metadata") or {}
    status = dict(pdb.get("status") or {})
    name = str(meta.get("name", ""))
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise _violation(f"The disruption budget {name} is still being processed by the server.")
    healthy = int(status.get("currentHealthy") or 0)
    desired = int(status.get("desiredHealthy") or 0)
    if not _ready(pod) and healthy >= desired > 0:
        return
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.forbidden("pdb disruptions allowed is negative")
    if allowed == 0:
        raise _violation(
            f"The disruption budget {name} needs {desired} healthy pods and has {healthy} currently"
        )
    disrupted = dict(status.get("disruptedPods") or {})
    disrupted[str((pod.get("metadata") or {}).get("name", ""))] = datetime.now(UTC).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    status["disruptionsAllowed"] = allowed - 1
    status["disruptedPods"] = disrupted
    updated = {**pdb, "status": status}
    info = handlers.storage.resolve("policy/v1", "PodDisruptionBudget")
    handlers.storage.update_object(info, updated, subresource="status")


async def evict(handlers: ResourceHandlers, ctx: RequestContext) -> web.StreamResponse:
    """Serve ``POST pods/{name}/eviction`` (see the module docstring)."""
    body = _check_body(ctx, await handlers._body(ctx))
    namespace = ctx.info.namespace
    pod = handlers.storage.read_object(ctx.resource, namespace, ctx.info.name)
    options: Obj = dict(body.get("deleteOptions") or {})
    phase = (pod.get("status") or {}).get("phase")
    terminating = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    if not (terminating or phase in ("Succeeded", "Failed", "Pending")):
        pdbs = _pdbs_of(handlers, pod, namespace)
        if len(pdbs) > 1:
            raise errors.internal(MANY_PDBS)
        if pdbs and not ctx.dry_run:
            _take_disruption(handlers, pdbs[0], pod)
    if not terminating:
        handlers.storage.delete_object(
            ctx.resource,
            namespace,
            ctx.info.name,
            propagation_policy=options.get("propagationPolicy"),
            preconditions=options.get("preconditions"),
            dry_run=ctx.dry_run,
        )
    return json_response(
        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201},
        201,
        ctx.warnings,
    )
