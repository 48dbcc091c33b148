"""The NIMCache reconciler: download a NIM's model profiles into a PVC.

Steps, in NVIDIA's order (nim-operator.md §3.2): the namespace's shared
``nim-cache-sa`` / ``nim-cache-role`` / ``nim-cache-rolebinding``, the PVC,
the model-manifest extraction pod and its ``<name>-manifest`` ConfigMap,
profile selection (``controllers.nimcache_profiles``), the caching Job, and
the state machine ``PVC-Created -> Started -> Pending/InProgress -> Ready |
Failed`` (``controllers.nimcache_status``). Status is written only when it
changed and Events are sent on state changes only. The objects themselves
come from the pure builders in ``platforms.standalone`` (see
``NIMCacheBuilders``).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from controllers import nimcache_profiles as profiles_mod
from controllers import nimcache_status as ncs
from controllers.nimservice import detect_orchestrator
from controllers.sync import WriteLog, ensure_hash, patch_finalizers, sync_object
from nimctl_runtime.client.errors import ApiError, Conflict, NotFound
from nimctl_runtime.client.interfaces import EventRecorder, KeyReader, Reader, Writer
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.reconcile import Request, Result
from platforms.standalone.errors import RenderError

Obj = dict[str, Any]

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMCache"
FINALIZER = "finalizer.nimcache.apps.nvidia.com"
RECORDER_NAME = "nimcache-controller"
MANIFEST_POD_REQUEUE = 30.0

PodLogReader = Callable[[str, str, str], Awaitable[str]]
"""``(namespace, pod, container) -> log text``."""


class NIMCacheBuilders(Protocol):
    """Pure builders of a NIMCache's objects (implemented in ``platforms.standalone``)."""

    def service_account(self, nimcache: Obj) -> Obj: ...

    def role(self, nimcache: Obj) -> Obj: ...

    def role_binding(self, nimcache: Obj) -> Obj: ...

    def pvc(self, nimcache: Obj) -> Obj: ...

    def pvc_name(self, nimcache: Obj) -> str: ...

    def manifest_pod(self, nimcache: Obj, orchestrator: str) -> Obj: ...

    def manifest_configmap(self, nimcache: Obj, manifest_yaml: str) -> Obj: ...

    def job(self, nimcache: Obj, profiles: list[str], orchestrator: str) -> Obj: ...


class BuildError(Exception):
    """A builder refused the spec (e.g. deprecated certConfig, no profiles selected)."""


class StandaloneNIMCacheBuilders:
    """``NIMCacheBuilders`` backed by ``platforms.standalone.nimcache``."""

    def service_account(self, nimcache: Obj) -> Obj:
        from platforms.standalone import nimcache as b

        return b.service_account(_name_ns(nimcache)[1])

    def role(self, nimcache: Obj) -> Obj:
        from platforms.standalone import nimcache as b

        proxy = bool((nimcache.get("spec") or {}).get("proxy"))
        return b.role(_name_ns(nimcache)[1], proxy=proxy)

    def role_binding(self, nimcache: Obj) -> Obj:
        from platforms.standalone import nimcache as b

        return b.role_binding(_name_ns(nimcache)[1])

    def pvc(self, nimcache: Obj) -> Obj:
        from platforms.standalone import nimcache as b

        built = b.build_pvc(nimcache)
        if built is None:
            raise BuildError(f"NIMCache {_name_ns(nimcache)[0]}: no PVC to create")
        return built

    def pvc_name(self, nimcache: Obj) -> str:
        from platforms.standalone import nimcache as b

        return b.pvc_name(nimcache)

    def manifest_pod(self, nimcache: Obj, orchestrator: str) -> Obj:
        from platforms.standalone import nimcache as b

        return b.manifest_pod(nimcache, orchestrator=orchestrator)

    def manifest_configmap(self, nimcache: Obj, manifest_yaml: str) -> Obj:
        from platforms.standalone import nimcache as b

        return b.manifest_config_map(nimcache, manifest_yaml)

    def job(self, nimcache: Obj, profiles: list[str], orchestrator: str) -> Obj:
        from platforms.standalone import nimcache as b

        return b.caching_job(nimcache, selected_profiles=profiles, orchestrator=orchestrator)


def _name_ns(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("name", "")), str(meta.get("namespace") or "")


def source_kind(nimcache: Mapping[str, Any]) -> str:
    """``ngc``, ``hf`` or ``dataStore``: the NIMCache's one source."""
    source = (nimcache.get("spec") or {}).get("source") or {}
    for key in ("ngc", "hf", "dataStore"):
        if source.get(key):
            return key
    return ""


def is_optimized_ngc(nimcache: Mapping[str, Any]) -> bool:
    """An NGC source without ``modelEndpoint``: profiles are selected from the manifest."""
    ngc = ((nimcache.get("spec") or {}).get("source") or {}).get("ngc") or {}
    return bool(ngc) and not ngc.get("modelEndpoint")


def _model_spec(nimcache: Mapping[str, Any]) -> profiles_mod.ModelSpec:
    ngc = ((nimcache.get("spec") or {}).get("source") or {}).get("ngc") or {}
    return profiles_mod.ModelSpec.from_dict(ngc.get("model"))


async def client_pod_logs(client: Any, namespace: str, pod: str, container: str) -> str:
    """A container's log through the runtime client (``Client.pod_logs``)."""
    text: str = await client.pod_logs(pod, namespace, container=container)
    return text


@dataclass
class _StatusMemo:
    base_rv: str
    status: Obj


@dataclass
class NIMCacheReconciler:
    """Reconciles NIMCache objects."""

    cache: Reader
    client: Writer
    api_reader: KeyReader
    recorder: EventRecorder
    builders: NIMCacheBuilders
    pod_logs: PodLogReader
    use_finalizer: bool = True
    orchestrator: str | None = None
    _writes: WriteLog = field(default_factory=WriteLog)
    _status: dict[tuple[str, str], _StatusMemo] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._log = get_logger("controllers.nimcache")

    async def reconcile(self, request: Request) -> Result:
        namespace = request.namespace or ""
        try:
            obj = await self.cache.get(API_VERSION, KIND, request.name, namespace)
        except NotFound:
            self._status.pop((namespace, request.name), None)
            self._writes.forget_namespace_name(namespace, request.name)
            return Result()
        meta = obj.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            await self._cleanup(obj)
            if FINALIZER in finalizers:
                await self._patch_finalizers(obj, [f for f in finalizers if f != FINALIZER])
            return Result()
        if self.use_finalizer and FINALIZER not in finalizers:
            try:
                obj = await self._patch_finalizers(obj, [*finalizers, FINALIZER])
            except Conflict:
                return Result(requeue=True)

        old_status = copy.deepcopy(obj.get("status") or {})
        name = str(meta.get("name", ""))
        progress: list[Obj] = [old_status]
        try:
            status, result = await self._sync(obj, old_status, progress)
        except Conflict:
            return Result(requeue=True)
        except (ApiError, BuildError, profiles_mod.ManifestError) as exc:
            message = exc.message if isinstance(exc, ApiError) and exc.message else str(exc)
            status = ncs.reconcile_failed(progress[-1], message)
            if await self._write_status(obj, status):
                self.recorder.event(
                    obj,
                    "Warning",
                    "ReconcileFailed",
                    f"NIMCache {name} reconcile failed, msg: {message}",
                )
            raise
        status = ncs.reconciled(status)
        if await self._write_status(obj, status):
            event = ncs.state_event(name, old_status.get("state", ""), status.get("state", ""))
            if event is not None:
                self.recorder.event(obj, "Normal", *event)
        return result

    # -- steps ---------------------------------------------------------------

    def _build(self, fn: Callable[..., Obj], *args: Any) -> Obj:
        try:
            return ensure_hash(copy.deepcopy(fn(*args)))
        except (RenderError, ValueError) as exc:
            raise BuildError(str(getattr(exc, "message", exc))) from exc

    async def _cached(self, api_version: str, kind: str, name: str, namespace: str) -> Obj | None:
        try:
            return await self.cache.get(api_version, kind, name, namespace)
        except NotFound:
            return None

    async def _ensure(self, desired: Obj, *, create_only: bool = False) -> tuple[Obj, str]:
        api_version, kind = str(desired["apiVersion"]), str(desired["kind"])
        name, namespace = _name_ns(desired)
        cached = await self._cached(api_version, kind, name, namespace)
        out = await sync_object(
            desired,
            cached=cached,
            reader=self.api_reader,
            writer=self.client,
            log=self._writes,
            create_only=create_only,
        )
        return out.live, out.action

    async def _sync(self, obj: Obj, status: Obj, progress: list[Obj]) -> tuple[Obj, Result]:
        """One pass; ``progress[-1]`` holds the status reached so far (for the error path)."""
        name, namespace = _name_ns(obj)
        shared = (
            (self.builders.service_account, "SA"),
            (self.builders.role, "Role"),
            (self.builders.role_binding, "RoleBinding"),
        )
        for build, what in shared:
            desired = self._build(build, obj)
            try:
                await self._ensure(desired)
            except Conflict:
                raise
            except ApiError as exc:
                raise ApiError(
                    exc.status, exc.reason, f"error getting {what} for NIMCache: {exc.message}"
                ) from exc

        # PVC: created when asked to, otherwise it must exist.
        pvc_name = self.builders.pvc_name(obj)
        pvc_spec = ((obj.get("spec") or {}).get("storage") or {}).get("pvc") or {}
        pvc = await self._cached("v1", "PersistentVolumeClaim", pvc_name, namespace)
        if pvc is None:
            try:
                pvc = await self.api_reader.get("v1", "PersistentVolumeClaim", pvc_name, namespace)
            except NotFound:
                pvc = None
        if pvc is None:
            if not pvc_spec.get("create"):
                raise NotFound(
                    404,
                    "NotFound",
                    f'persistentvolumeclaims "{pvc_name}" not found; set '
                    "spec.storage.pvc.create: true or create the PVC",
                )
            desired_pvc = self._build(self.builders.pvc, obj)
            _, action = await self._ensure(desired_pvc, create_only=True)
            if action == "created":
                status = ncs.pvc_created(status)
                progress.append(status)

        # Model manifest: read once from the NIM image, kept in a ConfigMap.
        manifest: profiles_mod.Manifest | None = None
        cm_name = f"{name}-manifest"
        if status.get("type") not in (ncs.TYPE_MODEL_FREE, ncs.TYPE_NATIVE):
            cm = await self._cached("v1", "ConfigMap", cm_name, namespace)
            if cm is None:
                try:
                    cm = await self.api_reader.get("v1", "ConfigMap", cm_name, namespace)
                except NotFound:
                    cm = None
            if cm is None:
                extracted = await self._extract_manifest(obj)
                if extracted is None:
                    return status, Result(requeue_after=MANIFEST_POD_REQUEUE)
                kind_, text = extracted
                if kind_ == "model-free":
                    status = copy.deepcopy(status)
                    status["type"] = ncs.TYPE_MODEL_FREE
                    progress.append(status)
                else:
                    manifest = profiles_mod.parse_manifest(text)
                    cm_obj = self._build(
                        self.builders.manifest_configmap, obj, manifest.minimal_yaml()
                    )
                    await self._ensure(cm_obj, create_only=True)
                await self._delete_manifest_pod(obj)
            else:
                text = (cm.get("data") or {}).get(profiles_mod.MANIFEST_CONFIGMAP_KEY, "")
                manifest = profiles_mod.parse_manifest(text) if text else None

        # Profiles: explicit ones, or those matching the model spec and the GPUs.
        selected: list[str] = []
        if is_optimized_ngc(obj):
            spec = _model_spec(obj)
            gpus: list[str] = []
            if not spec.gpus and not spec.profiles:
                try:
                    nodes = await self.cache.list("v1", "Node")
                except ApiError:
                    nodes = []
                gpus = profiles_mod.discovered_gpu_products(nodes)
            selected = profiles_mod.select_profiles(manifest, spec, gpus)

        # The caching Job.
        job_name = f"{name}-job"
        job = await self._cached("batch/v1", "Job", job_name, namespace)
        state = status.get("state", "")
        if job is None and self._writes.wrote_key(("batch/v1", "Job", namespace, job_name)):
            try:
                job = await self.api_reader.get("batch/v1", "Job", job_name, namespace)
            except NotFound:
                job = None
        if job is None:
            if state != ncs.STATE_READY:
                if is_optimized_ngc(obj) and not selected:
                    raise BuildError("no profiles are selected for caching")
                desired_job = self._build(self.builders.job, obj, selected, self._orch())
                meta = desired_job.setdefault("metadata", {})
                if not meta.get("labels"):
                    tmpl_labels = (
                        ((desired_job.get("spec") or {}).get("template") or {}).get("metadata")
                        or {}
                    ).get("labels")
                    if tmpl_labels:
                        meta["labels"] = dict(tmpl_labels)
                await self._ensure(desired_job, create_only=True)
                status = ncs.job_created(status)
            return status, Result()
        counts = ncs.JobCounts.from_job(job)
        status_profiles: list[dict[str, Any]] = []
        if counts.succeeded > 0:
            status_profiles = profiles_mod.status_profiles(manifest, selected)
        pvc_for_status = pvc_name
        status = ncs.job_observed(status, counts, pvc_name=pvc_for_status, profiles=status_profiles)
        return status, Result()

    def _orch(self) -> str:
        return self.orchestrator or "Kubernetes"

    async def _extract_manifest(self, obj: Obj) -> tuple[str, str] | None:
        """("manifest", text) / ("model-free", "") once the pod printed; None while waiting."""
        name, namespace = _name_ns(obj)
        if self.orchestrator is None:
            try:
                nodes = await self.cache.list("v1", "Node")
            except ApiError:
                nodes = []
            self.orchestrator = detect_orchestrator(nodes)
        desired = self._build(self.builders.manifest_pod, obj, self._orch())
        pod, _ = await self._ensure(desired, create_only=True)
        if (pod.get("status") or {}).get("phase") != "Running":
            return None
        containers = (pod.get("spec") or {}).get("containers") or [{}]
        container = str(containers[0].get("name") or "nim-cache-ctr")
        pod_name = str((pod.get("metadata") or {}).get("name", f"{name}-pod"))
        try:
            logs = await self.pod_logs(namespace, pod_name, container)
        except NotFound:
            return None
        if not logs.strip():
            return None
        if profiles_mod.MANIFEST_NOT_FOUND in logs:
            return "model-free", ""
        return "manifest", logs

    async def _delete_manifest_pod(self, obj: Obj) -> None:
        name, namespace = _name_ns(obj)
        with contextlib.suppress(NotFound):
            await self.client.delete("v1", "Pod", f"{name}-pod", namespace)
        self._writes.forget(("v1", "Pod", namespace, f"{name}-pod"))

    async def _cleanup(self, obj: Obj) -> None:
        """On deletion: remove the caching Job's pods (the Job itself goes by GC)."""
        name, namespace = _name_ns(obj)
        job = await self._cached("batch/v1", "Job", f"{name}-job", namespace)
        selector = ((job or {}).get("spec") or {}).get("selector") or {}
        labels = selector.get("matchLabels") or {}
        if not labels:
            return
        try:
            pods = await self.cache.list("v1", "Pod", namespace, label_selector=dict(labels))
        except ApiError:
            return
        for pod in pods:
            pname = str((pod.get("metadata") or {}).get("name", ""))
            try:
                await self.client.delete("v1", "Pod", pname, namespace)
            except NotFound:
                continue

    # -- writes ------------------------------------------------------------------

    async def _patch_finalizers(self, obj: Obj, finalizers: list[str]) -> Obj:
        return await patch_finalizers(self.client, API_VERSION, KIND, obj, finalizers)

    async def _write_status(self, obj: Obj, status: Obj) -> bool:
        name, namespace = _name_ns(obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        current = obj.get("status") or {}
        memo = self._status.get((namespace, name))
        if memo is not None and memo.base_rv == rv:
            current = memo.status
        changed = {k: v for k, v in status.items() if current.get(k) != v}
        if not changed:
            return False
        await self.client.patch(
            API_VERSION,
            KIND,
            name,
            {"status": changed},
            namespace=namespace,
            patch_type="merge",
            subresource="status",
        )
        self._status[(namespace, name)] = _StatusMemo(base_rv=rv, status=copy.deepcopy(status))
        return True
