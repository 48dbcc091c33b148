"""The NIMService reconciler: standalone platform, NVIDIA's wiring and status.

For each NIMService it resolves the NIMCache, asks ``platforms.standalone``
for the desired objects, creates or updates them by desired-object hash,
deletes the optional objects a spec change turned off (Ingress, HTTPRoute,
GRPCRoute, HPA and, unlike NVIDIA, the ServiceMonitor), and reports
``state`` and the ``Ready``/``Failed`` conditions with NVIDIA's reasons and
messages (nim-operator.md §2). It differs from NVIDIA's operator where that
one wastes the API server: a reconcile that finds nothing changed writes
nothing (no status update, no Event), Events are sent on transitions only,
and a persistent failure writes its status once and then backs off.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from controllers import nimservice_status as nss
from controllers.conditions import set_condition
from controllers.sync import (
    ObjectReader,
    WriteLog,
    hpa_owned,
    owned_by,
    patch_finalizers,
    sync_object,
)
from nimctl_runtime.client.errors import ApiError, Conflict, NotFound
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.reconcile import Request, Result
from platforms.standalone.context import Capabilities
from platforms.standalone.errors import RenderError

Obj = dict[str, Any]

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMService"
NIMCACHE_KIND = "NIMCache"
FINALIZER = "finalizer.nimservice.apps.nvidia.com"
NIMCACHE_INDEX = "spec.storage.nimCache.name"
RECORDER_NAME = "nimservice-controller"
NOT_READY_REQUEUE = 30.0

# Optional objects: deleted when the spec no longer renders them.
INGRESS = ("networking.k8s.io/v1", "Ingress")
HTTPROUTE = ("gateway.networking.k8s.io/v1", "HTTPRoute")
GRPCROUTE = ("gateway.networking.k8s.io/v1", "GRPCRoute")
HPA = ("autoscaling/v2", "HorizontalPodAutoscaler")
SERVICEMONITOR = ("monitoring.coreos.com/v1", "ServiceMonitor")
OPTIONAL_KINDS: tuple[tuple[str, str], ...] = (INGRESS, HTTPROUTE, GRPCROUTE, HPA, SERVICEMONITOR)

# Kinds whose CRDs may be absent: discovery decides whether they are watched.
CRD_KINDS: tuple[tuple[str, str], ...] = (HTTPROUTE, GRPCROUTE, SERVICEMONITOR)

# Which failure reason goes with a failed write of each kind (§2.3).
FAILURE_REASONS = {
    "ServiceAccount": "ServiceAccountFailed",
    "Role": "RoleFailed",
    "RoleBinding": "RoleBindingFailed",
    "Service": "ServiceFailed",
    "Ingress": "IngressFailed",
    "HTTPRoute": "HTTPRouteFailed",
    "GRPCRoute": "GRPCRouteFailed",
    "HorizontalPodAutoscaler": "HPAFailed",
    "ServiceMonitor": "ServiceMonitorFailed",
    "ConfigMap": "ConfigMapFailed",
    "Secret": "SecretFailed",
    "Deployment": "DeploymentFailed",
    "PersistentVolumeClaim": "Failed",
}

ModelQuery = Callable[[Obj, str], Awaitable[str]]
"""``(nimservice, cluster_endpoint) -> model name``; raises when the NIM cannot be asked."""

RenderFn = Callable[[Obj, "RenderInputs"], Sequence[Obj]]


class Recorder(Protocol):
    def event(self, obj: Obj, type: str, reason: str, message: str) -> None: ...


class Lister(Protocol):
    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Obj: ...

    async def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        *,
        label_selector: Any = None,
        index: tuple[str, str] | None = None,
    ) -> list[Obj]: ...


class Writer(Protocol):
    async def create(self, obj: Obj) -> Obj: ...

    async def update(self, obj: Obj) -> Obj: ...

    async def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Any,
        *,
        namespace: str | None = None,
        patch_type: Literal["merge", "json", "strategic", "apply"] = "merge",
        subresource: str | None = None,
    ) -> Obj: ...

    async def delete(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Any: ...


@dataclass(frozen=True)
class RenderInputs:
    """What the reconciler looked up before rendering (rendering itself does no I/O)."""

    nimcache: Obj | None
    capabilities: Capabilities
    orchestrator: str
    operator_version: str = ""
    current_replicas: int | None = None


class SyncError(Exception):
    """A step failed; ``reason`` is the NIMService ``Failed`` condition reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def detect_orchestrator(nodes: Sequence[Mapping[str, Any]]) -> str:
    """The Kubernetes distribution, from the first node label that names one (§2.2 step 5)."""
    checks = (
        ("node.vmware.com/tkg", "TKGS"),
        ("vsphere-tanzu", "TKGS"),
        ("node.openshift.io/os_id", "OpenShift"),
        ("cloud.google.com/gke-nodepool", "GKE"),
        ("eks.amazonaws.com/nodegroup", "EKS"),
        ("kubernetes.azure.com/cluster", "AKS"),
        ("oke.oraclecloud.com/cluster", "OKE"),
        ("ezmeral.hpe.com/cluster", "Ezmeral"),
        ("rke.cattle.io/version", "RKE"),
    )
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        for label, name in checks:
            if label in labels:
                return name
    return "Kubernetes"


def nimcache_name_index(obj: Obj) -> list[str]:
    """Index function: the NIMCache a NIMService uses (``spec.storage.nimCache.name``)."""
    name = (((obj.get("spec") or {}).get("storage") or {}).get("nimCache") or {}).get("name")
    return [str(name)] if name else []


def spec_changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """NVIDIA's update filter: spec changed, or deletion started."""
    if old.get("spec") != new.get("spec"):
        return True
    return bool((new.get("metadata") or {}).get("deletionTimestamp")) and not bool(
        (old.get("metadata") or {}).get("deletionTimestamp")
    )


def _name_ns(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("name", "")), str(meta.get("namespace") or "")


def _service_port(ns: Mapping[str, Any]) -> int:
    svc = ((ns.get("spec") or {}).get("expose") or {}).get("service") or {}
    return int(svc.get("port") or 8000)


def _ingress_enabled(ns: Mapping[str, Any]) -> bool:
    expose = (ns.get("spec") or {}).get("expose") or {}
    if (expose.get("ingress") or {}).get("enabled"):
        return True
    return bool(((expose.get("router") or {}).get("ingress") or {}).get("ingressClass"))


def _autoscaling(ns: Mapping[str, Any]) -> bool:
    return bool(((ns.get("spec") or {}).get("scale") or {}).get("enabled"))


async def http_model_query(nimservice: Obj, endpoint: str) -> str:
    """Ask the NIM which model it serves: ``GET /v1/models``, then ``/v1/metadata`` on 404.

    The caller bounds it (``NIMServiceReconciler.model_query_timeout``).
    """
    import aiohttp

    async with aiohttp.ClientSession() as session:
        async with session.get(f"http://{endpoint}/v1/models") as resp:
            if resp.status != 404:
                resp.raise_for_status()
                return nss.model_name_from_models(await resp.text())
        async with session.get(f"http://{endpoint}/v1/metadata") as resp:
            if resp.status == 404:
                return ""
            resp.raise_for_status()
            return nss.model_name_from_metadata(await resp.text())


def default_render(nimservice: Obj, inputs: RenderInputs) -> Sequence[Obj]:
    """``platforms.standalone.render`` of the NIMService with what was looked up."""
    from platforms.standalone import render
    from platforms.standalone.context import RenderContext

    ctx = RenderContext(
        nimcache=inputs.nimcache,
        capabilities=inputs.capabilities,
        orchestrator=inputs.orchestrator,
        operator_version=inputs.operator_version,
        current_replicas=inputs.current_replicas,
    )
    objects: Sequence[Obj] = render(nimservice, ctx)
    return objects


@dataclass
class _StatusMemo:
    """The status this process last wrote for a NIMService, and the RV it was written on."""

    base_rv: str
    status: Obj


@dataclass
class NIMServiceReconciler:
    """Reconciles NIMService objects on the standalone platform."""

    cache: Lister
    client: Writer
    api_reader: ObjectReader
    recorder: Recorder
    capabilities: Capabilities = field(default_factory=Capabilities.nothing)
    model_query: ModelQuery | None = None
    model_query_timeout: float = 5.0
    render: RenderFn = default_render
    operator_version: str = ""
    use_finalizer: bool = True
    orchestrator: str | None = None
    _writes: WriteLog = field(default_factory=WriteLog)
    _status: dict[tuple[str, str], _StatusMemo] = field(default_factory=dict)
    _renders: dict[tuple[str, str], tuple[tuple[Any, ...], str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._log = get_logger("controllers.nimservice")

    # -- entry point -----------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        namespace = request.namespace or ""
        try:
            obj = await self.cache.get(API_VERSION, KIND, request.name, namespace)
        except NotFound:
            self._status.pop((namespace, request.name), None)
            self._renders.pop((namespace, request.name), None)
            self._writes.forget_namespace_name(namespace, request.name)
            return Result()
        meta = obj.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            # Owned objects go by garbage collection; never recreate them while deleting.
            if FINALIZER in finalizers:
                await self._patch_finalizers(obj, [f for f in finalizers if f != FINALIZER])
            return Result()
        if self.use_finalizer and FINALIZER not in finalizers:
            try:
                obj = await self._patch_finalizers(obj, [*finalizers, FINALIZER])
            except Conflict:
                return Result(requeue=True)

        old_status = copy.deepcopy(obj.get("status") or {})
        try:
            status, result, event = await self._sync(obj, old_status)
        except Conflict:
            return Result(requeue=True)
        except SyncError as exc:
            status = nss.set_failed(old_status, exc.reason, exc.message)
            if await self._write_status(obj, status):
                name = meta.get("name", "")
                self.recorder.event(
                    obj, "Warning", "ReconcileFailed", f"NIMService {name} failed, msg: {exc}"
                )
            raise
        if await self._write_status(obj, status) and event is not None:
            self.recorder.event(obj, *event)
        return result

    # -- steps -----------------------------------------------------------

    async def _sync(
        self, obj: Obj, old_status: Obj
    ) -> tuple[Obj, Result, tuple[str, str, str] | None]:
        name, namespace = _name_ns(obj)
        spec = obj.get("spec") or {}
        cache_name = ((spec.get("storage") or {}).get("nimCache") or {}).get("name")
        nimcache: Obj | None = None
        if cache_name:
            try:
                nimcache = await self.cache.get(API_VERSION, NIMCACHE_KIND, cache_name, namespace)
            except NotFound:
                msg = f"NIMCache {cache_name} not found"
                st = nss.set_failed(old_status, nss.REASON_NIMCACHE_NOT_FOUND, msg)
                return st, Result(), ("Warning", nss.REASON_NIMCACHE_NOT_FOUND, msg)
            cstate = (nimcache.get("status") or {}).get("state", "")
            if cstate == "Failed":
                msg = _failed_message(nimcache)
                st = nss.set_failed(old_status, nss.REASON_NIMCACHE_FAILED, msg)
                return st, Result(), ("Warning", nss.REASON_NIMCACHE_FAILED, msg)
            if cstate != "Ready":
                msg = f"NIMCache {cache_name} not ready"
                st = nss.set_not_ready(old_status, nss.REASON_NIMCACHE_NOT_READY, msg)
                return st, Result(), ("Normal", nss.REASON_NIMCACHE_NOT_READY, msg)
            if not (nimcache.get("status") or {}).get("pvc"):
                raise SyncError(
                    nss.REASON_FAILED, f"missing PVC for the nimcache instance {cache_name}"
                )

        if self.orchestrator is None:
            try:
                nodes = await self.cache.list("v1", "Node")
            except ApiError:
                nodes = []
            self.orchestrator = detect_orchestrator(nodes)
        autoscaling = _autoscaling(obj)
        current_replicas = None
        if autoscaling:
            live_deploy = await self._cached("apps/v1", "Deployment", name, namespace)
            if live_deploy is not None:
                current_replicas = (live_deploy.get("spec") or {}).get("replicas")
        inputs = RenderInputs(
            nimcache=nimcache,
            capabilities=self.capabilities,
            orchestrator=self.orchestrator,
            operator_version=self.operator_version,
            current_replicas=current_replicas,
        )
        desired = self._render_memoized(obj, inputs)

        deployment: Obj | None = None
        rendered: set[tuple[str, str, str]] = set()
        pvc_created = False
        skipped: list[str] = []
        for rendered_obj in desired:
            d = rendered_obj
            api_version, kind = str(d.get("apiVersion")), str(d.get("kind"))
            if (api_version, kind) in CRD_KINDS and not self.capabilities.has((api_version, kind)):
                skipped.append(kind)
                continue
            if kind == "Deployment" and autoscaling:
                d = hpa_owned(d)
            dname = str((d.get("metadata") or {}).get("name", ""))
            rendered.add((api_version, kind, dname))
            cached = await self._cached(api_version, kind, dname, namespace)
            try:
                out = await sync_object(
                    d,
                    cached=cached,
                    reader=self.api_reader,
                    writer=self.client,
                    log=self._writes,
                    create_only=kind == "PersistentVolumeClaim",
                    keep_live_replicas=kind == "Deployment" and autoscaling,
                )
            except Conflict:
                raise
            except ApiError as exc:
                reason = FAILURE_REASONS.get(kind, nss.REASON_FAILED)
                raise SyncError(reason, f"{kind} {dname}: {exc.message or exc}") from exc
            if kind == "PersistentVolumeClaim" and out.action == "created":
                pvc_created = True
            if kind == "Deployment":
                deployment = out.live
        await self._delete_turned_off(obj, rendered)

        if pvc_created:
            st = copy.deepcopy(old_status)
            st["conditions"] = set_condition(
                st.get("conditions"),
                "NIM_CACHE_PVC_CREATED",
                "True",
                "PVCCreated",
                "The PVC has been created for storing NIM",
            )
            st["state"] = nss.STATE_PVC_CREATED
            old_status = st

        msg, ready = nss.deployment_readiness(deployment)
        if not ready:
            st = nss.set_not_ready(old_status, nss.REASON_NOT_READY, msg)
            event = nss.not_ready_event(name, msg)
            return st, Result(requeue_after=NOT_READY_REQUEUE), event

        st = nss.set_ready(old_status, msg)
        st["model"] = await self._model_status(obj, nimcache, old_status)
        if skipped:
            self._log.info(
                "optional kinds not served by the cluster; skipped",
                namespace=namespace,
                name=name,
                kinds=sorted(set(skipped)),
            )
        return st, Result(), nss.ready_event(name, msg)

    def _render_memoized(self, obj: Obj, inputs: RenderInputs) -> list[Obj]:
        """Render, reusing the last result while nothing render reads has changed.

        Most reconciles (requeues of NotReady services, owned-object status
        changes) see the same spec and NIMCache: skipping the render keeps an
        idle operator cheap.
        """
        meta = obj.get("metadata") or {}
        name, namespace = _name_ns(obj)
        generation = meta.get("generation")
        key: tuple[Any, ...] | None = None
        if generation is not None:
            cache_meta = (inputs.nimcache or {}).get("metadata") or {}
            key = (
                meta.get("uid"),
                generation,
                cache_meta.get("uid"),
                cache_meta.get("resourceVersion"),
                inputs.current_replicas,
                inputs.orchestrator,
            )
            memo = self._renders.get((namespace, name))
            if memo is not None and memo[0] == key:
                restored: list[Obj] = json.loads(memo[1])
                return restored
        try:
            desired = list(self.render(obj, inputs))
        except (RenderError, ValueError) as exc:  # a spec problem the user must fix
            reason = str(getattr(exc, "reason", nss.REASON_FAILED))
            raise SyncError(reason, str(getattr(exc, "message", exc))) from exc
        if key is not None:
            # Kept as JSON: a third of the memory of the dicts, and faster to copy back.
            self._renders[(namespace, name)] = (key, json.dumps(desired, separators=(",", ":")))
        return desired

    async def _cached(self, api_version: str, kind: str, name: str, namespace: str) -> Obj | None:
        try:
            return await self.cache.get(api_version, kind, name, namespace)
        except NotFound:
            return None

    async def _delete_turned_off(self, obj: Obj, rendered: set[tuple[str, str, str]]) -> None:
        name, namespace = _name_ns(obj)
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        for api_version, kind in OPTIONAL_KINDS:
            if (api_version, kind) in CRD_KINDS and not self.capabilities.has((api_version, kind)):
                continue
            if (api_version, kind, name) in rendered:
                continue
            live = await self._cached(api_version, kind, name, namespace)
            if live is None or not owned_by(live, uid):
                continue
            try:
                await self.client.delete(api_version, kind, name, namespace)
            except NotFound:
                pass
            except ApiError as exc:
                reason = FAILURE_REASONS.get(kind, nss.REASON_FAILED)
                raise SyncError(reason, f"deleting {kind} {name}: {exc.message or exc}") from exc
            self._writes.forget((api_version, kind, namespace, name))

    async def _model_status(self, obj: Obj, nimcache: Obj | None, old_status: Obj) -> Obj:
        name, namespace = _name_ns(obj)
        port = _service_port(obj)
        service = await self._cached("v1", "Service", name, namespace)
        ingress = None
        if _ingress_enabled(obj):
            ingress = await self._cached(*INGRESS, name, namespace)
        cluster = nss.cluster_endpoint(service, port)
        external = nss.external_endpoint(
            name, service, ingress, port, ingress_enabled=_ingress_enabled(obj)
        )
        previous = old_status.get("model") or {}
        model_name = ""
        if previous.get("clusterEndpoint") == cluster and previous.get("name"):
            model_name = str(previous["name"])  # asked already; the endpoint did not move
        elif cluster and self.model_query is not None:
            try:
                model_name = await asyncio.wait_for(
                    self.model_query(obj, cluster), self.model_query_timeout
                )
            except Exception as exc:  # unreachable NIM: degrade, never fail the reconcile
                self._log.info(
                    "model query failed; status.model.name left empty",
                    namespace=namespace,
                    name=name,
                    error=str(exc) or type(exc).__name__,
                )
        if not model_name:
            model_name = _model_from_cache(nimcache, obj)
        return {"name": model_name, "clusterEndpoint": cluster, "externalEndpoint": external}

    # -- writes ------------------------------------------------------------

    async def _patch_finalizers(self, obj: Obj, finalizers: list[str]) -> Obj:
        return await patch_finalizers(self.client, API_VERSION, KIND, obj, finalizers)

    async def _write_status(self, obj: Obj, status: Obj) -> bool:
        """Write ``status`` unless the server already has it. True when written."""
        name, namespace = _name_ns(obj)
        meta = obj.get("metadata") or {}
        rv = str(meta.get("resourceVersion", ""))
        current = obj.get("status") or {}
        memo = self._status.get((namespace, name))
        if memo is not None and memo.base_rv == rv:
            current = memo.status  # the cache has not seen our last write yet
        if _same_status(current, status):
            return False
        patch = {"status": _status_patch(current, status)}
        updated = await self.client.patch(
            API_VERSION,
            KIND,
            name,
            patch,
            namespace=namespace,
            patch_type="merge",
            subresource="status",
        )
        del updated
        self._status[(namespace, name)] = _StatusMemo(base_rv=rv, status=copy.deepcopy(status))
        return True


def _same_status(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    keys = set(a) | set(b)
    return all(a.get(k) == b.get(k) for k in keys if k in b)


def _status_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> Obj:
    return {k: v for k, v in desired.items() if current.get(k) != v}


def _failed_message(nimcache: Mapping[str, Any]) -> str:
    conds = (nimcache.get("status") or {}).get("conditions") or []
    for c in conds:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return str(c.get("message", ""))
    for c in conds:
        if c.get("type") == "NIM_CACHE_JOB_COMPLETED" and c.get("status") == "False":
            return str(c.get("message", ""))
    return ""


def _model_from_cache(nimcache: Obj | None, nimservice: Obj) -> str:
    """Fallback model name when the NIM cannot be asked: the cached profile's model."""
    if not nimcache:
        return ""
    profiles = (nimcache.get("status") or {}).get("profiles") or []
    wanted = (((nimservice.get("spec") or {}).get("storage") or {}).get("nimCache") or {}).get(
        "profile"
    )
    for p in profiles:
        if wanted and p.get("name") == wanted and p.get("model"):
            return str(p["model"])
    for p in profiles:
        if p.get("model"):
            return str(p["model"])
    return ""
