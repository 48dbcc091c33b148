"""NIMService's contract: one render, one list of owned kinds, one readiness, for every platform.

``spec.inferencePlatform`` picks the platform (``standalone``, the default, or
``kserve``) in ``render`` and ``readiness`` alike, for the operator and for
``nimctl render``. ``owned_kinds`` is the union over both platforms, so
switching platform prunes the other platform's objects.

Readiness (nim-operator.md §2.10, §2.12):
- standalone: the LeaderWorkerSet's ``Available`` condition when the render
  made one (multi-node), else the Deployment's rollout status, as
  ``kubectl rollout status`` words it;
- kserve: the InferenceService's ``PredictorReady`` condition.
Not ready requeues after 30 s, as NVIDIA's operator does.

On the standalone platform ``readiness`` also reports, in ``details``, the
DRA claims' states (``draResourceStatuses``) and the ComputeDomain's status
(``computeDomainStatus``), from the claims and ComputeDomain in the facts.
"""

from __future__ import annotations

from typing import Any

from api.apps.v1alpha1.common import STATE_FAILED, STATE_NOT_READY, STATE_READY
from api.apps.v1alpha1.nimservice import (
    REASON_DRA_RESOURCES_UNSUPPORTED,
    REASON_NOT_READY,
    REASON_READY,
    NIMService,
)
from nimctl_runtime.meta import ObjView, dig, find_condition
from platforms import kserve, standalone
from platforms.blockers import Blocker, find_blocker
from platforms.capabilities import (
    COMPUTE_DOMAIN,
    GRPC_ROUTE,
    GVK,
    HTTP_ROUTE,
    INFERENCE_POOL,
    INFERENCE_SERVICE,
    LEADER_WORKER_SET,
    RESOURCE_CLAIM_TEMPLATE,
    SERVICE_MONITOR,
    Capabilities,
)
from platforms.contract import Blocked, Observed, Readiness
from platforms.standalone import lws, podspec
from platforms.standalone.context import RenderContext
from platforms.standalone.dra_checks import dra_spec_problem
from platforms.standalone.dra_status import compute_domain_status, dra_resource_statuses
from platforms.standalone.inputs import NIMServiceInputs, as_nimservice, given

__all__ = [
    "API_VERSION",
    "BUILTIN_OWNED",
    "KIND",
    "NOT_READY_REQUEUE",
    "OPTIONAL_OWNED",
    "NIMServiceContract",
    "deployment_readiness",
    "dra_details",
    "inference_service_readiness",
    "leader_worker_set_readiness",
    "missing_kinds",
    "platform_of",
    "service_blocker",
]

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMService"
NOT_READY_REQUEUE = 30.0

BUILTIN_OWNED: tuple[GVK, ...] = (
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("v1", "Service"),
    ("v1", "ConfigMap"),
    ("v1", "Secret"),
    ("networking.k8s.io/v1", "Ingress"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("v1", "PersistentVolumeClaim"),
    ("apps/v1", "Deployment"),
)
"""Built-in kinds a NIMService may own on some platform (always served)."""

OPTIONAL_OWNED: tuple[GVK, ...] = (
    HTTP_ROUTE,
    GRPC_ROUTE,
    SERVICE_MONITOR,
    INFERENCE_POOL,
    RESOURCE_CLAIM_TEMPLATE,
    LEADER_WORKER_SET,
    INFERENCE_SERVICE,
    COMPUTE_DOMAIN,
)
"""CRD-provided kinds a NIMService may own, where the cluster serves them."""


KSERVE_EARLY_KINDS = ("ServiceAccount", "Role", "RoleBinding")


def platform_of(nimservice: NIMService) -> str:
    return nimservice.spec.inference_platform


def deployment_readiness(deployment: ObjView | None) -> tuple[str, bool]:
    """``kubectl rollout status`` words and whether the Deployment is rolled out (§2.10)."""
    if not deployment:
        return "", False
    name = dig(deployment, "metadata", "name", default="")
    replicas = dig(deployment, "spec", "replicas")
    st = deployment.get("status") or {}
    if not replicas:
        return f'deployment "{name}" is scaled down', False
    for c in st.get("conditions") or ():
        if c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded":
            return f'deployment "{name}" exceeded its progress deadline', False
    updated = int(st.get("updatedReplicas") or 0)
    available = int(st.get("availableReplicas") or 0)
    if updated < replicas:
        return (
            f'Waiting for deployment "{name}" rollout to finish: {updated} out of {replicas} '
            "new replicas have been updated...\n",
            False,
        )
    if available < updated:
        return (
            f'Waiting for deployment "{name}" rollout to finish: {available} of {updated} '
            "updated replicas are available...\n",
            False,
        )
    return f'deployment "{name}" successfully rolled out\n', True


def leader_worker_set_readiness(lws: ObjView | None, name: str) -> tuple[str, bool]:
    """NVIDIA's LeaderWorkerSet words (§2.8): scaled down, ready (``Available``), not ready."""
    if not lws:
        return f'leaderworkerset "{name}" is not ready', False
    if not dig(lws, "spec", "replicas"):
        return f'leaderworkerset "{name}" is scaled down', False
    available = find_condition(dig(lws, "status", "conditions"), "Available")
    if available is not None and available.get("status") == "True":
        return f'leaderworkerset "{name}" is ready', True
    return f'leaderworkerset "{name}" is not ready', False


def inference_service_readiness(isvc: ObjView | None, name: str) -> tuple[str, bool]:
    """The InferenceService's ``PredictorReady`` condition (§2.12)."""
    if not isvc:
        return f'Waiting for InferenceService "{name}" creation', False
    cond = find_condition(dig(isvc, "status", "conditions"), "PredictorReady")
    if cond is None:
        return f'Waiting for InferenceService "{name}" reporting Predictor readiness', False
    return str(cond.get("message") or ""), cond.get("status") == "True"


def missing_kinds(cr: NIMService, capabilities: Capabilities) -> list[tuple[GVK, str]]:
    """Optional kinds the spec needs that the cluster does not serve, with the field needing each.

    Routes and ServiceMonitors are left out when their CRD is missing (as
    NVIDIA does); these cannot be: without them the NIM does not run.
    """
    needs: list[tuple[GVK, str]] = []
    mn = cr.spec.multi_node
    if platform_of(cr) == "kserve":
        needs.append((INFERENCE_SERVICE, "spec.inferencePlatform"))
    elif mn is not None and (mn.parallelism.pipeline or 1) > 1:
        needs.append((LEADER_WORKER_SET, "spec.multiNode"))
        if given(mn.compute_domain):
            needs.append((COMPUTE_DOMAIN, "spec.multiNode.computeDomain"))
    return [(gvk, field) for gvk, field in needs if not capabilities.has(gvk)]


DRA_UNSUPPORTED = (
    "DRA resources are not supported by NIM-Operator on this cluster, please upgrade to "
    "k8s version 'v1.34.0' or higher"
)
"""NVIDIA's message when the cluster does not serve resource.k8s.io/v1 (Kubernetes < 1.34)."""


def dra_details(cr: NIMService | ObjView, facts: RenderContext) -> dict[str, Any]:
    """``draResourceStatuses`` and ``computeDomainStatus`` where the spec uses them."""
    cr = as_nimservice(cr)
    spec = cr.spec
    cd_spec = spec.multi_node.compute_domain if spec.multi_node is not None else None
    if not spec.dra_resources and not given(cd_spec):
        return {}
    inp = NIMServiceInputs.of(cr, facts)
    _, pod_claims, _ = podspec.dra(inp)
    out: dict[str, Any] = {}
    template = lws.compute_domain_template(inp) if inp.multinode else None
    if template:
        pod_claims.append(lws.compute_domain_pod_claim(inp.name, template, len(pod_claims)))
    if pod_claims:
        out["draResourceStatuses"] = dra_resource_statuses(pod_claims, facts.resource_claims)
    cd = compute_domain_status(facts.compute_domain)
    if cd is not None:
        out["computeDomainStatus"] = cd
    return out


def _workloads(cr: NIMService, observed: Observed) -> list[ObjView]:
    """The workloads whose pods run the NIM: the LeaderWorkerSet or Deployment, or the
    InferenceService on KServe."""
    name = cr.metadata.name or ""
    if platform_of(cr) == "kserve":
        isvc = observed.get(*INFERENCE_SERVICE, name)
        return [isvc] if isvc else []
    group = observed.of_kind("LeaderWorkerSet")
    if group:
        return list(group)
    deployment = observed.get("apps/v1", "Deployment", name)
    return [deployment] if deployment else []


def service_blocker(cr: NIMService, facts: RenderContext, observed: Observed) -> Blocker | None:
    """What keeps the NIMService's pods from running, from the facts' pods, events and nodes."""
    return find_blocker(_workloads(cr, observed), facts.pods, facts.events, facts.nodes)


class NIMServiceContract:
    """What a NIMService becomes, on the platform its spec names."""

    api_version = API_VERSION
    kind = KIND

    def parse(self, obj: NIMService | ObjView) -> NIMService:
        """The typed NIMService; ``InvalidResource`` names the fields that do not fit.

        ``render`` and ``readiness`` take the model; a dict given to them (a
        test, an offline caller) is parsed on the way in.
        """
        return as_nimservice(obj)

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        return BUILTIN_OWNED + tuple(g for g in OPTIONAL_OWNED if capabilities.has(g))

    def render(self, cr: NIMService | ObjView, facts: RenderContext) -> list[dict[str, Any]]:
        cr = as_nimservice(cr)
        if cr.spec.dra_resources:
            # NVIDIA's step 0: DRA needs Kubernetes 1.34 (resource.k8s.io/v1), no claim
            # name twice and semantic versions in attribute selectors.
            problem = (
                DRA_UNSUPPORTED
                if not facts.capabilities.has(RESOURCE_CLAIM_TEMPLATE)
                else dra_spec_problem(cr.spec.dra_resources)
            )
            if problem is not None:
                raise Blocked(
                    Readiness(STATE_FAILED, REASON_DRA_RESOURCES_UNSUPPORTED, problem, failed=True)
                )
        missing = missing_kinds(cr, facts.capabilities)
        if missing:
            # Waiting, not failed: the operator watches CRDs and goes on once installed.
            words = "; ".join(
                f"{field} needs the {kind} API ({api_version}), which is not installed"
                for (api_version, kind), field in missing
            )
            raise Blocked(
                Readiness(STATE_NOT_READY, REASON_NOT_READY, f"{words}: waiting for its CRD")
            )
        if facts.nimcache_blocked is not None:
            # NVIDIA creates RBAC, Service, routes, HPA, monitor and EPP objects
            # before it looks at the NIMCache; the rest waits for the cache.
            early = standalone.render_before_storage(cr, facts)
            if platform_of(cr) == "kserve":  # KServe makes only the RBAC before the cache
                early = [o for o in early if o["kind"] in KSERVE_EARLY_KINDS]
            raise Blocked(facts.nimcache_blocked, early)
        if platform_of(cr) == "kserve":
            return kserve.render(
                cr,
                facts,
                status_mode=facts.kserve_status_mode,
                configured_default=facts.kserve_default_mode,
            )
        return standalone.render(cr, facts)

    def readiness(
        self, cr: NIMService | ObjView, facts: RenderContext, observed: Observed
    ) -> Readiness:
        cr = as_nimservice(cr)
        name = cr.metadata.name or ""
        if platform_of(cr) == "kserve":
            isvc = observed.get(*INFERENCE_SERVICE, name)
            message, ready = inference_service_readiness(isvc, name)
        else:
            group = observed.of_kind("LeaderWorkerSet")
            if group:
                message, ready = leader_worker_set_readiness(
                    group[0], str(dig(group[0], "metadata", "name", default=""))
                )
            else:
                message, ready = deployment_readiness(observed.get("apps/v1", "Deployment", name))
        details = dra_details(cr, facts) if platform_of(cr) != "kserve" else {}
        if ready:
            return Readiness(STATE_READY, REASON_READY, message, ready=True, details=details)
        # Beyond NVIDIA's rollout words: the one thing that blocks, named (issue 25).
        # Pending is not Failed: the state stays NotReady, whatever the cause.
        blocker = service_blocker(cr, facts, observed)
        if blocker is not None:
            return Readiness(
                STATE_NOT_READY,
                blocker.reason,
                blocker.message,
                requeue_after=NOT_READY_REQUEUE,
                details=details,
                blocker=blocker.key,
            )
        return Readiness(
            STATE_NOT_READY,
            REASON_NOT_READY,
            message,
            requeue_after=NOT_READY_REQUEUE,
            details=details,
        )
