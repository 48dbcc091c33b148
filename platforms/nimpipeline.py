"""NIMPipeline's contract: the NIMServices a pipeline deploys, and the pipeline's state.

``render`` (nim-operator.md §4): one NIMService per service whose ``enabled``
is ``true`` (an omitted ``enabled`` means disabled, as in NVIDIA's operator),
named as the entry, in the pipeline's namespace, controlled by the pipeline,
with the entry's ``spec`` copied verbatim and each dependency's
``envName``/``envValue`` merged into ``spec.env`` (the dependency wins on a
name clash, merged one dependency at a time as NVIDIA's ``MergeEnvVars``).
A service that is disabled or removed is pruned by the skeleton (it owns
NIMServices).

``readiness`` reads the live NIMServices: ``details["states"]`` maps each
enabled service to its ``status.state`` (``NotReady`` while it does not exist,
or exists but belongs to someone else); the pipeline is ``Failed`` when one
service failed, ``Ready`` when all are Ready (also with none enabled), else
``NotReady``. A same-named NIMService the pipeline does not control is never
written (its write policy: ``overwrite_foreign=False``) and is reported with NVIDIA's
error text.

The contract reads the ``NIMPipeline`` model (a stored dict given instead is
parsed once on the way in); the child NIMServices are built from the entries'
``NIMServiceSpec`` models and serialized once, as the objects the API server
receives. ``nimctl render`` renders the same NIMServices as models
(:func:`pipeline_nimservices`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from api.apps.v1alpha1.common import STATE_FAILED, STATE_NOT_READY, STATE_READY
from api.apps.v1alpha1.nimpipeline import (
    REASON_FAILED,
    REASON_NOT_OWNED,
    REASON_NOT_READY,
    REASON_READY,
    NIMPipeline,
    NIMServicePipelineSpec,
)
from api.apps.v1alpha1.nimservice import NIMService, NIMServiceSpec
from api.base import ObjectMeta
from manifests.hashing import stamp_hash
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from nimctl_runtime.meta import ObjView, dig, find_condition, is_controlled_by
from platforms.capabilities import GVK, Capabilities
from platforms.contract import Observed, Readiness
from platforms.parsing import parse, spec_json

__all__ = [
    "API_VERSION",
    "KIND",
    "NIMSERVICE",
    "NIMPipelineContract",
    "PipelineInput",
    "enabled_services",
    "foreign_message",
    "merge_env",
    "pipeline_nimservices",
    "pipeline_services",
    "service_states",
]

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMPipeline"
NIMSERVICE: GVK = (API_VERSION, "NIMService")


PipelineInput = NIMPipeline | ObjView
"""A NIMPipeline model, or a stored NIMPipeline (parsed once on the way in)."""


def merge_env(base: Sequence[ObjView], extra: Sequence[ObjView]) -> list[dict[str, Any]]:
    """NVIDIA's ``MergeEnvVars(base, extra)``: all of ``extra``, then ``base`` minus its names."""
    names = {e.get("name") for e in extra}
    return [dict(e) for e in extra] + [dict(e) for e in base if e.get("name") not in names]


def enabled_services(pipeline: PipelineInput) -> list[NIMServicePipelineSpec]:
    """The ``spec.services`` entries that are deployed: ``enabled: true`` only."""
    services = parse(NIMPipeline, pipeline).spec.services or []
    return [s for s in services if s.enabled is True]


def _service_spec(entry: NIMServicePipelineSpec) -> NIMServiceSpec | None:
    """The entry's NIMService spec with each dependency's env merged in (None: no spec)."""
    spec = entry.spec
    if spec is None:
        return None
    env = list(spec.env or [])
    merged = False
    for dep in entry.dependencies or []:
        if dep.env_name and dep.env_value:
            env = merge_env(env, [{"name": dep.env_name, "value": dep.env_value}])
            merged = True
    return spec.model_copy(update={"env": env}) if merged else spec


def _owner(cr: NIMPipeline) -> dict[str, Any]:
    return {
        "apiVersion": cr.api_version,
        "kind": KIND,
        "name": cr.metadata.name or "",
        "uid": cr.metadata.uid or "",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _namespace(cr: NIMPipeline) -> str:
    namespace = cr.metadata.namespace
    return "default" if namespace is None else namespace


def pipeline_services(pipeline: PipelineInput) -> list[dict[str, Any]]:
    """The NIMServices a NIMPipeline deploys, as the objects the API server receives:
    enabled ones only, dependency env merged in, each spec serialized once from its model."""
    cr = parse(NIMPipeline, pipeline)
    owner = _owner(cr)
    out = []
    for entry in enabled_services(cr):
        spec = _service_spec(entry)
        out.append(
            {
                "apiVersion": API_VERSION,
                "kind": "NIMService",
                "metadata": {
                    "name": entry.name,
                    "namespace": _namespace(cr),
                    "ownerReferences": [dict(owner)],
                },
                "spec": {} if spec is None else spec_json(spec),
            }
        )
    return out


def pipeline_nimservices(pipeline: NIMPipeline) -> list[NIMService]:
    """The NIMServices a NIMPipeline deploys, as models (``nimctl render`` renders them).

    An enabled entry without a spec raises ``InvalidResource`` (a NIMService needs one).
    """
    out = []
    for entry in enabled_services(pipeline):
        spec = _service_spec(entry)
        meta = ObjectMeta(
            name=entry.name,
            namespace=_namespace(pipeline),
            owner_references=[_owner(pipeline)],
        )
        if spec is None:
            out.append(parse(NIMService, {"metadata": spec_json(meta), "spec": {}}))
        else:
            out.append(NIMService(metadata=meta, spec=spec))
    return out


def foreign_message(service: str, pipeline: str) -> str:
    """NVIDIA's words for a same-named NIMService the pipeline does not own."""
    return f"NIMservice {service} already exists and is not owned by the NIMPipeline {pipeline}"


def service_states(pipeline: PipelineInput, observed: Observed) -> tuple[dict[str, str], list[str]]:
    """Each enabled service's state, and the enabled services someone else owns."""
    cr = parse(NIMPipeline, pipeline)
    uid = cr.metadata.uid or ""
    states: dict[str, str] = {}
    foreign: list[str] = []
    for entry in enabled_services(cr):
        svc = entry.name or ""
        live = observed.get(*NIMSERVICE, svc)
        if live is None:
            states[svc] = STATE_NOT_READY
        elif not is_controlled_by(live, uid):
            states[svc] = STATE_NOT_READY
            foreign.append(svc)
        else:
            states[svc] = str(dig(live, "status", "state", default="") or "")
    return states, foreign


#: A member's Ready reasons that say nothing beyond "not ready yet".
PROGRESS_REASONS = frozenset({"", "Ready", "NotReady", "Failed"})


def member_blocker(waiting: Sequence[str], observed: Observed) -> tuple[str, str, str] | None:
    """The first waiting member whose ``Ready`` condition names a blocker:
    ``(service, reason, message)`` (the member's ``platforms.blockers`` finding)."""
    for svc in waiting:
        live = observed.get(*NIMSERVICE, svc)
        cond = find_condition(dig(live, "status", "conditions"), "Ready") if live else None
        if cond is None or cond.get("status") == "True":
            continue
        reason = str(cond.get("reason") or "")
        if reason not in PROGRESS_REASONS:
            return svc, reason, str(cond.get("message") or "")
    return None


class NIMPipelineContract:
    """What a NIMPipeline becomes (NIMServices) and when it is Ready."""

    api_version = API_VERSION
    kind = KIND

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        return (NIMSERVICE,)

    def render(self, cr: PipelineInput, facts: object) -> list[dict[str, Any]]:
        out = []
        for svc in pipeline_services(cr):
            svc["metadata"]["labels"] = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
            out.append(stamp_hash(svc))
        return out

    def readiness(self, cr: PipelineInput, facts: object, observed: Observed) -> Readiness:
        cr = parse(NIMPipeline, cr)
        states, foreign = service_states(cr, observed)
        details = {"states": states}
        failed = sorted(s for s, st in states.items() if st == STATE_FAILED)
        waiting = sorted(s for s, st in states.items() if st != STATE_READY)
        if failed:
            return Readiness(
                STATE_FAILED,
                REASON_FAILED,
                f"NIMServices failed: {', '.join(failed)}",
                failed=True,
                details=details,
            )
        if foreign:
            message = "; ".join(foreign_message(s, cr.metadata.name or "") for s in foreign)
            return Readiness(STATE_NOT_READY, REASON_NOT_OWNED, message, details=details)
        if waiting:
            blocked = member_blocker(waiting, observed)
            if blocked is not None:
                # Beyond NVIDIA's list of names: the member that blocks, and why (issue 25).
                svc, reason, message = blocked
                return Readiness(
                    STATE_NOT_READY,
                    reason,
                    f"NIMService {svc} not ready: {message}",
                    details=details,
                    blocker=(reason, svc),
                )
            return Readiness(
                STATE_NOT_READY,
                REASON_NOT_READY,
                f"NIMServices not ready: {', '.join(waiting)}",
                details=details,
            )
        return Readiness(
            STATE_READY,
            REASON_READY,
            f"all {len(states)} enabled NIMServices are Ready",
            ready=True,
            details=details,
        )
