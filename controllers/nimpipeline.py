"""NIMPipeline's binding to the reconciler skeleton: status vocabulary, Events, wiring.

What a pipeline becomes and when it is Ready is
``platforms.nimpipeline.NIMPipelineContract``; the skeleton creates, updates
and prunes its NIMServices. This module adds (nim-operator.md §4):

- parse: the NIMPipeline into its model, kept until its generation changes
  (one the model refuses is ``Failed`` / ``InvalidSpec`` naming the field
  paths); the spec must name every enabled service once (else ``Failed`` /
  ``InvalidSpec`` naming the entry);
- status: ``states`` (service -> state), ``state``, and the ``Ready`` and
  ``Failed`` conditions NVIDIA defines but never writes, so
  ``kubectl wait --for=condition=Ready nimpipeline/x`` works; written only on
  change;
- Events on a status change: NVIDIA's ``Normal <state>`` "NIMPipeline <n>
  status <state>, service states map[...]", and a ``Warning
  NIMServiceNotOwned`` when a same-named NIMService belongs to someone else
  (that NIMService is never written: its ``write_policy`` has
  ``overwrite_foreign=False``);
- wiring: ``For(NIMPipeline)`` with the spec-change filter, ``Owns(NIMService)``
  (a service's status change wakes its pipeline); no requeue.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from api.apps.v1alpha1 import nimpipeline as api_np
from api.apps.v1alpha1.common import STATE_FAILED
from api.apps.v1alpha1.nimpipeline import NIMPipeline
from controllers.nimservice_parse import ParseMemo, by_generation, identity_and_spec, invalid
from controllers.plan import WritePolicy
from controllers.reconciler import Event, Kind, KindReconciler
from controllers.wiring import SetupOptions, own_kinds, spec_change_predicate
from nimctl_runtime.client.interfaces import Reader
from nimctl_runtime.meta import ObjView, dig, name_of, set_condition, uid_of
from platforms.contract import Blocked, Observed, Readiness
from platforms.nimpipeline import API_VERSION, KIND, NIMPipelineContract
from platforms.parsing import InvalidResource, parse

if TYPE_CHECKING:
    from nimctl_runtime.client.client import Client
    from nimctl_runtime.manager import Manager

__all__ = [
    "API_VERSION",
    "KIND",
    "NIMPipelineKind",
    "go_map",
    "pipeline_status",
    "setup_nimpipeline",
]

from nimctl_runtime.meta import Obj


def go_map(states: Mapping[str, str]) -> str:
    """A map as Go's ``%v`` prints it (keys sorted): ``map[a:Ready b:NotReady]``."""
    return "map[" + " ".join(f"{k}:{states[k]}" for k in sorted(states)) + "]"


def _invalid(message: str) -> Blocked:
    return Blocked(Readiness(STATE_FAILED, api_np.REASON_INVALID_SPEC, message, failed=True))


def check_spec(cr: NIMPipeline) -> None:
    """Raise ``Blocked`` (Failed/InvalidSpec) when the services cannot be deployed as named.

    The schema (and its CEL rules) the API server checked already; what it
    cannot check is that each enabled service has a name of its own.
    """
    seen: dict[str, int] = {}
    for i, entry in enumerate(cr.spec.services or []):
        if entry.enabled is not True:
            continue
        svc = entry.name
        if not svc:
            raise _invalid(f"spec.services[{i}].name: required for an enabled service")
        if svc in seen:
            raise _invalid(
                f"spec.services[{i}].name: {svc!r} is already the name of "
                f"spec.services[{seen[svc]}]; each NIMService needs its own name"
            )
        seen[svc] = i


def pipeline_status(old: Mapping[str, Any], readiness: Readiness) -> Obj:
    """``state``, ``states`` and the ``Ready``/``Failed`` conditions for ``readiness``."""
    out = copy.deepcopy(dict(old))
    ready = "True" if readiness.ready else "False"
    failed = "True" if readiness.failed else "False"
    conds = set_condition(
        out.get("conditions"), api_np.CONDITION_READY, ready, readiness.reason, readiness.message
    )
    out["conditions"] = set_condition(
        conds,
        api_np.CONDITION_FAILED,
        failed,
        readiness.reason,
        readiness.message if readiness.failed else "",
    )
    out["state"] = readiness.state
    states = readiness.details.get("states")
    if states is not None:
        out["states"] = dict(states)
    return out


class NIMPipelineKind(Kind[NIMPipeline, None]):
    """NIMPipeline: a checked spec, NVIDIA's states, Ready/Failed conditions, Events.

    ``parse`` keeps each NIMPipeline's model (identity and spec; its status is
    written from readiness, never read) until its generation changes.
    """

    api_version = API_VERSION
    kind = KIND
    finalizer = api_np.FINALIZER
    independent_objects = True

    def __init__(self) -> None:
        self.contract = NIMPipelineContract()
        self.parsed: ParseMemo[NIMPipeline] = ParseMemo(
            lambda o: parse(NIMPipeline, identity_and_spec(o), stored=True), by_generation
        )

    def write_policy(self, owner: ObjView, obj: ObjView) -> WritePolicy:
        """A same-named NIMService the pipeline does not control is never written."""
        return WritePolicy(overwrite_foreign=False)

    def parse(self, obj: Obj) -> NIMPipeline:
        try:
            cr = self.parsed.get(obj)
        except InvalidResource as err:
            raise invalid(err, api_np.REASON_INVALID_SPEC) from None
        check_spec(cr)
        return cr

    def forget(self, namespace: str, name: str) -> None:
        """Drop what is kept about a NIMPipeline that is gone."""
        self.parsed.forget(namespace, name)

    async def gather(self, cr: NIMPipeline, obj: Obj, reader: Reader) -> None:
        return None

    def memo_key(self, cr: NIMPipeline, obj: Obj, facts: None) -> tuple[Any, ...] | None:
        generation = dig(obj, "metadata", "generation")
        return None if generation is None else (uid_of(obj), generation)

    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        return pipeline_status(old, readiness)

    def event(self, obj: Obj, readiness: Readiness) -> Event | None:
        name = name_of(obj)
        if readiness.reason in (api_np.REASON_NOT_OWNED, api_np.REASON_INVALID_SPEC):
            return ("Warning", readiness.reason, readiness.message)
        states = readiness.details.get("states") or {}
        return (
            "Normal",
            readiness.state,
            f"NIMPipeline {name} status {readiness.state}, service states {go_map(states)}",
        )

    def failure_reason(self, kind: str) -> str:
        return "NIMServiceFailed" if kind == "NIMService" else "Failed"



def setup_nimpipeline(manager: Manager, client: Client, options: SetupOptions) -> None:
    """The NIMPipeline controller: For(NIMPipeline) on spec changes, Owns(NIMService)."""
    from nimctl_runtime.builder import Builder

    cache = manager.cache
    reconciler: KindReconciler[NIMPipeline, None] = KindReconciler(
        kind=NIMPipelineKind(),
        cache=cache,
        client=client,
        api_reader=cache.api_reader,
        recorder=manager.event_recorder(api_np.RECORDER_NAME),
    )
    builder = (
        Builder(manager)
        .named("nimpipeline")
        .for_(API_VERSION, KIND, predicates=[spec_change_predicate()])
        .with_options(max_concurrent_reconciles=options.max_concurrent_reconciles)
    )
    own_kinds(
        builder,
        manager,
        NIMPipelineContract().owned_kinds(options.capabilities),
        reconciler.expectations,
    )
    builder.complete(reconciler)
