"""NIMCache's binding to the reconciler skeleton: the facts caching needs, and its state machine.

What a NIMCache becomes at each step is decided by
``platforms.nimcache.NIMCacheContract``; the skeleton creates and prunes. This
module parses the NIMCache into its model (one the model refuses is
``Failed`` with ``NIM_CACHE_RECONCILE_FAILED`` naming the fields) and reads
what the contract needs (nim-operator.md §3.2): the PVC when it is not
ours to create (missing: ``NotReady`` with ``NIM_CACHE_RECONCILE_FAILED``), the
model manifest from its ConfigMap or from the manifest pod's log (read once,
then kept in ``<name>-manifest``; the pod is pruned), the cluster's GPU
products for profile selection, and the caching Job. The state machine
``PVC-Created -> Started -> Pending/InProgress -> Ready | Failed`` is
``controllers.nimcache_status``; a Normal Event marks each state change, a
Warning ``ReconcileFailed`` each failure, and status is written only when it
changed. On deletion the caching Job's pods are removed before the finalizer
is released.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from api.apps.v1alpha1 import nimcache as api_nc
from api.apps.v1alpha1.nimcache import NIMCache
from controllers import nimcache_status as ncs
from controllers.blocker_facts import gather_pod_facts
from controllers.nimservice import detect_orchestrator
from controllers.nimservice_parse import INVALID_SPEC, ParseMemo, by_resource_version, invalid
from controllers.reconciler import Event, Kind
from manifests.labels import APP_LABEL, APP_LABEL_OPERATOR_VALUE, NAME_LABEL
from nimctl_runtime.client.errors import ApiError, NotFound
from nimctl_runtime.client.interfaces import (
    KeyReader,
    Reader,
    Writer,
    get_or_none,
)
from nimctl_runtime.meta import Obj, dig, name_of, namespace_of
from platforms.contract import Observed, Readiness, ReconcileError
from platforms.nimcache import (
    API_VERSION,
    KIND,
    NIMCacheContract,
    NIMCacheFacts,
    NIMCacheProgress,
    is_optimized_ngc,
    model_spec,
)
from platforms.parsing import InvalidResource, parse
from platforms.standalone import nimcache as builders
from platforms.standalone import nimcache_profiles as profiles

FINALIZER = api_nc.FINALIZER
RECORDER_NAME = "nimcache-controller"
REASON_RECONCILE_FAILED = api_nc.REASON_RECONCILE_FAILED

PodLogReader = Callable[[str, str, str], Awaitable[str]]
"""``(namespace, pod, container) -> log text``."""

__all__ = [
    "API_VERSION",
    "FINALIZER",
    "KIND",
    "RECORDER_NAME",
    "NIMCacheKind",
    "PodLogReader",
    "client_pod_logs",
    "nimcache_of_pod",
]


async def client_pod_logs(client: Any, namespace: str, pod: str, container: str) -> str:
    """A container's log through the runtime client (``Client.pod_logs``)."""
    text: str = await client.pod_logs(pod, namespace, container=container)
    return text


class NIMCacheKind(Kind[NIMCache, NIMCacheFacts]):
    """NIMCache: manifest and PVC facts, NVIDIA's caching state machine.

    ``parse`` keeps each NIMCache's model (status included: the caching step
    depends on it) until its resourceVersion changes; one that does not fit
    the model is ``Failed`` with ``NIM_CACHE_RECONCILE_FAILED`` naming the fields.
    """

    api_version = API_VERSION
    kind = KIND
    finalizer = FINALIZER
    create_only = frozenset({"PersistentVolumeClaim", "Pod", "ConfigMap", "Job"})
    keep_on_prune = frozenset({"PersistentVolumeClaim"})

    def __init__(
        self,
        *,
        api_reader: KeyReader,
        pod_logs: PodLogReader,
        orchestrator: str | None = None,
        read_events: bool = False,
    ) -> None:
        self.contract = NIMCacheContract()
        self.read_events = read_events
        self.api_reader = api_reader
        self.pod_logs = pod_logs
        self.orchestrator = orchestrator
        self.parsed: ParseMemo[NIMCache] = ParseMemo(
            lambda o: parse(NIMCache, o, stored=True), by_resource_version
        )

    def parse(self, obj: Obj) -> NIMCache:
        try:
            return self.parsed.get(obj)
        except InvalidResource as err:
            raise invalid(err, REASON_RECONCILE_FAILED) from None

    def forget(self, namespace: str, name: str) -> None:
        """Drop what is kept about a NIMCache that is gone."""
        self.parsed.forget(namespace, name)

    async def _fresh(
        self, reader: Reader, api_version: str, kind: str, name: str, ns: str
    ) -> Obj | None:
        """The object from the cache, or from the API when the cache has not seen it yet."""
        found = await get_or_none(reader, api_version, kind, name, ns)
        if found is None:
            found = await get_or_none(self.api_reader, api_version, kind, name, ns)
        return found

    async def gather(self, cr: NIMCache, obj: Obj, reader: Reader) -> NIMCacheFacts:
        name, namespace = name_of(obj), namespace_of(obj)
        if self.orchestrator is None:
            self.orchestrator = detect_orchestrator(await _nodes(reader))
        if not cr.spec.storage.pvc.create:
            pvc_name = builders.pvc_name(cr)
            pvc = await self._fresh(reader, "v1", "PersistentVolumeClaim", pvc_name, namespace)
            if pvc is None:
                raise ReconcileError(
                    f'persistentvolumeclaims "{pvc_name}" not found; set '
                    "spec.storage.pvc.create: true or create the PVC",
                    reason=REASON_RECONCILE_FAILED,
                )
        manifest: profiles.Manifest | None = None
        pending = False
        cache_type = cr.status.type if cr.status is not None else None
        model_free = cache_type == ncs.TYPE_MODEL_FREE
        if cache_type not in (ncs.TYPE_MODEL_FREE, ncs.TYPE_NATIVE):
            cm_name = builders.manifest_config_map_name(name)
            cm = await self._fresh(reader, "v1", "ConfigMap", cm_name, namespace)
            try:
                if cm is not None:
                    text = dig(cm, "data", profiles.MANIFEST_CONFIGMAP_KEY, default="")
                    manifest = profiles.parse_manifest(text) if text else None
                else:
                    logs = await self._manifest_log(cr, reader)
                    if logs is None:
                        pending = True
                    elif profiles.MANIFEST_NOT_FOUND in logs:
                        model_free = True
                    else:
                        manifest = profiles.parse_manifest(logs)
            except profiles.ManifestError as exc:
                raise ReconcileError(str(exc), reason=REASON_RECONCILE_FAILED) from exc
        gpus: tuple[str, ...] = ()
        spec = model_spec(cr)
        if is_optimized_ngc(cr) and not spec.gpus and not spec.profiles:
            gpus = tuple(profiles.discovered_gpu_products(await _nodes(reader)))
        job = await get_or_none(reader, "batch/v1", "Job", builders.job_name(name), namespace)
        pods, events, nodes = await gather_pod_facts(
            reader,
            namespace,
            [builders.pod_labels(name)],
            events=self.read_events,
            workloads=[job],
        )
        return NIMCacheFacts(
            pods=pods,
            events=events,
            nodes=nodes,
            orchestrator=self.orchestrator,
            manifest_pending=pending,
            model_free=model_free,
            job=job,
            gpu_products=gpus,
            manifest=manifest,
        )

    async def _manifest_log(self, cr: NIMCache, reader: Reader) -> str | None:
        """The manifest pod's log once it is Running and printed; None while waiting."""
        name, namespace = cr.metadata.name or "", cr.metadata.namespace or ""
        pod_name = builders.manifest_pod_name(name)
        pod = await get_or_none(reader, "v1", "Pod", pod_name, namespace)
        if pod is None or dig(pod, "status", "phase") != "Running":
            return None
        containers = dig(pod, "spec", "containers", default=[{}])
        container = str(containers[0].get("name") or "nim-cache-ctr")
        try:
            logs = await self.pod_logs(namespace, pod_name, container)
        except NotFound:
            return None
        return logs if logs.strip() else None

    def progress(self, old: Obj, facts: NIMCacheFacts) -> Obj:
        if facts.model_free and old.get("type") != ncs.TYPE_MODEL_FREE:
            out = copy.deepcopy(old)
            out["type"] = ncs.TYPE_MODEL_FREE
            return out
        return old

    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        if readiness.details.get(INVALID_SPEC):
            # A spec no step can start from: Failed until it is edited.
            return {**ncs.reconcile_failed(old, readiness.message), "state": api_nc.STATE_FAILED}
        if readiness.failed or not isinstance(readiness, NIMCacheProgress):
            return ncs.reconcile_failed(old, readiness.message)
        st = old
        waiting = readiness.blocker is not None and not readiness.blocked_for_good
        if readiness.pvc_created:
            st = ncs.pvc_created(st)
        if readiness.job_created:
            st = ncs.job_created(st)
        elif readiness.job is not None and not waiting:
            st = ncs.job_observed(
                st,
                ncs.JobCounts.from_job(readiness.job),
                pvc_name=readiness.pvc_name,
                profiles=readiness.profiles,
            )
        if waiting:
            st = ncs.blocked(st, readiness.reason, readiness.message)
        elif readiness.blocked_for_good:
            st = ncs.job_failed_because(st, readiness.message)
        return ncs.reconciled(st)

    def status_event(
        self, obj: Obj, readiness: Readiness, old_status: Obj, new_status: Obj
    ) -> Event | None:
        change = ncs.state_event(
            name_of(obj), str(old_status.get("state", "")), str(new_status.get("state", ""))
        )
        return None if change is None else ("Normal", *change)

    def failure_event(self, obj: Obj, message: str) -> Event | None:
        return (
            "Warning",
            REASON_RECONCILE_FAILED,
            f"NIMCache {name_of(obj)} reconcile failed, msg: {message}",
        )

    def failure_reason(self, kind: str) -> str:
        return REASON_RECONCILE_FAILED

    async def cleanup(self, obj: Obj, reader: Reader, writer: Writer) -> None:
        """On deletion: remove the caching Job's pods (the Job itself goes by GC)."""
        namespace = namespace_of(obj)
        job_name = builders.job_name(name_of(obj))
        job = await get_or_none(reader, "batch/v1", "Job", job_name, namespace)
        labels = dig(job, "spec", "selector", "matchLabels", default={})
        if not labels:
            return
        try:
            pods = await reader.list("v1", "Pod", namespace, label_selector=dict(labels))
        except ApiError:
            return
        for pod in pods:
            with contextlib.suppress(NotFound):
                await writer.delete("v1", "Pod", name_of(pod), namespace)


def nimcache_of_pod(pod: Mapping[str, Any]) -> str | None:
    """The NIMCache a pod works for (its manifest pod, its caching Job's pods)."""
    labels = dig(pod, "metadata", "labels", default={}) or {}
    if labels.get(APP_LABEL) != APP_LABEL_OPERATOR_VALUE:
        return None
    name = labels.get(NAME_LABEL)
    return str(name) if name else None


async def _nodes(reader: Reader) -> list[Obj]:
    try:
        return await reader.list("v1", "Node")
    except ApiError:
        return []
