"""The simulator's engine: watch storage, run the pure controllers, carry out their actions.

``Simulator`` subscribes to ``cluster.storage`` (a synchronous listener), keeps
its own view of the objects it plays controller for, and works through a
deduplicated queue of ``(kind, namespace, name)`` keys on one asyncio task.
Delays come from a :mod:`clock` so a test can run time faster or step it by
hand. Writes go through the storage's in-process API, so they are atomic and
seen at once by every watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import functools
import heapq
import itertools
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from localcluster.catalog import ImageCatalog
from localcluster.errors import StatusError
from localcluster.hooks import AdmissionAttributes
from localcluster.registries import pull_problem
from localcluster.simulator import dra, enginebuild
from localcluster.simulator.clock import Clock, ScaledClock, parse_rfc3339, rfc3339
from localcluster.simulator.computedomain import DOMAIN_LABEL, reconcile_computedomain
from localcluster.simulator.computedomain_daemon import CONTROLLER_DEPLOYMENT
from localcluster.simulator.daemonset import reconcile_daemonset
from localcluster.simulator.deployment import (
    reconcile_deployment,
    reconcile_replicaset,
)
from localcluster.simulator.disruption import pdb_selects, reconcile_pdb
from localcluster.simulator.gpu_stack import NODE_KEY, GPUStack
from localcluster.simulator.interpod import (
    AffinityTerm,
    InterPodState,
    has_required_anti_affinity,
    has_required_pod_affinity,
    prefilter,
    required_terms,
    uses_namespace_selector,
)
from localcluster.simulator.job import reconcile_job
from localcluster.simulator.kserve import reconcile_inferenceservice
from localcluster.simulator.kubelet import (
    FAILURE_MODES,
    OPEN_GATE,
    PRE_STOP_SECONDS,
    SIMULATE_ANNOTATION,
    ContainerGate,
    KubeletTiming,
    PodPlan,
    container_logs,
    pod_status,
)
from localcluster.simulator.lws import reconcile_leaderworkerset
from localcluster.simulator.nodes import (
    NodeProfile,
    build_nodes,
    load_profile,
    node_conditions,
)
from localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    Delete,
    Emit,
    ObjectLookup,
    Requeue,
    Update,
    UpdateStatus,
    controller_ref,
    is_deleting,
    json_copy,
    name_of,
    namespace_of,
    set_condition,
    uid_of,
)
from localcluster.simulator.pulls import (
    config_problem,
    credential_hosts,
    mount_problem,
    pull_secret_names,
)
from localcluster.simulator.quota import reconcile_resourcequota
from localcluster.simulator.scheduling import (
    ScheduleResult,
    Usage,
    add_usage,
    node_allocatable,
    pinned_node_names,
    pod_requests,
    schedule,
    toleration_tolerates,
)
from localcluster.simulator.services import (
    ENDPOINTS_MANAGED_BY,
    default_storage_class,
    reconcile_hpa,
    reconcile_ingress,
    reconcile_pv,
    reconcile_pvc,
    reconcile_service_and_endpoints,
)
from localcluster.simulator.statefulset import reconcile_statefulset
from localcluster.simulator.tcpwait import POLL_SECONDS as TCP_WAIT_POLL_SECONDS
from localcluster.simulator.tcpwait import tcp_wait_problem
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import Obj

# (group, resource) -> kind for everything the simulator watches.
WATCHED: dict[tuple[str, str], str] = {
    ("", "pods"): "Pod",
    ("", "nodes"): "Node",
    ("", "services"): "Service",
    ("", "persistentvolumeclaims"): "PersistentVolumeClaim",
    ("", "persistentvolumes"): "PersistentVolume",
    ("", "endpoints"): "Endpoints",
    ("discovery.k8s.io", "endpointslices"): "EndpointSlice",
    ("apps", "replicasets"): "ReplicaSet",
    ("apps", "deployments"): "Deployment",
    ("apps", "statefulsets"): "StatefulSet",
    ("apps", "daemonsets"): "DaemonSet",
    ("apps", "controllerrevisions"): "ControllerRevision",
    ("batch", "jobs"): "Job",
    ("policy", "poddisruptionbudgets"): "PodDisruptionBudget",
    ("", "resourcequotas"): "ResourceQuota",
    ("storage.k8s.io", "storageclasses"): "StorageClass",
    ("autoscaling", "horizontalpodautoscalers"): "HorizontalPodAutoscaler",
    ("networking.k8s.io", "ingresses"): "Ingress",
    ("leaderworkerset.x-k8s.io", "leaderworkersets"): "LeaderWorkerSet",
    ("serving.kserve.io", "inferenceservices"): "InferenceService",
    ("resource.k8s.io", "deviceclasses"): "DeviceClass",
    ("resource.k8s.io", "resourceclaims"): "ResourceClaim",
    ("resource.k8s.io", "resourceclaimtemplates"): "ResourceClaimTemplate",
    ("resource.k8s.io", "resourceslices"): "ResourceSlice",
    ("resource.nvidia.com", "computedomains"): "ComputeDomain",
}
# Kinds served by a CRD: loaded when their CRD appears after the simulator started.
CRD_KINDS = ("LeaderWorkerSet", "InferenceService", "ComputeDomain")

Reconciler = Callable[[Obj, Context], list[Action]]
CONTROLLERS: dict[str, Reconciler] = {
    "ReplicaSet": reconcile_replicaset,
    "Deployment": reconcile_deployment,
    "StatefulSet": reconcile_statefulset,
    "DaemonSet": reconcile_daemonset,
    "Job": reconcile_job,
    "Service": reconcile_service_and_endpoints,
    "Ingress": reconcile_ingress,
    "PersistentVolumeClaim": reconcile_pvc,
    "PersistentVolume": reconcile_pv,
    "HorizontalPodAutoscaler": reconcile_hpa,
    "LeaderWorkerSet": reconcile_leaderworkerset,
    "InferenceService": reconcile_inferenceservice,
    "PodDisruptionBudget": reconcile_pdb,
    "ResourceQuota": reconcile_resourcequota,
    # NVIDIA's DRA driver publishes each GPU node's devices; claims lose gone pods.
    "Node": dra.reconcile_node_slices,
    "ResourceClaim": dra.reconcile_resourceclaim,
    "ComputeDomain": reconcile_computedomain,
}
API_VERSIONS = {
    "Pod": "v1",
    "Node": "v1",
    "Event": "v1",
    "Job": "batch/v1",
}

Key = tuple[str, str, str]
# Wall-clock seconds of reconciles after which the loop yields to the event loop.
YIELD_SECONDS = 0.002


class Simulator:
    """Plays kubelet, kube-scheduler and kube-controller-manager against a storage.

    *storage* is localcluster's ``Storage`` (its in-process friendly API and
    ``subscribe``). *clock* defaults to ``ScaledClock(speed)``. Tests change
    image behaviour through :attr:`catalog`, freeze the simulator with
    :meth:`stall`, and wait for quiet with :meth:`wait_idle`.
    """

    def __init__(
        self,
        storage: Any,
        *,
        profile: str | NodeProfile | dict[str, Any] | None = None,
        clock: Clock | None = None,
        speed: float = 1.0,
        timing: KubeletTiming | None = None,
        catalog: ImageCatalog | None = None,
        emit_events: bool = True,
        admission_plugins: list[Any] | None = None,
        kubelet_version: str | None = None,
    ) -> None:
        self.storage = storage
        # The cluster's admission chain (shared list); creates made by the simulated
        # controllers pass through it like any controller's writes would.
        self.admission_plugins: list[Any] = (
            admission_plugins if admission_plugins is not None else []
        )
        self.profile = load_profile(profile)
        # the version the nodes' kubelets report (the cluster's, when it set one)
        self.kubelet_version = kubelet_version
        self.clock: Clock = clock or ScaledClock(speed)
        self.timing = timing or KubeletTiming()
        self.catalog = catalog or ImageCatalog()
        # Files simulated containers write to PVCs (a NIM engine build's local manifest).
        self.volumes = enginebuild.VolumeFiles()
        self.emit_events = emit_events
        self.view = ObjectLookup()
        self._log = get_logger("localcluster.simulator")
        self._queue: deque[Key] = deque()
        self._queued: set[Key] = set()
        self._timers: list[tuple[float, int, Key]] = []
        self._seq = itertools.count()
        self._wake = asyncio.Event()
        self._running = asyncio.Event()
        self._running.set()
        self._idle = asyncio.Event()
        self._plans: dict[str, PodPlan] = {}
        self._ip_counters: dict[str, int] = {}
        self._event_names: dict[tuple[str, str, str], tuple[str, int]] = {}
        # owner UID -> the error of its last refused pod create (quota, admission), until a
        # create succeeds: the ReplicaSet controller's ``ReplicaFailure`` condition reads it.
        self._create_failures: dict[str, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._node_ordinals: dict[str, int] = {}
        # Incremental bookkeeping so scheduling costs O(nodes), not O(pods).
        self._node_usage: dict[str, Usage] = {}
        self._counted: dict[tuple[str, str], tuple[str, Usage]] = {}
        self._requests: dict[str, Usage] = {}
        self._allocatable: dict[str, tuple[str, Usage]] = {}
        self._unbound: set[tuple[str, str]] = set()
        # Inter-pod affinity: bound pods with required anti-affinity (checked against every
        # pod scheduled) and pending pods with required affinity (retried when pods bind).
        self._anti_affinity_pods: dict[tuple[str, str], tuple[Obj, tuple[AffinityTerm, ...]]] = {}
        # Those of them whose terms select namespaces by label (known when indexed).
        self._anti_namespace_selectors: set[tuple[str, str]] = set()
        self._affinity_waiting: set[tuple[str, str]] = set()
        self._failure_modes: dict[str, str] = {}
        self._pending_deletes: list[Delete] = []
        self._container_runs: dict[str, set[tuple[str, int]]] = {}
        # What blocks each pod's containers (pulls, env sources), and each node's images.
        self._gates: dict[str, dict[str, ContainerGate]] = {}
        # times the loop gave the event loop a turn in the middle of its queue
        self.yields = 0
        # unscheduled pods not tried again for the echo of their own status write
        self.unschedulable_echoes = 0
        # (kind, namespace, name or "" for generateName, event type once seen) of the
        # create or update the simulator is making (see _write_own)
        self._own_write: tuple[str, str, str, str | None] | None = None
        # built-in kinds whose own writes are observed from the returned object; a CRD
        # kind's answer may be converted to another version than the one stored
        self._observed_kinds = frozenset(WATCHED.values()) - set(CRD_KINDS)
        self._node_images: dict[str, set[str]] = {}
        self._missing_pull_secrets: dict[str, list[str]] = {}
        self._terminating: dict[str, float] = {}
        self.gpu_stack = GPUStack(self.view, self.catalog)

    # ---------------------------------------------------------------- lifecycle

    async def start(self) -> None:
        """Create the profile's nodes and the default StorageClass, then start working."""
        self._unsubscribe = self.storage.subscribe(self._on_event)
        for (group, resource), kind in WATCHED.items():
            del group, resource
            api_version = self._api_version_of(kind)
            if api_version is None:
                continue
            with contextlib.suppress(StatusError):
                for obj in self.storage.list(api_version, kind):
                    obj.setdefault("kind", kind)
                    self.view.put(obj)
                    if kind == "Pod":
                        self._index_pod(obj, deleted=False)
                    self._enqueue((kind, namespace_of(obj), name_of(obj)))
        stamp = rfc3339(self.clock.wall())
        for index, node in enumerate(build_nodes(self.profile)):
            if self.kubelet_version:
                info = node["status"]["nodeInfo"]
                info["kubeletVersion"] = info["kubeProxyVersion"] = self.kubelet_version
            self._node_ordinals[name_of(node)] = index
            if self.view.get("Node", "", name_of(node)) is None:
                node["status"]["conditions"] = node_conditions(stamp)
                self._write(functools.partial(self.storage.create, node))
        if not self.view.list("StorageClass"):
            self._write(lambda: self.storage.create(default_storage_class()))
        self._task = asyncio.create_task(self._run(), name="localcluster-simulator")

    async def stop(self) -> None:
        """Stop working (objects stay as they are)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def stall(self) -> None:
        """Freeze the simulator: nothing is scheduled, started or reconciled until resumed."""
        self._running.clear()

    def resume(self) -> None:
        """Undo :meth:`stall`; everything that changed meanwhile is processed."""
        self._running.set()
        self._wake.set()

    def set_failure_mode(self, pod_pattern: str, mode: str | None) -> None:
        """Make pods whose ``namespace/name`` matches *pod_pattern* (fnmatch) misbehave.

        *mode* is what the ``localcluster.nimctl.io/simulate`` annotation takes
        (``fail``, ``crash-loop``, ``never-ready``); ``None`` removes the rule. The
        annotation on a pod wins over these rules. Matching pods are re-evaluated now.
        """
        if mode is None:
            self._failure_modes.pop(pod_pattern, None)
        else:
            if mode not in FAILURE_MODES:
                raise ValueError(f"unknown failure mode {mode!r}: use one of {FAILURE_MODES}")
            self._failure_modes[pod_pattern] = mode
        for pod in self.view.list("Pod"):
            if fnmatch.fnmatchcase(f"{namespace_of(pod)}/{name_of(pod)}", pod_pattern):
                self._enqueue(("Pod", namespace_of(pod), name_of(pod)))

    def _with_failure_mode(self, pod: Obj) -> Obj:
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        if SIMULATE_ANNOTATION in annotations or not self._failure_modes:
            return pod
        key = f"{namespace_of(pod)}/{name_of(pod)}"
        for pattern, mode in self._failure_modes.items():
            if fnmatch.fnmatchcase(key, pattern):
                out = dict(pod)
                out["metadata"] = {
                    **(pod.get("metadata") or {}),
                    "annotations": {**annotations, SIMULATE_ANNOTATION: mode},
                }
                return out
        return pod

    @property
    def stalled(self) -> bool:
        return not self._running.is_set()

    async def wait_idle(self, timeout: float = 10.0) -> bool:  # noqa: ASYNC109
        """Wait until the queue is empty and no timer is due; False on timeout.

        Timers due later may still be pending. A timer that came due (a
        ``ManualClock`` advanced) counts as queued work, so ``advance`` then
        ``wait_idle`` sees its effects.
        """
        try:
            async with asyncio.timeout(timeout):
                while self._queue or not self._idle.is_set() or self._timer_due():
                    self._idle.clear()
                    self._wake.set()
                    await self._idle.wait()
        except TimeoutError:
            return False
        return True

    def _timer_due(self) -> bool:
        return bool(self._timers) and self._timers[0][0] <= self.clock.now()

    def pod_logs(self, namespace: str, pod: str, container: str) -> str:
        """What a container of a pod has printed so far (the catalog's output once started)."""
        obj = self.view.get("Pod", namespace, pod)
        if obj is None:
            return ""
        spec = obj.get("spec") or {}
        if not container:
            containers = spec.get("containers") or []
            container = containers[0].get("name", "") if containers else ""
        started = False
        status = obj.get("status") or {}
        for st in [
            *(status.get("containerStatuses") or []),
            *(status.get("initContainerStatuses") or []),
        ]:
            if st.get("name") == container:
                state = st.get("state") or {}
                started = "running" in state or "terminated" in state or bool(st.get("lastState"))
        simulated = enginebuild.logs(obj, container, self.volumes, started=started)
        if simulated is not None:
            return simulated
        return container_logs(self._with_failure_mode(obj), container, self.catalog, started)

    # ---------------------------------------------------------------- events in

    def _api_version_of(self, kind: str) -> str | None:
        for (group, _), k in WATCHED.items():
            if k == kind:
                info = None
                for candidate in self.storage.registry.all():
                    if candidate.group == group and candidate.kind == kind:
                        info = candidate
                        break
                return str(info.api_version) if info is not None else None
        return API_VERSIONS.get(kind)

    def _on_event(self, event: Any) -> None:
        kind = WATCHED.get((event.group, event.resource))
        if kind is None:
            if (
                event.resource == "customresourcedefinitions"
                and event.group == "apiextensions.k8s.io"
            ):
                for crd_kind in CRD_KINDS:
                    self._enqueue((crd_kind, "", "*"))
            return
        own = self._own_write
        if (
            own is not None
            and own[3] is None
            and own[0] == kind
            and own[1] == event.namespace
            and own[2] in ("", event.name)
            and event.type != "DELETED"
        ):
            # The event of the simulator's own write: observed with the object the write
            # returns (the very dict the storage encoded) instead of decoding it again.
            self._own_write = (*own[:3], event.type)
            return
        self._observe(kind, event.type, event.object)

    def _observe(self, kind: str, type_: str, obj: Obj, *, own_status: bool = False) -> None:
        """Bring an added, modified or deleted object into the view and enqueue whom it
        concerns (the rest of :meth:`_on_event`). *own_status*: the simulator's own
        status write of *obj*."""
        obj.setdefault("kind", kind)
        if type_ == "DELETED":
            self.view.remove(obj)
            if kind == "Pod":
                self._plans.pop(uid_of(obj), None)
                self._container_runs.pop(uid_of(obj), None)
                self._index_pod(obj, deleted=True)
                self._enqueue_pending_pods()
        elif type_ in ("ADDED", "MODIFIED"):
            self.view.put(obj)
            if kind == "Pod":
                self._index_pod(obj, deleted=False)
        else:
            return
        namespace, name = namespace_of(obj), name_of(obj)
        if own_status and kind == "Pod" and _unbound(obj):
            # The scheduler's own "FailedScheduling" status of a pod it could not place:
            # as kube-scheduler, the pod is tried again when the cluster changes (a node,
            # a freed pod, a claim or volume: see _enqueue_pending_pods), not because its
            # status was written.
            self.unschedulable_echoes += 1
        elif kind in CONTROLLERS or kind == "Pod":
            self._enqueue((kind, namespace, name))
        for gpu_key in self.gpu_stack.observe(kind, type_, obj):
            self._enqueue(gpu_key)
        ref = controller_ref(obj)
        if ref is not None and ref.get("kind") in CONTROLLERS:
            self._enqueue((str(ref["kind"]), namespace, str(ref.get("name", ""))))
        if kind == "ResourceClaim":
            # A claim made for a pod, or devices freed: pods waiting for claims retry.
            if ref is not None and ref.get("kind") == "Pod":
                self._enqueue(("Pod", namespace, str(ref.get("name", ""))))
            self._enqueue_pending_pods()
            for domain in self.view.list("ComputeDomain", namespace):  # IMEX nodes joining
                self._enqueue(("ComputeDomain", namespace, name_of(domain)))
        obj_labels = (obj.get("metadata") or {}).get("labels") or {}
        if (kind == "Pod" and DOMAIN_LABEL in obj_labels) or (
            kind == "Deployment" and name == CONTROLLER_DEPLOYMENT
        ):
            # IMEX daemon pods (in the driver's namespace) or the driver's controller changed.
            for domain in self.view.list("ComputeDomain"):
                self._enqueue(("ComputeDomain", namespace_of(domain), name_of(domain)))
        elif kind == "ResourceClaimTemplate":
            self._enqueue_pending_pods()
        elif kind == "Pod" and type_ == "DELETED":
            for rc in self.view.list("ResourceClaim", namespace):
                reserved = (rc.get("status") or {}).get("reservedFor") or []
                if any(r.get("uid") == uid_of(obj) for r in reserved):
                    self._enqueue(("ResourceClaim", namespace, name_of(rc)))
        if kind == "Node":
            taints = (obj.get("spec") or {}).get("taints") or []
            if type_ == "DELETED" or any(t.get("effect") == "NoExecute" for t in taints):
                for pod in self.view.list("Pod"):
                    if (pod.get("spec") or {}).get("nodeName") == name:
                        self._enqueue(("Pod", namespace_of(pod), name_of(pod)))
            for ds in self.view.list("DaemonSet"):
                self._enqueue(("DaemonSet", namespace_of(ds), name_of(ds)))
            self._enqueue_pending_pods()
        elif kind == "Pod" and (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            self._enqueue_pending_pods()
        elif kind == "PersistentVolumeClaim":
            self._enqueue_pending_pods()
            for pv in self.view.list("PersistentVolume"):
                claim = (pv.get("spec") or {}).get("claimRef") or {}
                if claim.get("name") == name and claim.get("namespace") == namespace:
                    self._enqueue(("PersistentVolume", "", name_of(pv)))
        elif kind == "StorageClass":
            for pvc in self.view.list("PersistentVolumeClaim"):
                self._enqueue(("PersistentVolumeClaim", namespace_of(pvc), name_of(pvc)))
        if kind == "Pod":
            for quota in self.view.list("ResourceQuota", namespace):
                self._enqueue(("ResourceQuota", namespace, name_of(quota)))
            for pdb in self.view.list("PodDisruptionBudget", namespace):
                if pdb_selects(pdb, obj):
                    self._enqueue(("PodDisruptionBudget", namespace, name_of(pdb)))
            for volume in (obj.get("spec") or {}).get("volumes") or []:
                claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
                if claim:  # a claim waiting on pvc-protection may now be free
                    self._enqueue(("PersistentVolumeClaim", namespace, str(claim)))
            labels = (obj.get("metadata") or {}).get("labels") or {}
            for svc in self.view.selecting("Service", namespace, labels):
                self._enqueue(("Service", namespace, name_of(svc)))
        elif kind == "Service" and type_ == "DELETED":
            self._delete_managed_endpoints(namespace, name)
        if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
            for hpa in self.view.list("HorizontalPodAutoscaler", namespace):
                target = (hpa.get("spec") or {}).get("scaleTargetRef") or {}
                if target.get("kind") == kind and target.get("name") == name:
                    self._enqueue(("HorizontalPodAutoscaler", namespace, name_of(hpa)))

    def _delete_managed_endpoints(self, namespace: str, name: str) -> None:
        endpoints = self.view.get("Endpoints", namespace, name)
        labels = ((endpoints or {}).get("metadata") or {}).get("labels") or {}
        if labels.get(ENDPOINTS_MANAGED_BY):
            self._pending_deletes.append(Delete("v1", "Endpoints", namespace, name))
            self._wake.set()

    def _index_pod(self, pod: Obj, *, deleted: bool) -> None:
        key = (namespace_of(pod), name_of(pod))
        previous = self._counted.pop(key, None)
        if previous is not None:
            add_usage(self._node_usage.setdefault(previous[0], {}), previous[1], -1)
        self._unbound.discard(key)
        self._anti_affinity_pods.pop(key, None)
        self._anti_namespace_selectors.discard(key)
        self._affinity_waiting.discard(key)
        if deleted:
            self._requests.pop(uid_of(pod), None)
            return
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            self._unbound.add(key)
            if has_required_pod_affinity(pod):
                self._affinity_waiting.add(key)
        elif has_required_anti_affinity(pod):
            self._anti_affinity_pods[key] = (pod, required_terms(pod, "podAntiAffinity"))
            if uses_namespace_selector(pod):
                self._anti_namespace_selectors.add(key)
        if node and self._affinity_waiting:
            # A bound pod may be what a pending pod's required affinity waits for.
            for namespace, name in sorted(self._affinity_waiting):
                self._enqueue(("Pod", namespace, name))
        elif (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            requests = self._requests.get(uid_of(pod))
            if requests is None:
                requests = self._requests[uid_of(pod)] = pod_requests(pod)
            add_usage(self._node_usage.setdefault(str(node), {}), requests, 1)
            self._counted[key] = (str(node), requests)

    def _allocatable_of(self, node: Obj) -> Usage:
        rv = str((node.get("metadata") or {}).get("resourceVersion", ""))
        cached = self._allocatable.get(name_of(node))
        if cached is None or cached[0] != rv:
            cached = (rv, node_allocatable(node))
            self._allocatable[name_of(node)] = cached
        return cached[1]

    def _enqueue_pending_pods(self) -> None:
        for namespace, name in sorted(self._unbound):
            self._enqueue(("Pod", namespace, name))

    def _enqueue(self, key: Key) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.append(key)
            self._idle.clear()
            self._wake.set()

    def _after(self, delay: float, key: Key) -> None:
        heapq.heappush(self._timers, (self.clock.now() + max(delay, 0.0), next(self._seq), key))
        self._wake.set()

    # ---------------------------------------------------------------- the loop

    async def _run(self) -> None:
        while True:
            await self._running.wait()
            now = self.clock.now()
            while self._timers and self._timers[0][0] <= now:
                _, _, key = heapq.heappop(self._timers)
                self._enqueue(key)
            if self._pending_deletes:
                deletes, self._pending_deletes = self._pending_deletes, []
                await self._execute(("Endpoints", "", ""), list(deletes))
            turn_began = time.perf_counter()
            while self._queue and self._running.is_set():
                key = self._queue.popleft()
                self._queued.discard(key)
                try:
                    await self._process(key)
                except Exception as exc:  # a bug in one object must not stop the simulator
                    self._log.exception("simulator reconcile failed", key=key, error=str(exc))
                if time.perf_counter() - turn_began >= YIELD_SECONDS:
                    # Let the API server's requests in between: a batch of keys must not
                    # hold the event loop longer than this (50 keys took ~10 ms).
                    self.yields += 1
                    await asyncio.sleep(0)
                    turn_began = time.perf_counter()
            if self._queue:
                continue
            self._idle.set()
            self._wake.clear()
            waits: list[asyncio.Task[Any]] = [asyncio.create_task(self._wake.wait())]
            if self._timers:
                waits.append(asyncio.create_task(self.clock.sleep_until(self._timers[0][0])))
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in waits:
                    task.cancel()

    def _context(self) -> Context:
        clock = self.clock

        def sim_of(stamp: str) -> float:
            moment = parse_rfc3339(stamp)
            if moment is None:
                return clock.now()
            speed = float(getattr(clock, "speed", 1.0))
            return clock.now() - (clock.wall() - moment).total_seconds() * speed

        return Context(
            view=self.view,
            now=clock.now(),
            stamp=lambda: rfc3339(clock.wall()),
            sim_of=sim_of,
            # Core objects the simulator does not watch (KServe reads its ConfigMap).
            options={"lookup": self._lookup, "create_failures": self._create_failures},
        )

    async def _process(self, key: Key) -> None:
        kind, namespace, name = key
        if kind in CRD_KINDS and name == "*":
            self._load_kind(kind)
            return
        if kind == "Pod":
            await self._process_pod(namespace, name)
            return
        if kind == NODE_KEY:
            await self._execute(key, self.gpu_stack.sync(name, self._context()))
            return
        obj = self.view.get(kind, namespace, name)
        controller = CONTROLLERS.get(kind)
        if obj is None or controller is None:
            return
        if is_deleting(obj) and kind not in ("Job", "PersistentVolume", "PersistentVolumeClaim"):
            return
        await self._execute(key, controller(obj, self._context()))

    def _load_kind(self, kind: str) -> None:
        api_version = self._api_version_of(kind)
        if api_version is None:
            return
        with contextlib.suppress(StatusError):
            for obj in self.storage.list(api_version, kind):
                self.view.put(obj)
                self._enqueue((kind, namespace_of(obj), name_of(obj)))

    # ---------------------------------------------------------------- scheduler + kubelet

    async def _process_pod(self, namespace: str, name: str) -> None:
        pod = self.view.get("Pod", namespace, name)
        if pod is None:
            return
        if is_deleting(pod):
            self._terminate(pod)
            return
        spec = pod.get("spec") or {}
        node_name = spec.get("nodeName")
        if not node_name:
            await self._schedule(pod)
            return
        node = self.view.get("Node", "", str(node_name))
        if node is None:
            # PodGC: a pod bound to a node that no longer exists is deleted.
            await self._execute(
                ("Pod", namespace, name),
                [Delete("v1", "Pod", namespace, name, grace_period_seconds=0)],  # force, as PodGC
            )
            return
        if _evicted_by_taint(pod, node):
            # The taint manager: a NoExecute taint the pod does not tolerate evicts it.
            self._emit(
                pod,
                "Normal",
                "TaintManagerEviction",
                f"Marking for deletion Pod {namespace}/{name}",
            )
            await self._execute(("Pod", namespace, name), [Delete("v1", "Pod", namespace, name)])
            return
        plan = self._plans.get(uid_of(pod))
        if plan is None:
            plan = PodPlan(
                bound_at=self.clock.now(),
                pod_ip=self._pod_ip(str(node_name)),
                host_ip=_internal_ip(node),
                timing=self.timing,
            )
            self._plans[uid_of(pod)] = plan
        status, wake = pod_status(
            enginebuild.simulated(self._with_failure_mode(self.gpu_stack.pod_view(pod, node))),
            plan,
            self.catalog,
            self.clock.now(),
            lambda t: rfc3339(self.clock.wall_at(t)),
            gates=self._container_gates(pod),
        )
        enginebuild.observe(pod, status, self.volumes)
        claim_statuses = (pod.get("status") or {}).get("resourceClaimStatuses")
        if claim_statuses:  # the resourceclaim controller's, not the kubelet's
            status = {**status, "resourceClaimStatuses": claim_statuses}
        key: Key = ("Pod", namespace, name)
        if wake is not None:
            self._after(wake - self.clock.now(), key)
        if status != (pod.get("status") or {}):
            updated = dict(pod)
            updated["status"] = status
            await self._execute(key, [UpdateStatus(updated)])
            self._kubelet_events(pod, status)

    def _terminate(self, pod: Obj) -> None:
        """The kubelet's side of a graceful delete: stop the containers (preStop hooks
        first), then delete the pod for good, at the latest when the grace period ends."""
        grace = (pod.get("metadata") or {}).get("deletionGracePeriodSeconds")
        if not grace:
            return  # already released; only finalizers hold the pod now
        uid, now = uid_of(pod), self.clock.now()
        started = self._terminating.get(uid)
        containers = (pod.get("spec") or {}).get("containers") or []
        if started is None:
            started = self._terminating[uid] = now
            for container in containers:
                self._emit(
                    pod, "Normal", "Killing", f"Stopping container {container.get('name', '')}"
                )
        hooks = any((c.get("lifecycle") or {}).get("preStop") for c in containers)
        stop_after = min(
            float(grace), self.timing.stop_seconds + (PRE_STOP_SECONDS if hooks else 0)
        )
        if now < started + stop_after:
            self._after(started + stop_after - now, ("Pod", namespace_of(pod), name_of(pod)))
            return
        self._terminating.pop(uid, None)
        self._write(
            functools.partial(
                self.storage.delete,
                "v1",
                "Pod",
                name_of(pod),
                namespace_of(pod),
                grace_period_seconds=0,
            )
        )

    def _lookup(self, kind: str, namespace: str, name: str) -> Obj | None:
        try:
            obj: Obj = self.storage.get("v1", kind, name, namespace)
        except StatusError:
            return None
        return obj

    def _container_gates(self, pod: Obj) -> dict[str, ContainerGate]:
        """Re-check what blocks each not-yet-started container: its image pull and env."""
        uid, namespace = uid_of(pod), namespace_of(pod)
        spec = pod.get("spec") or {}
        status = pod.get("status") or {}
        started = {
            str(st.get("name", ""))
            for st in [
                *(status.get("initContainerStatuses") or []),
                *(status.get("containerStatuses") or []),
            ]
            if "running" in (st.get("state") or {})
            or "terminated" in (st.get("state") or {})
            or st.get("restartCount")
        }
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        previous = self._gates.get(uid, {})
        if all(str(c.get("name", "")) in started for c in containers):
            return previous
        account = self._lookup(
            "ServiceAccount", namespace, str(spec.get("serviceAccountName") or "default")
        )
        secrets: list[Obj] = []
        missing: list[str] = []
        for secret_name in pull_secret_names(pod, account):
            secret = self._lookup("Secret", namespace, secret_name)
            if secret is None:
                missing.append(secret_name)
            else:
                secrets.append(secret)
        self._missing_pull_secrets[uid] = missing
        hosts = credential_hosts(secrets)
        now = self.clock.now()
        mount = mount_problem(pod, lambda kind, n: self._lookup(kind, namespace, n))
        if mount:
            self._emit(pod, "Warning", "FailedMount", mount)
        gates: dict[str, ContainerGate] = {}
        for container in containers:
            name = str(container.get("name", ""))
            before = previous.get(name, OPEN_GATE)
            if name in started:
                gates[name] = before
                continue
            image = str(container.get("image", ""))
            pulled = container.get("imagePullPolicy") == "Never" or self.catalog.added_for(image)
            pull = None if pulled else pull_problem(image, hosts)
            config = (
                None
                if pull
                else config_problem(
                    container, namespace, lambda kind, n: self._lookup(kind, namespace, n)
                )
            )
            if mount:
                since = before.since if before.mount_error else now
                gates[name] = ContainerGate(mount_error=mount, since=since)
            elif pull:
                since = before.since if before.pull_error else now
                gates[name] = ContainerGate(pull_error=pull, since=since)
            elif config:
                since = before.since if before.config_error else now
                gates[name] = ContainerGate(config_error=config, since=since)
            elif tcp_wait_problem(container, namespace, self._lookup):
                # An ``until nc -z host port`` loop: look again after its sleep.
                gates[name] = ContainerGate(not_before=now + TCP_WAIT_POLL_SECONDS)
            elif before.pull_error or before.config_error or before.mount_error:
                gates[name] = ContainerGate(not_before=now)
            else:
                gates[name] = before
        self._gates[uid] = gates
        return gates

    def _kubelet_events(self, pod: Obj, status: Obj) -> None:
        """The events kubelet records as containers start, crash and fail to pull."""
        if not self.emit_events:
            return
        seen = self._container_runs.setdefault(uid_of(pod), set())
        images = {
            c.get("name", ""): c.get("image", "")
            for c in [
                *((pod.get("spec") or {}).get("initContainers") or []),
                *((pod.get("spec") or {}).get("containers") or []),
            ]
        }
        for st in [
            *(status.get("initContainerStatuses") or []),
            *(status.get("containerStatuses") or []),
        ]:
            name = str(st.get("name", ""))
            state = st.get("state") or {}
            waiting = state.get("waiting") or {}
            run = (name, int(st.get("restartCount") or 0))
            image = str(images.get(name, ""))
            if ("running" in state or "terminated" in state) and run not in seen:
                seen.add(run)
                if run[1] == 0:
                    self._pulled_events(pod, image)
                self._emit(pod, "Normal", "Created", f"Created container: {name}")
                self._emit(pod, "Normal", "Started", f"Started container {name}")
            elif waiting.get("reason") == "CrashLoopBackOff":
                self._emit(
                    pod,
                    "Warning",
                    "BackOff",
                    f"Back-off restarting failed container {name} in pod "
                    f"{name_of(pod)}_{namespace_of(pod)}({uid_of(pod)})",
                )
            elif waiting.get("reason") == "ErrImagePull":
                self._missing_secrets_event(pod)
                self._emit(pod, "Normal", "Pulling", f'Pulling image "{image}"')
                self._emit(
                    pod,
                    "Warning",
                    "Failed",
                    f'Failed to pull image "{image}": {waiting.get("message", "")}',
                )
                self._emit(pod, "Warning", "Failed", "Error: ErrImagePull")
            elif waiting.get("reason") == "ImagePullBackOff":
                self._emit(pod, "Normal", "BackOff", f'Back-off pulling image "{image}"')
                self._emit(pod, "Warning", "Failed", "Error: ImagePullBackOff")
            elif waiting.get("reason") == "CreateContainerConfigError":
                self._emit(pod, "Warning", "Failed", f"Error: {waiting.get('message', '')}")

    def _missing_secrets_event(self, pod: Obj) -> None:
        missing = self._missing_pull_secrets.get(uid_of(pod))
        if missing:
            self._emit(
                pod,
                "Warning",
                "FailedToRetrieveImagePullSecret",
                f"Unable to retrieve some image pull secrets ({', '.join(missing)}); "
                "attempting to pull the image may not succeed.",
            )

    def _pulled_events(self, pod: Obj, image: str) -> None:
        """Pulling/Pulled the first time a node needs the image, else "already present"."""
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        present = self._node_images.setdefault(node, set())
        policy = next(
            (
                c.get("imagePullPolicy")
                for c in [
                    *((pod.get("spec") or {}).get("initContainers") or []),
                    *((pod.get("spec") or {}).get("containers") or []),
                ]
                if c.get("image") == image
            ),
            "IfNotPresent",
        )
        if image in present and policy != "Always":
            self._emit(
                pod, "Normal", "Pulled", f'Container image "{image}" already present on machine'
            )
            return
        present.add(image)
        self._missing_secrets_event(pod)
        self._emit(pod, "Normal", "Pulling", f'Pulling image "{image}"')
        self._emit(
            pod,
            "Normal",
            "Pulled",
            f'Successfully pulled image "{image}" in 1.5s (1.5s including waiting). '
            "Image size: 104857600 bytes.",
        )

    def _pod_ip(self, node_name: str) -> str:
        count = self._ip_counters.get(node_name, 1) + 1
        self._ip_counters[node_name] = count
        ordinal = self._node_ordinals.get(node_name, 0)
        return f"10.244.{ordinal}.{count % 250 + 2}"

    async def _schedule(self, pod: Obj) -> None:
        spec = pod.get("spec") or {}
        key: Key = ("Pod", namespace_of(pod), name_of(pod))
        scheduler = spec.get("schedulerName") or "default-scheduler"
        if scheduler != "default-scheduler":
            return
        if spec.get("schedulingGates"):
            await self._unschedulable(
                pod, "SchedulingGated", "Scheduling is blocked due to non-empty scheduling gates"
            )
            return
        claim_problem = self._claim_problem(pod)
        if claim_problem:
            await self._unschedulable(pod, "Unschedulable", claim_problem)
            return
        nodes = self.view.list("Node")
        claims: dict[str, Obj] = {}
        if spec.get("resourceClaims"):
            missing = dra.missing_templates(pod, self.view)
            if missing:
                # the resourceclaim controller retries; the pod waits, unscheduled
                for pod_claim, template in missing:
                    self._emit(
                        pod,
                        "Warning",
                        "FailedResourceClaimCreation",
                        dra.template_missing_message(pod_claim, template),
                    )
                self._after(2.0, key)
                return
            # DRA: claims made from templates first, then only nodes that can hold them all.
            actions, claims, problem = dra.pod_claims(pod, self.view)
            await self._execute(key, actions)
            if problem or actions:
                if problem:
                    await self._unschedulable(pod, "Unschedulable", problem)
                return
            names = dra.feasible_nodes(claims, [name_of(n) for n in nodes], self.view)
            if not names:
                await self._unschedulable(
                    pod,
                    "Unschedulable",
                    f"0/{len(nodes)} nodes are available: {len(nodes)} cannot allocate all "
                    "claims. still not schedulable, preemption: 0/"
                    f"{len(nodes)} nodes are available: {len(nodes)} Preemption is not "
                    "helpful for scheduling.",
                )
                return
            nodes = [n for n in nodes if name_of(n) in names]
        inter_pod = self._inter_pod(pod)
        pinned = pinned_node_names(pod)
        result = None
        if pinned is not None:
            # NodeAffinity PreFilter: a pinned pod (a DaemonSet's) is checked against
            # its node(s) only; the whole list is walked only to say why it does not fit.
            candidates = [n for n in nodes if name_of(n) in pinned]
            result = self._schedule_on(pod, candidates, inter_pod)
            if result.node_name is None:
                result = None
        if result is None:
            result = self._schedule_on(pod, nodes, inter_pod)
        if result.node_name is None:
            await self._unschedulable(pod, "Unschedulable", result.message)
            return
        # The storage copies what it is given: a new top level and spec are enough here.
        bound = {**pod, "spec": {**pod["spec"], "nodeName": result.node_name}}
        if claims:
            await self._execute(key, dra.allocate(pod, result.node_name, claims, self.view))
        await self._execute(key, [Update(bound)])
        self._emit(
            pod,
            "Normal",
            "Scheduled",
            f"Successfully assigned {namespace_of(pod)}/{name_of(pod)} to {result.node_name}",
        )

    def _schedule_on(
        self, pod: Obj, nodes: list[Obj], inter_pod: InterPodState | None
    ) -> ScheduleResult:
        return schedule(
            pod,
            nodes,
            usage=self._node_usage,
            allocatable={name_of(n): self._allocatable_of(n) for n in nodes},
            inter_pod=inter_pod,
        )

    def _inter_pod(self, pod: Obj) -> InterPodState | None:
        """kube-scheduler's InterPodAffinity PreFilter over the bound pods (``interpod``)."""
        if not self._anti_affinity_pods and not (
            has_required_pod_affinity(pod) or has_required_anti_affinity(pod)
        ):
            return None

        def with_node(pods: Iterable[Obj]) -> Iterator[tuple[Obj, Obj]]:
            for other in pods:
                node_name = (other.get("spec") or {}).get("nodeName")
                node = self.view.get("Node", "", str(node_name)) if node_name else None
                if node is not None:
                    yield other, node

        anti = list(self._anti_affinity_pods.values())
        namespaces: dict[str, Mapping[str, str]] = {}
        if uses_namespace_selector(pod) or self._anti_namespace_selectors:
            with contextlib.suppress(StatusError):
                for ns in self.storage.list("v1", "Namespace"):
                    namespaces[name_of(ns)] = (ns.get("metadata") or {}).get("labels") or {}

        def bound() -> Iterator[tuple[Obj, Obj]]:  # every pod: read only for a pod with terms
            yield from with_node(self.view.list("Pod"))

        def with_anti() -> Iterator[tuple[Obj, Obj, tuple[AffinityTerm, ...]]]:
            for other, terms in anti:
                for _, node in with_node((other,)):
                    yield other, node, terms

        return prefilter(pod, bound(), with_anti(), namespaces)

    def _claim_problem(self, pod: Obj) -> str:
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
            if not claim:
                continue
            pvc = self.view.get("PersistentVolumeClaim", namespace_of(pod), str(claim))
            total = len(self.view.list("Node"))
            if pvc is None:
                return f'persistentvolumeclaim "{claim}" not found'
            if (pvc.get("status") or {}).get("phase") != "Bound":
                return (
                    f"0/{total} nodes are available: pod has unbound immediate "
                    "PersistentVolumeClaims. preemption: 0/{total} nodes are available: "
                    f"{total} Preemption is not helpful for scheduling."
                ).replace("{total}", str(total))
        return ""

    async def _unschedulable(self, pod: Obj, reason: str, message: str) -> None:
        current = pod.get("status") or {}
        previous = next(
            (c for c in current.get("conditions") or [] if c.get("type") == "PodScheduled"), None
        )
        if (
            previous is not None
            and previous.get("status") == "False"
            and previous.get("message") == message
            and current.get("phase") == "Pending"
        ):
            return
        status = json_copy(dict(current))
        stamp = rfc3339(self.clock.wall())
        status["phase"] = "Pending"
        status["conditions"] = set_condition(
            list(status.get("conditions") or []),
            "PodScheduled",
            "False",
            reason=reason,
            message=message,
            stamp=stamp,
        )
        for cond in status["conditions"]:
            cond.setdefault("lastProbeTime", None)
        updated = {**pod, "status": status}  # a status write reads metadata and status only
        await self._execute(("Pod", namespace_of(pod), name_of(pod)), [UpdateStatus(updated)])
        self._emit(pod, "Warning", "FailedScheduling", message)

    # ---------------------------------------------------------------- actions out

    async def _execute(self, key: Key, actions: list[Action]) -> None:
        for action in actions:
            if isinstance(action, Create):
                admitted = await self._admit(key, action.obj)
                if admitted is not None:
                    created = self._write_own(
                        admitted, functools.partial(self.storage.create, admitted), key
                    )
                    ref = controller_ref(admitted)
                    if created is not None and ref is not None:
                        self._create_failures.pop(str(ref.get("uid", "")), None)
            elif isinstance(action, Update):
                self._write_own(
                    action.obj,
                    functools.partial(
                        self.storage.update, action.obj, current=self._current(action.obj)
                    ),
                    key,
                )
            elif isinstance(action, UpdateStatus):
                # Status is the simulator's own: write it unconditionally (no resourceVersion).
                # Storage copies what it is given, so a shallow copy is enough here.
                obj = dict(action.obj)
                obj["metadata"] = {
                    k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"
                }
                self._write_own(
                    obj,
                    functools.partial(
                        self.storage.update_status, obj, current=self._current(obj)
                    ),
                    key,
                    status=True,
                )
            elif isinstance(action, Delete):
                self._write(
                    functools.partial(
                        self.storage.delete,
                        action.api_version,
                        action.kind,
                        action.name,
                        action.namespace or None,
                        propagation_policy=action.propagation_policy,
                        grace_period_seconds=action.grace_period_seconds,
                    ),
                    key,
                )
            elif isinstance(action, Requeue):
                self._after(action.after, key)
            elif isinstance(action, Emit):
                self._emit(action.obj, action.type, action.reason, action.message)

    def _current(self, obj: Obj) -> Obj | None:
        """The view's object of what *obj* updates (a built-in kind's): when it is still
        the stored one, the storage need not decode that again (it checks the bytes:
        see ``Storage.update_status``)."""
        kind = str(obj.get("kind", ""))
        if kind not in self._observed_kinds:
            return None
        return self.view.get(kind, namespace_of(obj), name_of(obj))

    async def _admit(self, key: Key, obj: Obj) -> Obj | None:
        """Run a create through the cluster's admission plugins (webhooks included), as
        kube-apiserver does for controllers' writes; ``None`` when it was refused."""
        if not self.admission_plugins:
            return obj
        try:
            info = self.storage.resolve(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
        except StatusError:
            return obj
        meta = obj.get("metadata") or {}
        ref = controller_ref(obj)
        controller = str((ref or {}).get("kind", "")).lower() or "kube"
        attrs = AdmissionAttributes(
            operation="CREATE",
            group=info.group,
            version=info.version,
            resource=info.resource,
            subresource="",
            kind=info.kind,
            namespace=str(meta.get("namespace", "") or ""),
            name=str(meta.get("name", "") or ""),
            user=f"system:serviceaccount:kube-system:{controller}-controller",
            groups=(
                "system:serviceaccounts",
                "system:serviceaccounts:kube-system",
                "system:authenticated",
            ),
        )
        current: Obj = obj
        try:
            for plugin in list(self.admission_plugins):
                mutated, _ = await plugin.mutate(attrs, current, None)
                if mutated is not None:
                    current = mutated
            for plugin in list(self.admission_plugins):
                await plugin.validate(attrs, current, None)
        except StatusError as err:
            owner = self.view.get(key[0], key[1], key[2]) if ref is not None else None
            if owner is not None:
                self._emit(owner, "Warning", "FailedCreate", f"Error creating: {err.message}")
                self._create_failures[uid_of(owner)] = err.message
            self._after(1.0, key)
            return None
        return current

    def _write_own(
        self, obj: Obj, call: Callable[[], Any], key: Key, *, status: bool = False
    ) -> Any:
        """:meth:`_write` of a create or update of *obj*; a watched kind's event is
        observed with the returned object, once the storage is done with it."""
        meta = obj.get("metadata") or {}
        kind = str(obj.get("kind", ""))
        if kind not in self._observed_kinds or self._own_write is not None:
            return self._write(call, key)
        name = "" if meta.get("generateName") and not meta.get("name") else str(meta["name"])
        self._own_write = (kind, str(meta.get("namespace") or ""), name, None)
        try:
            written = self._write(call, key)
        finally:
            own, self._own_write = self._own_write, None
        if own[3] is not None:
            self._observe(kind, own[3], written, own_status=status and own[3] == "MODIFIED")
        return written

    def _write(self, call: Callable[[], Any], key: Key | None = None) -> Any:
        try:
            return call()
        except StatusError as err:
            if err.code == 409 and err.reason == "Conflict" and key is not None:
                self._after(0.05, key)
            elif _namespace_terminating(err):
                # expected while a namespace empties: controllers keep trying, as in Kubernetes
                self._log.debug("simulator write refused", key=key, message=err.message)
            elif err.code not in (404, 409):
                self._log.warning(
                    "simulator write failed", key=key, code=err.code, message=err.message
                )
        return None

    def _emit(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        if not self.emit_events:
            return
        namespace = namespace_of(obj) or "default"
        stamp = rfc3339(self.clock.wall())
        dedup = (uid_of(obj), reason, message)
        seen = self._event_names.get(dedup)
        if seen is not None:
            name, count = seen
            with contextlib.suppress(StatusError):
                event = self.storage.get("v1", "Event", name, namespace)
                event["count"] = count + 1
                event["lastTimestamp"] = stamp
                self.storage.update(event)
                self._event_names[dedup] = (name, count + 1)
                return
        component = (
            "default-scheduler"
            if reason in ("Scheduled", "FailedScheduling")
            else (
                "kubelet"
                if obj.get("kind") == "Pod"
                else f"{str(obj.get('kind', '')).lower()}-controller"
            )
        )
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{name_of(obj)}.", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj.get("apiVersion", ""),
                "kind": obj.get("kind", ""),
                "name": name_of(obj),
                "namespace": namespace_of(obj),
                "uid": uid_of(obj),
                "resourceVersion": (obj.get("metadata") or {}).get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": type_,
            "count": 1,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "source": {"component": component},
            "reportingComponent": component,
            "reportingInstance": "",
        }
        created = self._write(functools.partial(self.storage.create, event))
        if created is not None:
            self._event_names[dedup] = (name_of(created), 1)
            if len(self._event_names) > 10000:
                self._event_names.clear()


def _unbound(pod: Obj) -> bool:
    """An unscheduled pod, not being deleted, that claims no DRA devices (a pod with
    resourceClaims waits on ResourceSlices and allocations the engine does not signal
    as cluster changes: it is still tried again after each of its status writes)."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and not spec.get("resourceClaims")
        and not meta.get("deletionTimestamp")
    )


def _namespace_terminating(err: StatusError) -> bool:
    causes = (err.details or {}).get("causes") or []
    return err.code == 403 and any(c.get("reason") == "NamespaceTerminating" for c in causes)


def _evicted_by_taint(pod: Obj, node: Obj) -> bool:
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") != "NoExecute":
            continue
        if not any(toleration_tolerates(t, taint) for t in tolerations):
            return True
    return False


def _internal_ip(node: Obj) -> str:
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP":
            return str(address.get("address", ""))
    return ""
