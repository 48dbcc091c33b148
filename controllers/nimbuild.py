"""NIMBuild's binding to the reconciler skeleton: facts, NVIDIA's conditions, the NIMCache update.

``platforms.nimbuild.NIMBuildContract`` decides which pod a build runs and its
state; the skeleton creates the pod and prunes the one of the previous phase.
This module adds what needs the cluster (NVIDIA's NIMBuild controller):

- parse: the NIMBuild into its model (one the model refuses is ``Failed``
  with ``NIM_BUILD_RECONCILE_FAILED`` naming the fields); its status stays in
  the stored object (the phase is read from its conditions);
- gather: the NIMCache, parsed into its model (missing -> ``Failed`` with
  ``NIM_BUILD_NIM_CACHE_NOT_FOUND``, failed or not fitting its model ->
  ``Failed`` with ``NIM_BUILD_NIM_CACHE_FAILED``, not Ready -> ``Pending``
  with ``NIM_BUILD_WAIT_FOR_NIM_CACHE_READY``; the NIMCache watch
  wakes the build), the input profile (one buildable profile, or the named
  one; none or several -> ``Failed`` with NVIDIA's condition), the
  orchestrator, and the local manifest pod's logs once it runs;
- status: NVIDIA's condition types, ``state``, ``inputProfile`` and
  ``outputProfile``; a reconcile error sets ``NIM_BUILD_RECONCILE_FAILED`` and
  state ``Pending``, keeping the input profile and how it was found (``progress``);
  NIMCache conditions that are over are removed;
- on Ready: the built profile is appended to the NIMCache's ``status.profiles``
  (a status merge patch of that list alone, guarded by the NIMCache's
  resourceVersion) and the local manifest is stored under
  ``local_model_manifest.yaml`` in the NIMCache's ``<cache>-manifest`` ConfigMap;
- Events on a state change, and NVIDIA's ``ReconcileFailed`` Warning;
- cleanup before the finalizer goes: the build's pods are deleted.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from api.apps.v1alpha1 import nimbuild as api_nb
from api.apps.v1alpha1.nimbuild import NIMBuild
from api.apps.v1alpha1.nimcache import NIMCache
from controllers.nimservice_parse import (
    INVALID_SPEC,
    ParseMemo,
    by_generation,
    by_resource_version,
    identity_and_spec,
    invalid,
)
from controllers.reconciler import Event, Kind, KindReconciler
from controllers.wiring import SetupOptions, own_kinds, spec_change_predicate
from nimctl_runtime.client.errors import ApiError, NotFound
from nimctl_runtime.client.interfaces import (
    KeyReader,
    Reader,
    Writer,
    get_or_none,
)
from nimctl_runtime.meta import dig, name_of, namespace_of, set_condition
from platforms.contract import Blocked, Observed, Readiness
from platforms.nimbuild import (
    API_VERSION,
    KIND,
    PHASE_BUILD,
    PHASE_MANIFEST,
    NIMBuildContract,
    NIMBuildFacts,
    phase_of,
)
from platforms.parsing import InvalidResource, parse
from platforms.standalone import nimbuild as objects
from platforms.standalone.nimcache import manifest_config_map_name

if TYPE_CHECKING:
    from nimctl_runtime.client.client import Client
    from nimctl_runtime.manager import Manager

__all__ = [
    "NIMCACHE_INDEX",
    "NIMBuildKind",
    "PodLogs",
    "nimcache_name_index",
    "setup_nimbuild",
]

from nimctl_runtime.meta import Obj

PodLogs = Callable[[str, str, str], Awaitable[str]]
"""``(namespace, pod, container) -> log text``."""

NIMCACHE_INDEX = "spec.nimCache.name"
CACHE_CONDITIONS = frozenset(
    {
        api_nb.CONDITION_WAIT_FOR_NIM_CACHE_READY,
        api_nb.CONDITION_NIM_CACHE_NOT_FOUND,
        api_nb.CONDITION_NIM_CACHE_FAILED,
    }
)
LOCAL_MANIFEST_KEY = "local_model_manifest.yaml"


def nimcache_name_index(obj: Mapping[str, Any]) -> list[str]:
    """Index function: the NIMCache a NIMBuild builds from."""
    name = dig(obj, "spec", "nimCache", "name")
    return [str(name)] if name else []


def _without_cache_conditions(
    conditions: list[dict[str, Any]] | None, keep: Iterable[str]
) -> list[dict[str, Any]]:
    """``conditions`` without the NIMCache conditions other than ``keep``."""
    drop = CACHE_CONDITIONS - set(keep)
    return [c for c in conditions or [] if c.get("type") not in drop]


def _blocked(state: str, condition: str, reason: str, message: str) -> Blocked:
    return Blocked(
        Readiness(
            state,
            reason,
            message,
            failed=state == api_nb.STATE_FAILED,
            details={"conditions": [(condition, "True", reason, message)]},
        )
    )


class NIMBuildKind(Kind[NIMBuild, NIMBuildFacts]):
    """NIMBuild: the NIMCache and profile as facts, NVIDIA's conditions, the NIMCache update.

    ``parse`` keeps each NIMBuild's model (identity and spec) until its
    generation changes, and each NIMCache's until its resourceVersion does.
    """

    api_version = API_VERSION
    kind = KIND
    finalizer = api_nb.FINALIZER
    create_only = frozenset({"Pod", "PersistentVolumeClaim"})

    def __init__(
        self,
        *,
        client: Writer,
        api_reader: KeyReader,
        pod_logs: PodLogs | None = None,
        orchestrator: str | None = None,
    ) -> None:
        self.contract = NIMBuildContract()
        self.client = client
        self.api_reader = api_reader
        self.pod_logs = pod_logs
        self.orchestrator = orchestrator
        self.parsed: ParseMemo[NIMBuild] = ParseMemo(
            lambda o: parse(NIMBuild, identity_and_spec(o), stored=True), by_generation
        )
        self.nimcaches: ParseMemo[NIMCache] = ParseMemo(
            lambda o: parse(NIMCache, o, stored=True), by_resource_version
        )

    def parse(self, obj: Obj) -> NIMBuild:
        try:
            return self.parsed.get(obj)
        except InvalidResource as err:
            raise invalid(err, api_nb.REASON_RECONCILE_FAILED) from None

    def forget(self, namespace: str, name: str) -> None:
        """Drop what is kept about a NIMBuild that is gone."""
        self.parsed.forget(namespace, name)

    async def gather(self, cr: NIMBuild, obj: Obj, reader: Reader) -> NIMBuildFacts:
        namespace = namespace_of(obj)
        cache_name = cr.spec.nim_cache.name
        stored = await get_or_none(reader, API_VERSION, "NIMCache", cache_name, namespace)
        if stored is None:
            raise _blocked(
                api_nb.STATE_FAILED,
                api_nb.CONDITION_NIM_CACHE_NOT_FOUND,
                api_nb.REASON_NIMCACHE_NOT_FOUND,
                api_nb.MESSAGE_NIMCACHE_NOT_FOUND,
            )
        try:
            nimcache = self.nimcaches.get(stored)
        except InvalidResource as err:
            raise _blocked(
                api_nb.STATE_FAILED,
                api_nb.CONDITION_NIM_CACHE_FAILED,
                api_nb.REASON_NIMCACHE_FAILED,
                f"NIMCache {cache_name}: {err}",
            ) from None
        state = nimcache.status.state if nimcache.status is not None else None
        if state == "Failed":
            raise _blocked(
                api_nb.STATE_FAILED,
                api_nb.CONDITION_NIM_CACHE_FAILED,
                api_nb.REASON_NIMCACHE_FAILED,
                api_nb.MESSAGE_NIMCACHE_FAILED,
            )
        if state != "Ready":
            raise _blocked(
                api_nb.STATE_PENDING,
                api_nb.CONDITION_WAIT_FOR_NIM_CACHE_READY,
                api_nb.REASON_NIMCACHE_NOT_READY,
                api_nb.MESSAGE_NIMCACHE_NOT_READY,
            )
        orchestrator = await self._orchestrator(reader)
        phase = phase_of(obj)
        if phase == PHASE_BUILD:
            choice = objects.select_profile(cr, nimcache)
            if choice.profile is None:
                raise _blocked(api_nb.STATE_FAILED, choice.condition, choice.reason, choice.message)
            return NIMBuildFacts(
                nimcache=nimcache,
                phase=phase,
                profile=choice.profile,
                profile_found=(choice.condition, "True", choice.reason, choice.message),
                orchestrator=orchestrator,
            )
        profile = dict(dig(obj, "status", "inputProfile", default={}) or {})
        logs = None
        if phase == PHASE_MANIFEST:
            logs = await self._manifest_logs(obj, reader)
        return NIMBuildFacts(
            nimcache=nimcache,
            phase=phase,
            profile=profile,
            orchestrator=orchestrator,
            manifest_logs=logs,
        )

    async def _orchestrator(self, reader: Reader) -> str:
        if self.orchestrator is None:
            from controllers.nimservice import detect_orchestrator

            try:
                nodes = await reader.list("v1", "Node")
            except ApiError:
                nodes = []
            self.orchestrator = detect_orchestrator(nodes)
        return self.orchestrator

    async def _manifest_logs(self, obj: Obj, reader: Reader) -> str | None:
        """What the running local manifest pod printed (None until it runs)."""
        pod_name = objects.local_manifest_pod_name(name_of(obj))
        pod = await get_or_none(reader, "v1", "Pod", pod_name, namespace_of(obj))
        if pod is None or dig(pod, "status", "phase") != "Running" or self.pod_logs is None:
            return None
        try:
            return await self.pod_logs(namespace_of(obj), pod_name, objects.MANIFEST_CONTAINER)
        except ApiError:
            return ""

    def progress(self, old: Obj, facts: NIMBuildFacts) -> Obj:
        """The chosen input profile and how it was found, kept when the render then fails.

        NVIDIA's operator records both before it builds the pod, so a build it
        cannot size (GPUs in ``resources`` and a ``tp`` tag) still shows them.
        """
        if facts.profile_found is None:
            return old
        out = copy.deepcopy(dict(old))
        out["conditions"] = _without_cache_conditions(
            set_condition(out.get("conditions"), *facts.profile_found), ()
        )
        out["inputProfile"] = dict(facts.profile)
        return out

    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        out = copy.deepcopy(dict(old))
        conditions = out.get("conditions")
        found = readiness.details.get("conditions")
        state = readiness.state
        if found is None:  # a reconcile error (the skeleton's Failed)
            conditions = set_condition(
                conditions,
                api_nb.CONDITION_RECONCILE_FAILED,
                "True",
                api_nb.REASON_RECONCILE_FAILED,
                readiness.message,
            )
            if not readiness.details.get(INVALID_SPEC):
                state = api_nb.STATE_PENDING  # NVIDIA's state after a reconcile error
        else:
            for type_, status, reason, message in found:
                conditions = set_condition(conditions, type_, status, reason, message)
            # A NIMCache problem that is over is gone from the list, not left True
            # (nor turned False with another condition's reason).
            conditions = _without_cache_conditions(conditions, {c[0] for c in found})
            if any(c.get("type") == api_nb.CONDITION_RECONCILE_FAILED for c in conditions or []):
                conditions = set_condition(
                    conditions,
                    api_nb.CONDITION_RECONCILE_FAILED,
                    "False",
                    api_nb.REASON_RECONCILED,
                    "",
                )
        out["conditions"] = conditions
        out["state"] = state
        for key in ("inputProfile", "outputProfile"):
            if readiness.details.get(key):
                out[key] = readiness.details[key]
        return out

    async def complete_status(
        self, cr: NIMBuild, obj: Obj, facts: NIMBuildFacts, status: Obj, observed: Observed
    ) -> Obj:
        """On the pass that reads the local manifest: extend the NIMCache with the built profile."""
        if facts.phase != PHASE_MANIFEST:
            return status
        output = status.get("outputProfile")
        manifest = objects.parse_local_manifest(facts.manifest_logs or "")
        if manifest is not None:
            await self._store_local_manifest(facts.nimcache, manifest.minimal_yaml())
        if output:
            await self._add_profile(facts.nimcache, output)
        return status

    async def _add_profile(self, nimcache: NIMCache, profile: Mapping[str, Any]) -> None:
        fresh = await self.api_reader.get(
            API_VERSION,
            "NIMCache",
            nimcache.metadata.name or "",
            nimcache.metadata.namespace or None,
        )
        profiles = list(dig(fresh, "status", "profiles", default=[]) or [])
        if any(p.get("name") == profile.get("name") for p in profiles):
            return
        await self.client.patch(
            API_VERSION,
            "NIMCache",
            name_of(fresh),
            {
                "metadata": {"resourceVersion": dig(fresh, "metadata", "resourceVersion")},
                "status": {"profiles": [*profiles, dict(profile)]},
            },
            namespace=namespace_of(fresh) or None,
            patch_type="merge",
            subresource="status",
        )

    async def _store_local_manifest(self, nimcache: NIMCache, manifest_yaml: str) -> None:
        name = manifest_config_map_name(nimcache.metadata.name or "")
        namespace = nimcache.metadata.namespace
        try:
            current = await self.api_reader.get("v1", "ConfigMap", name, namespace or None)
        except NotFound:
            return
        if dig(current, "data", LOCAL_MANIFEST_KEY) == manifest_yaml:
            return
        await self.client.patch(
            "v1",
            "ConfigMap",
            name,
            {"data": {LOCAL_MANIFEST_KEY: manifest_yaml}},
            namespace=namespace or None,
            patch_type="merge",
        )

    def event(self, obj: Obj, readiness: Readiness) -> Event | None:
        kind = "Warning" if readiness.failed else "Normal"
        return (
            kind,
            readiness.reason,
            f"NIMBuild {name_of(obj)} state {readiness.state}: {readiness.message}",
        )

    def failure_reason(self, kind: str) -> str:
        return api_nb.REASON_RECONCILE_FAILED

    def failure_event(self, obj: Obj, message: str) -> Event | None:
        return (
            "Warning",
            "ReconcileFailed",
            f"NIMBuild {name_of(obj)} reconcile failed, msg: {message}",
        )

    async def cleanup(self, obj: Obj, reader: Reader, writer: Writer) -> None:
        for pod in (
            objects.engine_build_pod_name(name_of(obj)),
            objects.local_manifest_pod_name(name_of(obj)),
        ):
            with contextlib.suppress(NotFound):
                await writer.delete("v1", "Pod", pod, namespace_of(obj) or None)



def setup_nimbuild(manager: Manager, client: Client, options: SetupOptions) -> None:
    """The NIMBuild controller: For(NIMBuild) on spec changes, Owns(Pod), NIMCache -> its builds."""
    from nimctl_runtime.builder import Builder
    from nimctl_runtime.predicate import ResourceVersionChangedPredicate
    from nimctl_runtime.reconcile import Request

    async def logs(namespace: str, pod: str, container: str) -> str:
        text: str = await client.pod_logs(pod, namespace, container=container)
        return text

    cache = manager.cache
    cache.add_index(API_VERSION, KIND, NIMCACHE_INDEX, nimcache_name_index)
    reconciler: KindReconciler[NIMBuild, NIMBuildFacts] = KindReconciler(
        kind=NIMBuildKind(
            client=client,
            api_reader=cache.api_reader,
            pod_logs=options.extra.get("pod_logs") or logs,
        ),
        cache=cache,
        client=client,
        api_reader=cache.api_reader,
        recorder=manager.event_recorder(api_nb.RECORDER_NAME),
    )

    async def builds_of(nimcache: dict[str, Any]) -> list[Request]:
        namespace = namespace_of(nimcache)
        users = await cache.list(
            API_VERSION, KIND, namespace, index=(NIMCACHE_INDEX, name_of(nimcache))
        )
        return [Request(namespace, name_of(u)) for u in users]

    builder = (
        Builder(manager)
        .named("nimbuild")
        .for_(API_VERSION, KIND, predicates=[spec_change_predicate()])
        .with_options(max_concurrent_reconciles=options.max_concurrent_reconciles)
    )
    own_kinds(builder, manager, NIMBuildContract().owned_kinds(options.capabilities))
    builder.watches(
        API_VERSION, "NIMCache", builds_of, predicates=[ResourceVersionChangedPredicate()]
    )
    builder.complete(reconciler)
