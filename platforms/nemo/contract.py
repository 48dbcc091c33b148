"""The NeMo kinds' contract: one shape for all five, a render class per kind.

``NemoContract(kind)`` is the ``KindContract`` of one NeMo kind: the typed
model it parses to, the renderer that builds its objects (``platforms.nemo.
<kind>``), the kinds it may own, and its readiness. ``requirements(cr)`` says
what must exist before it can render: the DB password Secret (and whether the
render reads the password itself), PVCs it does not create, and ConfigMaps it
reads. The controller checks those against the cache and reports a missing
one in status instead of failing silently as NVIDIA's operator does.

Readiness is the Deployment's rollout, in ``kubectl rollout status`` words
(nim-operator.md §5), with no requeue: the Deployment watch reports progress.
When something blocks the rollout (a pod's init container crashing on the
database, a missing Secret, no node that fits, a quota), the reason and message
are the blocker finder's (``platforms.blockers``), naming the pod or the
Deployment, as for a NIMService; the state stays ``NotReady``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from api.apps.v1alpha1 import (
    nemo_customizer,
    nemo_datastore,
    nemo_entitystore,
    nemo_evaluator,
    nemo_guardrail,
)
from api.apps.v1alpha1.common import STATE_NOT_READY, STATE_READY
from api.apps.v1alpha1.nemo_common import REASON_NOT_READY, REASON_READY, DatabaseConfig
from api.base import CustomResource
from manifests.labels import INSTANCE_LABEL, PART_OF_LABEL
from nimctl_runtime.meta import ObjView, dig
from platforms.blockers import find_blocker
from platforms.capabilities import GVK, HTTP_ROUTE, SERVICE_MONITOR, Capabilities
from platforms.contract import Observed, Readiness
from platforms.nemo.common import NemoRenderer, pvc_name
from platforms.nemo.customizer import CustomizerRenderer, referenced_config_maps
from platforms.nemo.datastore import DatastoreRenderer
from platforms.nemo.entitystore import EntitystoreRenderer
from platforms.nemo.evaluator import EvaluatorRenderer
from platforms.nemo.facts import NemoFacts
from platforms.nemo.guardrail import GuardrailRenderer

__all__ = [
    "API_VERSION",
    "BUILTIN_OWNED",
    "CONTRACTS",
    "NemoContract",
    "NemoKindInfo",
    "PasswordRef",
    "Requirements",
    "deployment_readiness",
    "requirements",
]

API_VERSION: Final = "apps.nvidia.com/v1alpha1"

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
"""Built-in kinds a NeMo CR may own (the same list for all five: pruning stays simple)."""
OPTIONAL_OWNED: tuple[GVK, ...] = (HTTP_ROUTE, SERVICE_MONITOR)


@dataclass(frozen=True)
class PasswordRef:
    """Where the DB password is; ``read`` when the render itself needs the value."""

    secret: str
    key: str
    read: bool


@dataclass(frozen=True)
class Requirements:
    """Objects a NeMo CR needs before it can be rendered (all in its namespace)."""

    password: PasswordRef | None = None
    pvcs: tuple[tuple[str, str], ...] = ()
    """(PVC name, spec field that names it) of PVCs the CR uses but does not create."""
    config_maps: tuple[str, ...] = ()


@dataclass(frozen=True)
class NemoKindInfo:
    """One NeMo kind: its model, renderer, finalizer and recorder name."""

    kind: str
    model: type[CustomResource]
    renderer: type[NemoRenderer[Any]]
    finalizer: str
    recorder_name: str


def _password(db: DatabaseConfig | None, *, read: bool) -> PasswordRef | None:
    if db is None:
        return None
    return PasswordRef(db.credentials.secret_name, db.credentials.password_key, read)


def requirements(cr: CustomResource) -> Requirements:
    """What ``cr`` needs from the cluster before its render (see ``Requirements``)."""
    name = cr.metadata.name or ""
    if isinstance(cr, nemo_customizer.NemoCustomizer):
        model_pvc = cr.spec.training_config.model_pvc
        pvcs = () if model_pvc.create else ((pvc_name(name, model_pvc), "trainingConfig.modelPVC"),)
        return Requirements(
            _password(cr.spec.database_config, read=True),
            pvcs,
            tuple(referenced_config_maps(cr)),
        )
    if isinstance(cr, nemo_datastore.NemoDatastore):
        claim = cr.spec.pvc
        pvcs = ((pvc_name(name, claim), "pvc"),) if claim is not None and not claim.create else ()
        return Requirements(_password(cr.spec.database_config, read=False), pvcs)
    if isinstance(cr, nemo_entitystore.NemoEntitystore):
        return Requirements(_password(cr.spec.database_config, read=False))
    if isinstance(cr, nemo_evaluator.NemoEvaluator):
        return Requirements(_password(cr.spec.database_config, read=True))
    if isinstance(cr, nemo_guardrail.NemoGuardrail):
        store = cr.spec.config_store
        guard_pvcs: tuple[tuple[str, str], ...] = ()
        if store.pvc is not None and not store.pvc.create:
            guard_pvcs = ((pvc_name(name, store.pvc), "configStore.pvc"),)
        cms = (store.config_map.name,) if store.config_map is not None else ()
        return Requirements(_password(cr.spec.database_config, read=True), guard_pvcs, cms)
    raise TypeError(f"not a NeMo kind: {type(cr).__name__}")


def deployment_readiness(deployment: ObjView | None, name: str) -> tuple[str, bool]:
    """``kubectl rollout status`` words for the Deployment, and whether it rolled out."""
    if not deployment:
        return f'Waiting for deployment "{name}" to be created', False
    st = deployment.get("status") or {}
    generation = dig(deployment, "metadata", "generation")
    observed = st.get("observedGeneration")
    if generation is not None and observed is not None and observed < generation:
        return "Waiting for deployment spec update to be observed...\n", False
    for c in st.get("conditions") or ():
        if c.get("type") == "Progressing" and c.get("reason") == "ProgressDeadlineExceeded":
            return f'deployment "{name}" exceeded its progress deadline', False
    replicas = int(dig(deployment, "spec", "replicas", default=1) or 0)
    updated = int(st.get("updatedReplicas") or 0)
    total = int(st.get("replicas") or 0)
    available = int(st.get("availableReplicas") or 0)
    if updated < replicas:
        return (
            f'Waiting for deployment "{name}" rollout to finish: {updated} out of {replicas} '
            "new replicas have been updated...\n",
            False,
        )
    if total > updated:
        return (
            f'Waiting for deployment "{name}" rollout to finish: {total - updated} old '
            "replicas are pending termination...\n",
            False,
        )
    if available < updated:
        return (
            f'Waiting for deployment "{name}" rollout to finish: {available} of {updated} '
            "updated replicas are available...\n",
            False,
        )
    return f'deployment "{name}" successfully rolled out\n', True


class NemoContract:
    """The ``KindContract`` of one NeMo kind (see the module docstring)."""

    api_version = API_VERSION

    def __init__(self, info: NemoKindInfo) -> None:
        self.info = info
        self.kind = info.kind

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        return BUILTIN_OWNED + tuple(g for g in OPTIONAL_OWNED if capabilities.has(g))

    def parse(self, obj: ObjView) -> CustomResource:
        return self.info.model.model_validate(obj)

    def render(self, cr: CustomResource, facts: NemoFacts) -> list[dict[str, Any]]:
        return self.info.renderer(cr, facts).render()

    def readiness(self, cr: CustomResource, facts: NemoFacts, observed: Observed) -> Readiness:
        name = cr.metadata.name or ""
        deployment = observed.get("apps/v1", "Deployment", name)
        message, ready = deployment_readiness(deployment, name)
        if ready:
            return Readiness(STATE_READY, REASON_READY, message, ready=True)
        blocker = find_blocker([deployment], facts.pods, facts.events, facts.nodes)
        if blocker is not None:
            return Readiness(STATE_NOT_READY, blocker.reason, blocker.message, blocker=blocker.key)
        return Readiness(STATE_NOT_READY, REASON_NOT_READY, message)

    def pod_selector(self, name: str) -> dict[str, str]:
        """The labels every pod of the CR ``name`` carries (its kind's, not another's)."""
        return {"app": name, PART_OF_LABEL: self.info.renderer.part_of}

    def owner_of_pod(self, pod: ObjView) -> str | None:
        """The CR of this kind a pod runs for, from its labels, or None."""
        labels = dig(pod, "metadata", "labels", default={}) or {}
        if labels.get(PART_OF_LABEL) != self.info.renderer.part_of:
            return None
        owner = labels.get(INSTANCE_LABEL)
        return str(owner) if owner else None


def _info(
    kind: str, model: type[CustomResource], renderer: type[NemoRenderer[Any]], finalizer: str
) -> NemoKindInfo:
    short = kind.removeprefix("Nemo").lower()
    return NemoKindInfo(kind, model, renderer, finalizer, f"nemo-{short}-service-controller")


CONTRACTS: Mapping[str, NemoContract] = {
    info.kind: NemoContract(info)
    for info in (
        _info(
            "NemoCustomizer",
            nemo_customizer.NemoCustomizer,
            CustomizerRenderer,
            nemo_customizer.FINALIZER,
        ),
        _info(
            "NemoDatastore",
            nemo_datastore.NemoDatastore,
            DatastoreRenderer,
            nemo_datastore.FINALIZER,
        ),
        _info(
            "NemoEntitystore",
            nemo_entitystore.NemoEntitystore,
            EntitystoreRenderer,
            nemo_entitystore.FINALIZER,
        ),
        _info(
            "NemoEvaluator",
            nemo_evaluator.NemoEvaluator,
            EvaluatorRenderer,
            nemo_evaluator.FINALIZER,
        ),
        _info(
            "NemoGuardrail",
            nemo_guardrail.NemoGuardrail,
            GuardrailRenderer,
            nemo_guardrail.FINALIZER,
        ),
    )
}
"""The contract of every NeMo kind, by kind name."""
