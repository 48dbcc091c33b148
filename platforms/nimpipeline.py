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
written (``Kind.overwrite_foreign = False``) and is reported with NVIDIA's
error text.

``nimctl render`` uses :func:`pipeline_services` for the same NIMServices.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

from api.apps.v1alpha1.common import STATE_FAILED, STATE_NOT_READY, STATE_READY
from api.apps.v1alpha1.nimpipeline import (
    REASON_FAILED,
    REASON_NOT_OWNED,
    REASON_NOT_READY,
    REASON_READY,
)
from manifests.hashing import stamp_hash
from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from nimctl_runtime.meta import dig, is_controlled_by, name_of, uid_of
from platforms.capabilities import GVK, Capabilities
from platforms.contract import Observed, Readiness

__all__ = [
    "API_VERSION",
    "KIND",
    "NIMSERVICE",
    "NIMPipelineContract",
    "enabled_services",
    "foreign_message",
    "merge_env",
    "pipeline_services",
    "service_states",
]

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMPipeline"
NIMSERVICE: GVK = (API_VERSION, "NIMService")

Obj = Mapping[str, Any]


def merge_env(base: Sequence[Obj], extra: Sequence[Obj]) -> list[dict[str, Any]]:
    """NVIDIA's ``MergeEnvVars(base, extra)``: all of ``extra``, then ``base`` minus its names."""
    names = {e.get("name") for e in extra}
    return [dict(e) for e in extra] + [dict(e) for e in base if e.get("name") not in names]


def enabled_services(pipeline: Obj) -> list[Obj]:
    """The ``spec.services`` entries that are deployed: ``enabled: true`` only."""
    services = dig(pipeline, "spec", "services", default=[]) or []
    return [s for s in services if s.get("enabled") is True]


def pipeline_services(pipeline: Obj) -> list[dict[str, Any]]:
    """The NIMServices a NIMPipeline deploys: enabled ones only, dependency env merged in."""
    name = dig(pipeline, "metadata", "name", default="")
    namespace = dig(pipeline, "metadata", "namespace", default="default")
    owner = {
        "apiVersion": pipeline.get("apiVersion", API_VERSION),
        "kind": KIND,
        "name": name,
        "uid": dig(pipeline, "metadata", "uid", default=""),
        "controller": True,
        "blockOwnerDeletion": True,
    }
    out = []
    for entry in enabled_services(pipeline):
        spec = copy.deepcopy(dict(entry.get("spec") or {}))
        for dep in entry.get("dependencies") or []:
            if dep.get("envName") and dep.get("envValue"):
                extra = [{"name": dep["envName"], "value": dep["envValue"]}]
                spec["env"] = merge_env(spec.get("env") or [], extra)
        out.append(
            {
                "apiVersion": API_VERSION,
                "kind": "NIMService",
                "metadata": {
                    "name": entry["name"],
                    "namespace": namespace,
                    "ownerReferences": [owner],
                },
                "spec": spec,
            }
        )
    return out


def foreign_message(service: str, pipeline: str) -> str:
    """NVIDIA's words for a same-named NIMService the pipeline does not own."""
    return f"NIMservice {service} already exists and is not owned by the NIMPipeline {pipeline}"


def service_states(pipeline: Obj, observed: Observed) -> tuple[dict[str, str], list[str]]:
    """Each enabled service's state, and the enabled services someone else owns."""
    uid = uid_of(pipeline)
    states: dict[str, str] = {}
    foreign: list[str] = []
    for entry in enabled_services(pipeline):
        svc = str(entry.get("name") or "")
        live = observed.get(*NIMSERVICE, svc)
        if live is None:
            states[svc] = STATE_NOT_READY
        elif not is_controlled_by(live, uid):
            states[svc] = STATE_NOT_READY
            foreign.append(svc)
        else:
            states[svc] = str(dig(live, "status", "state", default="") or "")
    return states, foreign


class NIMPipelineContract:
    """What a NIMPipeline becomes (NIMServices) and when it is Ready."""

    api_version = API_VERSION
    kind = KIND

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        return (NIMSERVICE,)

    def render(self, cr: Obj, facts: object) -> list[dict[str, Any]]:
        out = []
        for svc in pipeline_services(cr):
            svc["metadata"]["labels"] = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
            out.append(stamp_hash(svc))
        return out

    def readiness(self, cr: Obj, facts: object, observed: Observed) -> Readiness:
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
            message = "; ".join(foreign_message(s, name_of(cr)) for s in foreign)
            return Readiness(STATE_NOT_READY, REASON_NOT_OWNED, message, details=details)
        if waiting:
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
