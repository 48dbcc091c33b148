"""NIMService's binding to the reconciler skeleton: facts, status vocabulary, model endpoints.

What a NIMService becomes and when it is Ready is decided by
``platforms.nimservice.NIMServiceContract`` (standalone or KServe, by
``spec.inferencePlatform``); the skeleton (``controllers.reconciler``) creates,
updates and prunes. This module adds what needs the cluster or NVIDIA's status
words (nim-operator.md §2):

- parse: the typed NIMService (identity and spec), kept until its generation
  changes; one the model refuses is ``Failed/ValidationFailed`` naming the
  fields, with nothing rendered, until it is edited;
- facts: the NIMCache, typed (missing → ``Failed/NIMCacheNotFound``, failed
  or not fitting its model → ``Failed/NIMCacheFailed``, not ready →
  ``NotReady/NIMCacheNotReady``, each without a requeue: the NIMCache watch
  wakes the service), the orchestrator
  from node labels, the live replica count under an HPA, and on KServe the
  deployment mode (InferenceService status, then KServe's
  ``inferenceservice-config``); while it is not ready, its pods, their
  Warning Events and the nodes, to name what blocks it (``blocker_facts``);
- status: ``state`` and the ``Ready``/``Failed`` conditions with NVIDIA's
  reasons, ``NIM_CACHE_PVC_CREATED`` when this pass created the PVC, and
  ``status.model`` (asking the NIM ``/v1/models`` once per endpoint);
- Events on status changes only: ``NotReady``/``Ready`` and the NIMCache
  reasons; a write failure is ``Failed`` with the object kind's reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

from api.apps.v1alpha1 import nimservice as api_ns
from api.apps.v1alpha1.common import STATE_FAILED, STATE_NOT_READY
from api.apps.v1alpha1.nimcache import NIMCache
from api.apps.v1alpha1.nimservice import NIMService
from controllers import nimservice_status as nss
from controllers.blocker_facts import gather_pod_facts
from controllers.nimservice_parse import (
    ParseMemo,
    by_generation,
    by_resource_version,
    identity_and_spec,
    invalid,
)
from controllers.reconciler import Event, Kind, KindReconciler
from controllers.wiring import SECRET, secret_without_values, spec_changed
from manifests.labels import INSTANCE_LABEL, PART_OF_LABEL, PART_OF_NIM_SERVICE
from nimctl_runtime.cache.cache import ByObject, Cache
from nimctl_runtime.client.errors import ApiError, NotFound
from nimctl_runtime.client.http1 import Pool
from nimctl_runtime.client.interfaces import EventRecorder, KeyReader, Reader, Writer
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import (
    OWNER_UID_INDEX,
    Obj,
    controller_of,
    dig,
    name_of,
    namespace_of,
    owner_uid_index,
    set_condition,
    uid_of,
)
from nimctl_runtime.reconcile import Request, Result
from platforms.capabilities import (
    COMPUTE_DOMAIN,
    GVK,
    INFERENCE_SERVICE,
    RESOURCE_CLAIM_TEMPLATE,
    Capabilities,
)
from platforms.contract import Observed, Readiness, ReconcileError
from platforms.nimservice import (
    API_VERSION,
    KIND,
    NOT_READY_REQUEUE,
    OPTIONAL_OWNED,
    NIMServiceContract,
    platform_of,
)
from platforms.parsing import InvalidResource, parse
from platforms.standalone import multinode
from platforms.standalone.context import RenderContext
from platforms.standalone.inputs import given

NIMCACHE_KIND = "NIMCache"
FINALIZER = api_ns.FINALIZER
NIMCACHE_INDEX = "spec.storage.nimCache.name"
RECORDER_NAME = "nimservice-controller"
KSERVE_CONFIG = "inferenceservice-config"
RESOURCE_CLAIM: GVK = ("resource.k8s.io/v1", "ResourceClaim")

__all__ = [
    "API_VERSION",
    "FAILURE_REASONS",
    "FINALIZER",
    "KIND",
    "NIMCACHE_INDEX",
    "NOT_READY_REQUEUE",
    "RECORDER_NAME",
    "HttpModelQuery",
    "ModelQuery",
    "NIMServiceKind",
    "NIMServiceReconciler",
    "cache_secrets_without_values",
    "detect_orchestrator",
    "dra_watches",
    "http_model_query",
    "late_owner_watch",
    "nimcache_name_index",
    "nimservice_of_pod",
    "pod_selectors",
    "proxy_model_query",
    "spec_changed",
]

# Which failure reason goes with a failed write of each kind (§2.3).
FAILURE_REASONS = {
    "ServiceAccount": api_ns.REASON_SERVICE_ACCOUNT_FAILED,
    "Role": api_ns.REASON_ROLE_FAILED,
    "RoleBinding": api_ns.REASON_ROLE_BINDING_FAILED,
    "Service": api_ns.REASON_SERVICE_FAILED,
    "Ingress": api_ns.REASON_INGRESS_FAILED,
    "HTTPRoute": api_ns.REASON_HTTPROUTE_FAILED,
    "GRPCRoute": api_ns.REASON_GRPCROUTE_FAILED,
    "HorizontalPodAutoscaler": api_ns.REASON_HPA_FAILED,
    "ServiceMonitor": api_ns.REASON_SERVICE_MONITOR_FAILED,
    "ConfigMap": api_ns.REASON_CONFIGMAP_FAILED,
    "Secret": api_ns.REASON_SECRET_FAILED,
    "Deployment": api_ns.REASON_DEPLOYMENT_FAILED,
    "LeaderWorkerSet": api_ns.REASON_LEADER_WORKER_SET_FAILED,
    "ResourceClaimTemplate": api_ns.REASON_RESOURCE_CLAIM_TEMPLATE_FAILED,
    "InferencePool": api_ns.REASON_INFERENCE_POOL_FAILED,
    "InferenceService": api_ns.REASON_INFERENCE_SERVICE_FAILED,
    "ComputeDomain": api_ns.REASON_COMPUTE_DOMAIN_FAILED,
}

ModelQuery = Callable[[Obj, str], Awaitable[str]]
"""``(nimservice, cluster_endpoint) -> model name``; raises when the NIM cannot be asked."""


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


def pod_selectors(name: str) -> list[dict[str, str]]:
    """Label selectors of a NIMService's pods: the Deployment's, the LWS's, KServe's."""
    return [
        {"app": name},
        {"app": f"{name}-lws"},
        {"serving.kserve.io/inferenceservice": name},
    ]


def nimservice_of_pod(pod: Mapping[str, Any]) -> str | None:
    """The NIMService a pod runs for: its ``app.kubernetes.io/instance`` label, on
    pods labelled part of a NIM service (Deployment and LWS pods alike)."""
    labels = dig(pod, "metadata", "labels", default={}) or {}
    if labels.get(PART_OF_LABEL) != PART_OF_NIM_SERVICE:
        return None
    name = labels.get(INSTANCE_LABEL)
    return str(name) if name else None


def nimcache_name_index(obj: Mapping[str, Any]) -> list[str]:
    """Index function: the NIMCache a NIMService uses (``spec.storage.nimCache.name``)."""
    name = dig(obj, "spec", "storage", "nimCache", "name")
    return [str(name)] if name else []


async def _ask_model(session: Any, endpoint: str) -> str:
    base = endpoint.rstrip("/") if "://" in endpoint else f"http://{endpoint}"
    async with session.get(f"{base}/v1/models") as resp:
        if resp.status != 404:
            resp.raise_for_status()
            return nss.model_name_from_models(await resp.text())
    async with session.get(f"{base}/v1/metadata") as resp:
        if resp.status == 404:
            return ""
        resp.raise_for_status()
        return nss.model_name_from_metadata(await resp.text())


async def http_model_query(nimservice: Obj, endpoint: str) -> str:
    """Ask the NIM which model it serves: ``GET /v1/models``, then ``/v1/metadata`` on 404.

    ``endpoint`` is ``host:port`` (a Service) or a URL (KServe's ``address.url``).
    The caller bounds it (``NIMServiceKind.model_query_timeout``). One session
    per call: for one-off use; the operator uses :class:`HttpModelQuery`.
    """
    import aiohttp

    async with aiohttp.ClientSession() as session:
        return await _ask_model(session, endpoint)


def _plain_http(endpoint: str) -> tuple[str, int, str] | None:
    """``(host, port, path prefix)`` of a plain-HTTP endpoint (``host:port`` or an
    ``http://`` URL); None for any other scheme (``https://``: KServe with TLS)."""
    if "://" not in endpoint:
        host, _, port = endpoint.rpartition(":")
        if not host or not port.isdigit():
            return None
        return host.strip("[]"), int(port), ""
    url = urlsplit(endpoint)
    if url.scheme != "http" or not url.hostname:
        return None
    try:
        url_port = url.port or 80
    except ValueError:
        return None
    return url.hostname, url_port, url.path.rstrip("/")


async def _ask_model_lean(pool: Pool, host: str, port: int, prefix: str) -> str:
    """:func:`_ask_model` over one kept connection of the client's HTTP/1.1 transport."""
    authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    async def get(path: str) -> tuple[int, str]:
        head = (
            f"GET {prefix}{path} HTTP/1.1\r\nHost: {authority}\r\n"
            "Accept: application/json\r\nUser-Agent: nimctl\r\n\r\n"
        ).encode()
        resp = await pool.request(head, None, time_limit=None)
        if resp.status >= 400 and resp.status != 404:
            raise RuntimeError(f"GET {path}: HTTP {resp.status}")
        return resp.status, resp.body.decode("utf-8", "replace")

    status, text = await get("/v1/models")
    if status != 404:
        return nss.model_name_from_models(text)
    status, text = await get("/v1/metadata")
    return "" if status == 404 else nss.model_name_from_metadata(text)


class HttpModelQuery:
    """:func:`http_model_query` as the operator runs it: plain HTTP over the client's
    lean HTTP/1.1 transport (``nimctl_runtime.client.http1``), other schemes over one
    aiohttp session kept for the process's life.

    Each NIM is asked once per endpoint, so a query opens one connection, sends
    ``/v1/models`` (and ``/v1/metadata`` on 404) over it and closes it: an aiohttp
    request built a ``ClientRequest``, a connector lookup, a resolver call and a
    happy-eyeballs connect per NIMService (3-4% of the operator's busy samples
    while it created 500; docs/benchmarks.md). A session per query, as before
    that, set up a pool, resolver and timers for every NIMService. The session
    (``https://`` endpoints only) is opened on first use and closed, with any
    connection still open, when the manager stops this Runnable.
    ``sessions_opened`` and ``connections_made`` count what it opened.
    """

    needs_leader_election = False
    name = "nim-model-query"

    def __init__(self) -> None:
        self._session: Any = None
        self._pools: set[Pool] = set()
        self.sessions_opened = 0
        self.connections_made = 0

    def _current(self) -> Any:
        import aiohttp

        session = self._session
        loop = asyncio.get_running_loop()
        if session is None or session.closed or getattr(session, "_loop", loop) is not loop:
            session = aiohttp.ClientSession()
            self._session = session
            self.sessions_opened += 1
        return session

    async def __call__(self, nimservice: Obj, endpoint: str) -> str:
        target = _plain_http(endpoint)
        if target is None:
            return await _ask_model(self._current(), endpoint)
        host, port, prefix = target
        pool = Pool(host, port, limit=1)
        self._pools.add(pool)
        try:
            return await _ask_model_lean(pool, host, port, prefix)
        finally:
            self.connections_made += pool.connections_made
            self._pools.discard(pool)
            pool.close()

    @property
    def open_connections(self) -> int:
        """Plain-HTTP queries in flight, each holding at most one connection (none
        once every query returned)."""
        return len(self._pools)

    async def close(self) -> None:
        for pool in list(self._pools):
            pool.close()
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()

    async def run(self, stop: asyncio.Event) -> None:
        try:
            await stop.wait()
        finally:
            await self.close()


def proxy_model_query(client: Any) -> ModelQuery:
    """Ask the NIM through kube-apiserver's Service proxy: for an operator outside the
    cluster (``nimctl local``), where the Service's cluster IP is not reachable.

    ``client`` is a runtime ``Client``. KServe's URL endpoints are not proxied
    (the query raises; the caller falls back to the cached profile's model).
    """

    async def query(nimservice: Obj, endpoint: str) -> str:
        if "://" in endpoint:
            raise ValueError("only a Service endpoint (host:port) is asked through the proxy")
        port = endpoint.rsplit(":", 1)[-1]
        ns, name = namespace_of(nimservice), name_of(nimservice)
        path = f"/api/v1/namespaces/{ns}/services/{name}:{port}/proxy/v1/models"
        return nss.model_name_from_models(await client.request("GET", path))

    return query


def _ingress_enabled(cr: NIMService) -> bool:
    expose = cr.spec.expose
    if expose.ingress is not None and expose.ingress.enabled:
        return True
    return expose.router is not None and expose.router.ingress is not None


def _failed_message(nimcache: NIMCache) -> str:
    conds = (nimcache.status.conditions if nimcache.status is not None else None) or []
    for c in conds:
        if c.get("type") == "Failed" and c.get("status") == "True":
            return str(c.get("message", ""))
    for c in conds:
        if c.get("type") == "NIM_CACHE_JOB_COMPLETED" and c.get("status") == "False":
            return str(c.get("message", ""))
    return ""


def _cache_blocker(nimcache: NIMCache) -> str:
    """What the NIMCache says it waits on (its ``NIM_CACHE_JOB_PENDING`` blocker), or ""."""
    conds = (nimcache.status.conditions if nimcache.status is not None else None) or []
    for c in conds:
        if (
            c.get("type") == "NIM_CACHE_JOB_PENDING"
            and c.get("status") == "True"
            and c.get("reason") not in (None, "", "JobPending")
        ):
            return str(c.get("message") or "")
    return ""


def _model_from_cache(nimcache: NIMCache | None, nimservice: NIMService) -> str:
    """Fallback model name when the NIM cannot be asked: the cached profile's model."""
    if nimcache is None or nimcache.status is None:
        return ""
    profiles = nimcache.status.profiles or []
    wanted = nimservice.spec.storage.nim_cache.profile
    for p in profiles:
        if wanted and p.name == wanted and p.model:
            return p.model
    for p in profiles:
        if p.model:
            return p.model
    return ""


def _kserve_default_mode(config: Mapping[str, Any] | None) -> str | None:
    """``deploy.defaultDeploymentMode`` from KServe's ``inferenceservice-config`` ConfigMap."""
    raw = dig(config, "data", "deploy")
    if not raw:
        return None
    try:
        deploy = json.loads(raw)
    except ValueError:
        return None
    mode = deploy.get("defaultDeploymentMode") if isinstance(deploy, dict) else None
    return str(mode) if mode else None


#: NIMService models kept parsed (the most recently reconciled; see ``ParseMemo``).
PARSED_MODELS_KEPT = 256


class NIMServiceKind(Kind[NIMService, RenderContext]):
    """NIMService: facts from the cache, NVIDIA's status words, model endpoints.

    ``parse`` keeps each NIMService's model until its generation changes and
    reports one that does not fit the model as ``Failed``/``ValidationFailed``
    (``controllers.nimservice_parse``); a NIMCache it uses is parsed once per
    resourceVersion.
    """

    api_version = API_VERSION
    kind = KIND
    # NVIDIA's finalizer cleans nothing up and keeps CRs from being deleted
    # once the operator is gone: nimctl adds none and removes it where found.
    finalizer = None
    stale_finalizers = (FINALIZER,)
    # The MPI SSH key Secret: created once with a generated key and never
    # updated, as NVIDIA's; the cache holds Secrets without their values
    # (``cache_secrets_without_values``).
    create_only = frozenset({"PersistentVolumeClaim", "Secret"})

    def __init__(
        self,
        *,
        capabilities: Capabilities,
        model_query: ModelQuery | None = None,
        model_query_timeout: float = 5.0,
        operator_version: str = "",
        orchestrator: str | None = None,
        kserve_namespace: str | None = None,
        read_events: bool = False,
    ) -> None:
        self.contract = NIMServiceContract()
        #: Warning Events are read from the cache (``blocker_facts.warning_event_cache``
        #: set up the informer); off where no such informer was configured.
        self.read_events = read_events
        self.capabilities = capabilities
        self.model_query = model_query
        self.model_query_timeout = model_query_timeout
        self.operator_version = operator_version
        self.orchestrator = orchestrator
        self.kserve_namespace = kserve_namespace or os.environ.get("KSERVE_NAMESPACE", "kserve")
        self._log = get_logger("controllers.nimservice")
        self.parsed: ParseMemo[NIMService] = ParseMemo(
            lambda o: parse(NIMService, identity_and_spec(o), stored=True),
            by_generation,
            limit=PARSED_MODELS_KEPT,
        )
        self.nimcaches: ParseMemo[NIMCache] = ParseMemo(
            lambda o: parse(NIMCache, o, stored=True), by_resource_version
        )

    def parse(self, obj: Obj) -> NIMService:
        try:
            return self.parsed.get(obj)
        except InvalidResource as err:
            raise invalid(err, api_ns.REASON_VALIDATION_FAILED) from None

    def forget(self, namespace: str, name: str) -> None:
        """Drop what is kept about a NIMService that is gone."""
        self.parsed.forget(namespace, name)

    async def gather(self, cr: NIMService, obj: Obj, reader: Reader) -> RenderContext:
        namespace = namespace_of(obj)
        nimcache, nimcache_blocked = await self._nimcache(cr, namespace, reader)
        if self.orchestrator is None:
            try:
                all_nodes = await reader.list("v1", "Node")
            except ApiError:
                all_nodes = []
            self.orchestrator = detect_orchestrator(all_nodes)
        claims, compute_domain, cd_template = await self._dra_facts(cr, obj, reader)
        status_mode = default_mode = None
        if platform_of(cr) == "kserve" and self.capabilities.has(INFERENCE_SERVICE):
            isvc = await _get(reader, *INFERENCE_SERVICE, name_of(obj), namespace)
            status_mode = dig(isvc, "status", "deploymentMode")
            config = await _get(reader, "v1", "ConfigMap", KSERVE_CONFIG, self.kserve_namespace)
            default_mode = _kserve_default_mode(config)
        return RenderContext(
            nimcache=nimcache,
            capabilities=self.capabilities,
            orchestrator=self.orchestrator,
            operator_version=self.operator_version,
            kserve_status_mode=status_mode,
            kserve_default_mode=default_mode,
            resource_claims=claims,
            compute_domain=compute_domain,
            compute_domain_claim_template=cd_template,
            nimcache_blocked=nimcache_blocked,
        )

    async def blocker_facts(
        self, cr: NIMService, obj: Obj, facts: RenderContext, reader: Reader
    ) -> RenderContext:
        """The pods, their Warning Events and (a pod waiting for a GPU) the nodes: read
        only while the service is not ready, to name what blocks it (issue 25)."""
        pods, events, nodes = await gather_pod_facts(
            reader, namespace_of(obj), pod_selectors(name_of(obj)), events=self.read_events
        )
        return dataclasses.replace(facts, pods=pods, events=events, nodes=nodes)

    async def _dra_facts(
        self, cr: NIMService, obj: Obj, reader: Reader
    ) -> tuple[tuple[Obj, ...], Obj | None, str | None]:
        """The namespace's ResourceClaims, the ComputeDomain used and its channel template."""
        namespace = namespace_of(obj)
        mn = cr.spec.multi_node
        cd = mn.compute_domain if mn is not None and given(mn.compute_domain) else None
        claims: tuple[Obj, ...] = ()
        if (cr.spec.dra_resources or cd is not None) and self.capabilities.has(
            RESOURCE_CLAIM_TEMPLATE
        ):
            try:
                claims = tuple(await reader.list(*RESOURCE_CLAIM, namespace))
            except ApiError:
                claims = ()
        compute_domain = template = None
        if cd is not None and self.capabilities.has(COMPUTE_DOMAIN):
            cd_name = name_of(obj) if cd.create else (cd.name or "")
            compute_domain = await _get(reader, *COMPUTE_DOMAIN, cd_name, namespace)
            if not cd.create and compute_domain is not None:
                template = dig(compute_domain, "spec", "channel", "resourceClaimTemplate", "name")
        return claims, compute_domain, str(template) if template else None

    async def _nimcache(
        self, cr: NIMService, namespace: str, reader: Reader
    ) -> tuple[NIMCache | None, Readiness | None]:
        """The Ready NIMCache the service names, or why it cannot be used yet.

        Missing, failed or not ready is not an error of the pass: the render
        then makes what does not need the cache and reports the reason.
        """
        cache_name = cr.spec.storage.nim_cache.name
        if not cache_name:
            return None, None
        stored = await _get(reader, API_VERSION, NIMCACHE_KIND, cache_name, namespace)
        if stored is None:
            self.nimcaches.forget(namespace, cache_name)
            return None, Readiness(
                STATE_FAILED,
                api_ns.REASON_NIMCACHE_NOT_FOUND,
                f"NIMCache {cache_name} not found",
                failed=True,
            )
        try:
            nimcache = self.nimcaches.get(stored)
        except InvalidResource as err:
            return None, Readiness(
                STATE_FAILED, api_ns.REASON_NIMCACHE_FAILED, str(err), failed=True
            )
        state = (nimcache.status.state if nimcache.status is not None else None) or ""
        if state == "Failed":
            return None, Readiness(
                STATE_FAILED,
                api_ns.REASON_NIMCACHE_FAILED,
                _failed_message(nimcache),
                failed=True,
            )
        if state != "Ready":
            waiting = _cache_blocker(nimcache)
            return None, Readiness(
                STATE_NOT_READY,
                api_ns.REASON_NIMCACHE_NOT_READY,
                f"NIMCache {cache_name} not ready{f': {waiting}' if waiting else ''}",
                # what the cache waits on is a blocker of its own: written at once
                blocker=(api_ns.REASON_NIMCACHE_NOT_READY, waiting) if waiting else None,
            )
        if nimcache.status is None or not nimcache.status.pvc:
            raise ReconcileError(f"missing PVC for the nimcache instance {cache_name}")
        return nimcache, None

    def materialize(self, obj: Obj) -> Obj:
        """The MPI SSH key Secret gets its freshly generated key when it is created."""
        if obj.get("kind") == "Secret" and name_of(obj).endswith("-ssh-pk"):
            return multinode.with_generated_key(obj)
        return obj

    def memo_key(self, cr: NIMService, obj: Obj, facts: RenderContext) -> tuple[Any, ...] | None:
        generation = dig(obj, "metadata", "generation")
        if generation is None:
            return None
        cache_meta = facts.nimcache.metadata if facts.nimcache is not None else None
        return (
            uid_of(obj),
            generation,
            cache_meta.uid if cache_meta is not None else None,
            cache_meta.resource_version if cache_meta is not None else None,
            facts.orchestrator,
            facts.kserve_status_mode,
            facts.kserve_default_mode,
            facts.compute_domain_claim_template,
        )

    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        if readiness.ready:
            st = nss.set_ready(old, readiness.message)
        elif readiness.failed:
            st = nss.set_failed(old, readiness.reason, readiness.message)
        else:
            st = nss.set_not_ready(old, readiness.reason, readiness.message)
        for field_name in ("draResourceStatuses", "computeDomainStatus"):
            if field_name in readiness.details:  # kept current on every pass that renders
                st[field_name] = readiness.details[field_name]
        if any(kind == "PersistentVolumeClaim" for _, kind, _ in observed.created):
            st["conditions"] = set_condition(
                st.get("conditions"),
                api_ns.CONDITION_PVC_CREATED,
                "True",
                api_ns.REASON_PVC_CREATED,
                "The PVC has been created for storing NIM",
            )
        return st

    async def complete_status(
        self, cr: NIMService, obj: Obj, facts: RenderContext, status: Obj, observed: Observed
    ) -> Obj:
        """``status.model``: cluster and external endpoints, and the model the NIM serves."""
        name = name_of(obj)
        if platform_of(cr) == "kserve":
            # KServe's addresses (§2.12): status.address.url inside, status.url outside.
            isvc = observed.get(*INFERENCE_SERVICE, name) or {}
            cluster = str(dig(isvc, "status", "address", "url", default="") or "")
            external = str(dig(isvc, "status", "url", default="") or "")
        else:
            port = cr.spec.expose.service.port
            service = observed.get("v1", "Service", name)
            ingress = observed.get("networking.k8s.io/v1", "Ingress", name)
            enabled = _ingress_enabled(cr)
            cluster = nss.cluster_endpoint(service, port)
            external = nss.external_endpoint(
                name, service, ingress if enabled else None, port, ingress_enabled=enabled
            )
        previous = (obj.get("status") or {}).get("model") or {}
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
                    namespace=namespace_of(obj),
                    name=name,
                    error=str(exc) or type(exc).__name__,
                )
        if not model_name:
            model_name = _model_from_cache(facts.nimcache, cr)
        out = dict(status)
        out["model"] = {
            "name": model_name,
            "clusterEndpoint": cluster,
            "externalEndpoint": external,
        }
        return out

    def event(self, obj: Obj, readiness: Readiness) -> Event | None:
        name = name_of(obj)
        if readiness.ready:
            return nss.ready_event(name, readiness.message)
        if readiness.reason == api_ns.REASON_NOT_READY:
            return nss.not_ready_event(name, readiness.message)
        kind = "Warning" if readiness.failed or readiness.blocker else "Normal"
        return (kind, readiness.reason, readiness.message)

    def failure_reason(self, kind: str) -> str:
        return FAILURE_REASONS.get(kind, api_ns.REASON_FAILED)


def cache_secrets_without_values(cache: Cache) -> None:
    """Secrets (the MPI key a NIMService owns) are cached with key names only, never values.

    Call before the Secret informer exists (in the controller's setup).
    """
    cache.by_object.setdefault(SECRET, ByObject(transform=secret_without_values))


def dra_watches(
    cache: Reader, capabilities: Capabilities
) -> list[tuple[GVK, Callable[[Obj], Awaitable[list[Request]]]]]:
    """Watches that keep ``draResourceStatuses`` and ``computeDomainStatus`` current.

    A ResourceClaim wakes the NIMServices of its namespace that use DRA (or a
    ComputeDomain); a ComputeDomain the operator did not create wakes the
    NIMServices that name it (the ones it created are owned, hence watched).
    """

    async def users(namespace: str, wanted: Callable[[Obj], bool]) -> list[Request]:
        services = await cache.list(API_VERSION, KIND, namespace)
        return [Request(namespace, name_of(s)) for s in services if wanted(s)]

    async def claim_users(claim: Obj) -> list[Request]:
        return await users(
            namespace_of(claim),
            lambda s: bool(
                dig(s, "spec", "draResources") or dig(s, "spec", "multiNode", "computeDomain")
            ),
        )

    async def domain_users(domain: Obj) -> list[Request]:
        return await users(
            namespace_of(domain),
            lambda s: dig(s, "spec", "multiNode", "computeDomain", "name") == name_of(domain),
        )

    out: list[tuple[GVK, Callable[[Obj], Awaitable[list[Request]]]]] = []
    if capabilities.has(RESOURCE_CLAIM_TEMPLATE):
        out.append((RESOURCE_CLAIM, claim_users))
    if capabilities.has(COMPUTE_DOMAIN):
        out.append((COMPUTE_DOMAIN, domain_users))
    return out


async def _get(
    reader: Reader, api_version: str, kind: str, name: str, namespace: str | None
) -> Obj | None:
    try:
        return await reader.get(api_version, kind, name, namespace or None)
    except NotFound:
        return None
    except ApiError:
        return None


Discover = Callable[[], Awaitable[Capabilities]]
"""Asks the API server which optional kinds it serves now."""
WatchOwned = Callable[[GVK], Awaitable[None]]
"""Starts watching a kind installed after start for objects a NIMService controls."""


def late_owner_watch(cache: Cache, enqueue: Callable[[Request], None]) -> WatchOwned:
    """``watch_owned`` for a running controller: the owner index, then an informer handler
    that enqueues the controlling NIMService of every object of the kind."""

    async def watch(gvk: GVK) -> None:
        api_version, kind = gvk
        with contextlib.suppress(ValueError):  # the index may exist already
            cache.add_index(api_version, kind, OWNER_UID_INDEX, owner_uid_index)
        informer = await cache.get_informer(api_version, kind)

        def handle(obj: Any) -> None:
            obj = getattr(obj, "obj", obj)  # a DeletedFinalStateUnknown carries the object
            ref = controller_of(obj) if isinstance(obj, Mapping) else None
            if ref and ref.get("kind") == KIND and ref.get("apiVersion") == API_VERSION:
                enqueue(Request(namespace_of(obj), str(ref.get("name", ""))))

        def on_update(old: Any, new: Any) -> None:
            handle(new)

        informer.add_event_handler(handle, on_update, handle)

    return watch


def crd_gvks(crd: Mapping[str, Any]) -> list[GVK]:
    """``(apiVersion, kind)`` of each version a CustomResourceDefinition serves."""
    spec = crd.get("spec") or {}
    kind = str((spec.get("names") or {}).get("kind", ""))
    return [
        (f"{spec.get('group')}/{v.get('name')}", kind)
        for v in spec.get("versions") or ()
        if v.get("served", True)
    ]


def crd_established(crd: Mapping[str, Any]) -> bool:
    for cond in dig(crd, "status", "conditions", default=[]) or []:
        if cond.get("type") == "Established":
            return bool(cond.get("status") == "True")
    return False


class NIMServiceReconciler(KindReconciler[NIMService, RenderContext]):
    """The skeleton running NIMService's contract (see ``NIMServiceKind``).

    Optional kinds are discovered while running, not only at start:
    ``crd_changed`` (the map function of a CustomResourceDefinition watch)
    notices an optional kind appearing or going, the next pass asks discovery
    again, starts watching a newly served kind (``watch_owned``; NVIDIA
    registers its InferenceService watch lazily too) and wakes every
    NIMService, so one waiting for, say, the LeaderWorkerSet CRD goes on.
    """

    def __init__(
        self,
        *,
        cache: Reader,
        client: Writer,
        api_reader: KeyReader,
        recorder: EventRecorder,
        capabilities: Capabilities | None = None,
        model_query: ModelQuery | None = None,
        model_query_timeout: float = 5.0,
        operator_version: str = "",
        use_finalizer: bool = True,
        orchestrator: str | None = None,
        discover: Discover | None = None,
        watch_owned: WatchOwned | None = None,
        read_events: bool = False,
    ) -> None:
        caps = capabilities or Capabilities.nothing()
        kind = NIMServiceKind(
            capabilities=caps,
            model_query=model_query,
            model_query_timeout=model_query_timeout,
            operator_version=operator_version,
            orchestrator=orchestrator,
            read_events=read_events,
        )
        super().__init__(
            kind=kind,
            cache=cache,
            client=client,
            api_reader=api_reader,
            recorder=recorder,
            capabilities=caps,
            use_finalizer=use_finalizer,
        )
        self.nimservice_kind = kind
        self.discover = discover
        self.watch_owned = watch_owned
        self._capabilities_stale = False
        self._watched: set[GVK] = set(OPTIONAL_OWNED) & set(caps.gvks)

    async def crd_changed(self, crd: Obj) -> list[Request]:
        """CRD watch: an optional kind came or went -> rediscover, wake every NIMService."""
        changed = [
            gvk
            for gvk in crd_gvks(crd)
            if gvk in OPTIONAL_OWNED
            and (crd_established(crd) and not dig(crd, "metadata", "deletionTimestamp"))
            != self.capabilities.has(gvk)
        ]
        if not changed:
            return []
        self._capabilities_stale = True
        services = await self.cache.list(API_VERSION, KIND)
        return [Request(namespace_of(s), name_of(s)) for s in services]

    async def refresh_capabilities(self) -> None:
        """Ask discovery again; start watching optional kinds served since the last time."""
        self._capabilities_stale = False
        if self.discover is None:
            return
        caps = await self.discover()
        self.capabilities = caps
        self.nimservice_kind.capabilities = caps
        for gvk in OPTIONAL_OWNED:
            if caps.has(gvk) and gvk not in self._watched and self.watch_owned is not None:
                await self.watch_owned(gvk)
                self._watched.add(gvk)
                self._log.info("watching a kind installed after start", kind=gvk[1])

    async def reconcile(self, request: Request) -> Result:
        if self._capabilities_stale:
            await self.refresh_capabilities()
        return await super().reconcile(request)
