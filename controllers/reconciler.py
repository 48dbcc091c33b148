"""The one reconciler skeleton every kind runs: a ``KindContract`` plus a ``Kind`` binding.

``KindReconciler.reconcile(request)`` does, for any kind:

1. read the CR from the cache (gone: forget what this process remembers);
2. deletion: run the kind's cleanup, delete (foreground) and wait for what
   its write policy says must go first (``drain_on_delete``), release our
   finalizer, stop. In a
   namespace that is terminating nothing is created either: the finalizer is
   released and the pass ends (no re-creating children the namespace
   controller is deleting);
3. add the kind's finalizer when it has one;
4. ``kind.parse`` (the typed model, at the edge), ``kind.gather`` (facts, read
   from the cache; may raise ``Blocked``), ``contract.render`` (pure; memoised
   while nothing it reads changed). A ``Blocked`` carrying objects has them
   applied (no prune) and reports its readiness;
5. ``plan`` (pure) against the cache: applies by desired-object hash, prunes
   every object the CR controls (owner UID index) in its ``owned_kinds`` that
   the render no longer contains; then the thin executor writes;
6. ``contract.readiness`` over what the cache holds (not ready: asked again with
   ``kind.blocker_facts``, what only names a blocker), ``kind.status`` turns it
   into the kind's status (``kind.complete_status`` may add I/O-derived
   fields), written only when it changed, with the kind's Event on a change;
7. requeue as the readiness asks; a write failure sets ``Failed`` with the
   kind's reason for that object, records one Event and retries with backoff.

A kind is a ``KindContract`` (platforms, pure) and a ``Kind`` (controllers:
parse, gather, status vocabulary). See docs/architecture.md, "Adding a kind".
"""

from __future__ import annotations

import contextlib
import copy
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from controllers.plan import Action, Key, WritePolicy, drain, key, plan
from controllers.render_memo import Rendered, RenderMemo, prunes_any, unchanged
from controllers.sync import WriteLog, WriteMemo, patch_finalizers, sync_object
from nimctl_runtime.client.errors import ApiError, Conflict, NotFound
from nimctl_runtime.client.interfaces import (
    EventRecorder,
    KeyReader,
    Reader,
    Writer,
    get_or_none,
)
from nimctl_runtime.expectations import CreateExpectations, expect_key
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import (
    OWNER_UID_INDEX,
    Obj,
    ObjView,
    controller_of,
    name_of,
    namespace_of,
    uid_of,
)
from nimctl_runtime.reconcile import Request, Result
from platforms.capabilities import Capabilities
from platforms.contract import Blocked, KindContract, Observed, Readiness, ReconcileError

CR = TypeVar("CR")
Facts = TypeVar("Facts")
Event = tuple[str, str, str]
#: Seconds between looks while a deleting CR waits for its ``drain_on_delete`` objects.
DRAIN_REQUEUE = 5.0

__all__ = ["Kind", "KindReconciler", "NamespaceLabels", "WriteFailed", "namespace_terminating"]


class WriteFailed(ReconcileError):
    """Writing an object failed; ``reason`` is the kind's ``Failed`` condition reason."""


def namespace_terminating(exc: ApiError) -> bool:
    """A create refused because the namespace is being deleted (403 NamespaceTerminating)."""
    if exc.status != 403:
        return False
    details = exc.details or {}
    causes = details.get("causes") or []
    if any(c.get("reason") == "NamespaceTerminating" for c in causes if isinstance(c, Mapping)):
        return True
    return "because it is being terminated" in str(exc.message or exc)


class Kind(ABC, Generic[CR, Facts]):
    """The controller-side half of a kind: what needs I/O or the kind's status vocabulary.

    Subclasses set ``contract``, ``api_version``, ``kind`` and
    ``recorder_name`` and override what differs from the defaults.
    """

    contract: KindContract[CR, Facts]
    api_version: str
    kind: str
    finalizer: str | None = None
    #: Finalizers this kind no longer uses (e.g. NVIDIA's, on CRs we adopt):
    #: removed wherever they are found, so such CRs stay deletable.
    stale_finalizers: tuple[str, ...] = ()
    create_only: frozenset[str] = frozenset({"PersistentVolumeClaim"})
    """Kinds created once and never updated (the default ``write_policy``)."""
    keep_on_prune: frozenset[str] = frozenset({"PersistentVolumeClaim"})
    """Kinds never pruned (the default ``write_policy``)."""
    independent_objects: bool = False
    """True: the desired objects do not depend on one another (NIMPipeline's
    NIMServices), so a write that fails does not stop the others; the first
    failure is reported once all were tried."""
    shared_status: bool = False
    """True: another controller writes part of this kind's status too (the driver
    upgrade's ``DriverUpgrade`` condition on a ClusterPolicy). The status is then
    written with the resourceVersion it was computed from, so a write from a stale
    copy gets 409 Conflict and a requeue instead of undoing the other writer's part."""

    @abstractmethod
    def parse(self, obj: Obj) -> CR:
        """The typed CR from the cached dict (raise ``Blocked`` when it cannot be used)."""

    @abstractmethod
    async def gather(self, cr: CR, obj: Obj, reader: Reader) -> Facts:
        """What ``render`` needs from the cluster, read from the cache (may raise ``Blocked``)."""

    async def blocker_facts(self, cr: CR, obj: Obj, facts: Facts, reader: Reader) -> Facts:
        """Facts only a CR that is not ready needs, to name what blocks it (its pods,
        the Warning Events about them, the nodes): gathered after ``readiness`` said
        not ready with ``facts``, which it is then asked again with (default: none).

        A Ready CR's pass then reads no pods (decoding every pod of every Ready
        NIMService was a tenth of the operator's CPU at 1,000 of them).
        """
        return facts

    def progress(self, old: Obj, facts: Facts) -> Obj:
        """The status reached once the facts are known (default: unchanged).

        Kept when the rest of the pass fails, so a failure does not erase what
        was learnt (NIMCache's ``type: model-free``).
        """
        return old

    def write_policy(self, owner: ObjView, obj: ObjView) -> WritePolicy:
        """How ``plan`` writes and prunes ``obj`` for the CR ``owner`` (pure).

        Default: ``create_only`` and ``keep_on_prune`` by kind. A kind overrides
        it for a rule of its own: never overwrite a foreign object
        (NIMPipeline), delete orphaning the pods (ClusterPolicy's driver
        DaemonSets once NVIDIADrivers own the drivers). ``plan`` adds the HPA's
        ``keep_live_replicas`` itself.
        """
        kind = str(obj.get("kind", ""))
        return _BY_KIND[(kind in self.create_only, kind in self.keep_on_prune)]

    def namespace_labels(self, cr: CR, facts: Facts) -> NamespaceLabels | None:
        """Labels a namespace must carry before this CR's objects are written (None:
        none). Written once the facts are known (not while ``Blocked``) and never
        removed: the operator namespace's
        ``pod-security.kubernetes.io/*`` for privileged GPU operands (ClusterPolicy
        ``psa.enabled``), ``resource.kubernetes.io/admin-access`` for admin-access
        ResourceClaims (GPUCluster)."""
        return None

    def materialize(self, obj: Obj) -> Obj:
        """The object to create for a desired one that does not exist yet (default: itself).

        Fills in what a pure, repeatable render cannot hold (a freshly generated
        key); called only on create, so pair it with ``create_only``.
        """
        return obj

    def memo_key(self, cr: CR, obj: Obj, facts: Facts) -> tuple[Any, ...] | None:
        """A key under which the render may be reused (None: render every pass)."""
        return None

    @abstractmethod
    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        """The CR's new status from the readiness (pure)."""

    async def complete_status(
        self, cr: CR, obj: Obj, facts: Facts, status: Obj, observed: Observed
    ) -> Obj:
        """Add status fields that need I/O (e.g. asking a NIM its model)."""
        return status

    def event(self, obj: Obj, readiness: Readiness) -> Event | None:
        """The Event for a status change into ``readiness`` (None: none)."""
        return None

    def status_event(
        self, obj: Obj, readiness: Readiness, old_status: Obj, new_status: Obj
    ) -> Event | None:
        """The Event for a written status change (default: ``event``)."""
        return self.event(obj, readiness)

    def drain_event(self, obj: Obj, waiting: list[str]) -> Event | None:
        """The Event while a deleting CR waits for its ``drain_on_delete`` objects."""
        return None

    def failure_reason(self, kind: str) -> str:
        """The ``Failed`` reason when writing an object of ``kind`` fails."""
        return "Failed"

    def failure_event(self, obj: Obj, message: str) -> Event | None:
        return ("Warning", "ReconcileFailed", f"{self.kind} {name_of(obj)} failed, msg: {message}")

    async def cleanup(self, obj: Obj, reader: Reader, writer: Writer) -> None:
        """Work to do before the finalizer is released (default: none)."""

    def forget(self, namespace: str, name: str) -> None:
        """Drop what the binding keeps about an object that is gone (default: nothing)."""


@dataclass(frozen=True)
class NamespaceLabels:
    """Labels a kind needs on a namespace (``Kind.namespace_labels``).

    ``labels`` are set to these values; ``defaults`` only where the label is
    absent, so a value the user set (``"false"``, say) is kept.
    """

    namespace: str
    labels: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, str] = field(default_factory=dict)

    def missing(self, have: Mapping[str, str]) -> dict[str, str]:
        """The labels to merge into a namespace that carries ``have`` (pure)."""
        out = {k: v for k, v in self.defaults.items() if k not in have}
        out.update({k: v for k, v in self.labels.items() if have.get(k) != v})
        return out


@dataclass
class KindReconciler(Generic[CR, Facts]):
    """Reconciles one kind through its ``Kind`` binding and ``KindContract``."""

    kind: Kind[CR, Facts]
    cache: Reader
    client: Writer
    api_reader: KeyReader
    recorder: EventRecorder
    capabilities: Capabilities = field(default_factory=Capabilities.nothing)
    use_finalizer: bool = True
    #: A status change that only rewords a condition message (a rollout's
    #: "1 of 4 ... available") is written at most once per this many seconds;
    #: state and condition status changes, and a change of ``Readiness.blocker``,
    #: are written at once.
    message_interval: float = 30.0
    clock: Callable[[], float] = time.monotonic
    _writes: WriteLog = field(default_factory=WriteLog)
    _status_written_at: dict[tuple[str, str], float] = field(default_factory=dict)
    _blockers: dict[tuple[str, str], tuple[str, str] | None] = field(default_factory=dict)
    #: the status this process last wrote, over the CR's resourceVersion
    _status: WriteMemo[tuple[str, str], Obj] = field(default_factory=WriteMemo)
    _renders: dict[tuple[str, str], RenderMemo] = field(default_factory=dict)
    #: This reconciler's creates whose watch echo is no news (``own_kinds`` drops
    #: those ADDED events with ``expectations.predicate()``).
    expectations: CreateExpectations = field(default_factory=CreateExpectations)

    def __post_init__(self) -> None:
        self._log = get_logger(f"controllers.{self.kind.kind.lower()}")

    # -- entry point -------------------------------------------------------------

    async def reconcile(self, request: Request) -> Result:
        namespace = request.namespace or ""
        k = self.kind
        try:
            obj = await self.cache.get(k.api_version, k.kind, request.name, namespace or None)
        except NotFound:
            self._forget(namespace, request.name)
            return Result()
        meta = obj.get("metadata") or {}
        finalizers = list(meta.get("finalizers") or [])
        if meta.get("deletionTimestamp"):
            await k.cleanup(obj, self.cache, self.client)
            if self.use_finalizer and k.finalizer in finalizers and await self._drain(obj):
                return Result(requeue_after=DRAIN_REQUEUE)
            return await self._release_finalizer(obj)
        if namespace and await self._namespace_terminating(namespace):
            return await self._release_finalizer(obj)
        wanted = [f for f in finalizers if f not in k.stale_finalizers]
        if self.use_finalizer and k.finalizer and k.finalizer not in wanted:
            wanted.append(k.finalizer)
        if wanted != finalizers:
            try:
                obj = await patch_finalizers(self.client, k.api_version, k.kind, obj, wanted)
            except Conflict:
                return Result(requeue=True)

        old_status = copy.deepcopy(obj.get("status") or {})
        progress = [old_status]
        try:
            readiness, observed, done = await self._sync(obj, progress)
        except Conflict:
            return Result(requeue=True)
        except ReconcileError as exc:
            status = k.status(progress[-1], _failed(exc.reason, exc.message), Observed())
            try:
                failed_written = await self._write_status(obj, status)
            except Conflict:
                return Result(requeue=True)
            if failed_written:
                event = k.failure_event(obj, exc.message)
                if event is not None:
                    self.recorder.event(obj, *event)
            raise
        except _Terminating:
            return await self._release_finalizer(obj)
        status = k.status(progress[-1], readiness, observed)
        if done is not None and readiness.ready:
            status = await k.complete_status(done[0], obj, done[1], status, observed)
        wait = self._message_wait(obj, status, readiness.blocker)
        try:
            written = wait is None and await self._write_status(obj, status)
        except Conflict:
            return Result(requeue=True)
        if wait is None:
            self._blockers[(namespace_of(obj), name_of(obj))] = readiness.blocker
        if written:
            event = k.status_event(obj, readiness, old_status, status)
            if event is not None:
                self.recorder.event(obj, *event)
        delays = [d for d in (readiness.requeue_after, wait) if d]
        return Result(requeue_after=min(delays)) if delays else Result()

    # -- steps -------------------------------------------------------------------

    async def _sync(
        self, obj: Obj, progress: list[Obj]
    ) -> tuple[Readiness, Observed, tuple[CR, Facts] | None]:
        k = self.kind
        blocked_by: Readiness | None = None
        kept: tuple[Rendered, ...] | None = None
        desired: list[Obj] | None
        try:
            cr = k.parse(obj)
            facts = await k.gather(cr, obj, self.cache)
            progress.append(k.progress(progress[-1], facts))
            labels = k.namespace_labels(cr, facts)
            if labels is not None:
                await self._label_namespace(labels)
            memo_key = k.memo_key(cr, obj, facts)
            kept = self._kept(obj, memo_key)
            desired = None if kept is not None else self._render(cr, obj, facts, memo_key)
        except Blocked as blocked:
            if not blocked.objects:
                return blocked.readiness, Observed(), None
            # What does not wait for the prerequisite is applied; nothing is pruned.
            blocked_by, desired, kept = blocked.readiness, blocked.objects, None
        namespace = namespace_of(obj)
        owned = await self._owned(obj) if blocked_by is None else []
        # The owned objects were just read from the cache: a desired object among them
        # is not read (and decoded) a second time. Both are only read from here on.
        owned_by_key = {(key(o), namespace_of(o)): o for o in owned}
        live: dict[Key, Obj] = {}
        actions: list[Action] = []
        if kept is not None:
            # The render did not change: its hashes tell whether anything is to write.
            for r in kept:
                cached = owned_by_key.get((r.key, r.namespace or namespace))
                if cached is None:
                    cached = await self._cached_key(r.key, r.namespace or namespace)
                if cached is not None:
                    live[r.key] = cached
            if not unchanged(kept, live) or prunes_any(owned, kept, uid_of(obj), _deleting):
                desired = self._render(cr, obj, facts, memo_key)  # something to write
                live = {}
        if desired is not None:
            for d in desired:
                cached = owned_by_key.get((key(d), namespace_of(d) or namespace))
                if cached is None:
                    cached = await self._cached(d, namespace)
                if cached is not None:
                    live[key(d)] = cached
            actions = plan(
                desired,
                owned,
                live,
                owner_uid=uid_of(obj),
                policy=lambda o: k.write_policy(obj, o),
            )
        created: set[Key] = set()
        failures: list[WriteFailed] = []
        for action in actions:
            try:
                result = await self._execute(action, namespace)
            except WriteFailed as exc:
                if not k.independent_objects:
                    raise
                failures.append(exc)
                continue
            if action.verb == "apply" and result is not None:
                live[key(action.obj)] = result[0]
                if result[1] == "created":
                    created.add(key(action.obj))
        if failures:
            raise failures[0]
        observed = Observed(live, frozenset(created))
        if blocked_by is not None:
            return blocked_by, observed, None
        readiness = k.contract.readiness(cr, facts, observed)
        if not readiness.ready:
            more = await k.blocker_facts(cr, obj, facts, self.cache)
            if more is not facts:
                facts = more
                readiness = k.contract.readiness(cr, facts, observed)
        return readiness, observed, (cr, facts)

    def _kept(self, obj: Obj, memo_key: tuple[Any, ...] | None) -> tuple[Rendered, ...] | None:
        """The last render's summary, when its ``memo_key`` still holds and it has one."""
        if memo_key is None:
            return None
        memo = self._renders.get((namespace_of(obj), name_of(obj)))
        if memo is None or memo.key != memo_key:
            return None
        return memo.objects

    def _render(
        self, cr: CR, obj: Obj, facts: Facts, memo_key: tuple[Any, ...] | None
    ) -> list[Obj]:
        """``contract.render``, remembered (``controllers.render_memo``) while nothing it
        reads changed: as each object's hash, or, where ``plan`` needs more (an
        HPA-scaled Deployment), as the whole render compressed and restored."""
        memo_id = (namespace_of(obj), name_of(obj))
        if memo_key is not None:
            memo = self._renders.get(memo_id)
            if memo is not None and memo.key == memo_key:
                restored = memo.restore()
                if restored is not None:
                    return restored
        desired = list(self.kind.contract.render(cr, facts))
        if memo_key is not None:
            self._renders[memo_id] = RenderMemo.of(memo_key, desired)
        return desired

    async def _owned(self, obj: Obj) -> list[Obj]:
        """Every object the CR controls, in each kind it may own, from the owner index."""
        uid = uid_of(obj)
        namespace = namespace_of(obj) or None
        out: list[Obj] = []
        for api_version, kind in self.kind.contract.owned_kinds(self.capabilities):
            try:
                out.extend(
                    await self.cache.list(
                        api_version, kind, namespace, index=(OWNER_UID_INDEX, uid)
                    )
                )
            except ApiError:
                continue  # a kind the server stopped serving: nothing to prune there
        return out

    async def _cached(self, obj: Mapping[str, Any], namespace: str) -> Obj | None:
        return await self._cached_key(key(obj), namespace_of(obj) or namespace)

    async def _cached_key(self, k: Key, namespace: str) -> Obj | None:
        return await get_or_none(self.cache, k[0], k[1], k[2], namespace or None)

    async def _execute(self, action: Action, namespace: str) -> tuple[Obj, str] | None:
        obj = action.obj
        api_version, kind, name = key(obj)
        ns = namespace_of(obj) or namespace or None
        try:
            if action.verb == "delete":
                with contextlib.suppress(NotFound):
                    await self.client.delete(
                        api_version, kind, name, ns, propagation_policy=action.policy.propagation
                    )
                self._writes.forget((api_version, kind, ns or "", name))
                return None
            expected = None
            if action.live is None:
                obj = self.kind.materialize(obj)
                expected = expect_key(obj, ns)
                self.expectations.expect(expected)
            try:
                out = await sync_object(
                    obj,
                    cached=action.live,
                    reader=self.api_reader,
                    writer=self.client,
                    log=self._writes,
                    create_only=action.policy.create_only,
                    keep_live_replicas=action.policy.keep_live_replicas,
                    controller_uid=None
                    if action.policy.overwrite_foreign
                    else (controller_of(obj) or {}).get("uid"),
                )
            except BaseException:
                if expected is not None:
                    self.expectations.cancel(expected)
                raise
            if expected is not None:
                if out.action == "created":
                    rv = (out.live.get("metadata") or {}).get("resourceVersion")
                    self.expectations.created(expected, str(rv or ""))
                else:
                    self.expectations.cancel(expected)
        except Conflict:
            raise
        except ApiError as exc:
            if namespace_terminating(exc):
                raise _Terminating from exc
            verb = "deleting " if action.verb == "delete" else ""
            raise WriteFailed(
                f"{verb}{kind} {name}: {exc.message or exc}", reason=self.kind.failure_reason(kind)
            ) from exc
        return out.live, out.action

    # -- writes ------------------------------------------------------------------

    async def _drain(self, obj: Obj) -> list[str]:
        """Delete (foreground) what must go before the finalizer; the names still there."""
        actions, waiting = drain(
            await self._owned(obj),
            owner_uid=uid_of(obj),
            policy=lambda o: self.kind.write_policy(obj, o),
        )
        namespace = namespace_of(obj)
        for action in actions:
            await self._execute(action, namespace)
        if waiting:
            event = self.kind.drain_event(obj, waiting)
            if event is not None:
                self.recorder.event(obj, *event)
        return waiting

    async def _label_namespace(self, want: NamespaceLabels) -> None:
        """Merge the labels the namespace lacks, one patch or none (read through the API:
        the caches hold no Namespace labels)."""
        try:
            ns = await self.api_reader.get("v1", "Namespace", want.namespace)
        except NotFound:
            return
        missing = want.missing((ns.get("metadata") or {}).get("labels") or {})
        if missing:
            patch = {"metadata": {"labels": missing}}
            await self.client.patch("v1", "Namespace", want.namespace, patch)

    async def _release_finalizer(self, obj: Obj) -> Result:
        """Remove our finalizers. A stale copy (409) is retried from the cache, quietly:
        a conflict is routine while the namespace controller deletes around us."""
        ours = {self.kind.finalizer, *self.kind.stale_finalizers} - {None}
        finalizers = list((obj.get("metadata") or {}).get("finalizers") or [])
        kept = [f for f in finalizers if f not in ours]
        if kept != finalizers:
            try:
                await patch_finalizers(
                    self.client, self.kind.api_version, self.kind.kind, obj, kept
                )
            except NotFound:
                pass
            except Conflict:
                return Result(requeue=True)
        return Result()

    async def _namespace_terminating(self, namespace: str) -> bool:
        try:
            ns = await self.cache.get("v1", "Namespace", namespace)
        except (NotFound, ApiError):
            return False
        return bool((ns.get("metadata") or {}).get("deletionTimestamp"))

    def _current_status(self, obj: Obj) -> Mapping[str, Any]:
        """The status as last written: the cache's, or ours if the cache lags behind it."""
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        memo_id = (namespace_of(obj), name_of(obj))
        written = self._status.written(memo_id, rv)
        if written is not None:
            return written
        # The cache moved past the version the write was computed on: the memo can
        # never apply again. Dropped, so a settled CR keeps no copy of its status.
        self._status.forget(memo_id)
        current: Mapping[str, Any] = obj.get("status") or {}
        return current

    def _message_wait(
        self, obj: Obj, status: Obj, blocker: tuple[str, str] | None = None
    ) -> float | None:
        """Seconds to hold back a message-only status change (None: write now).

        A different blocker than the one last written (or its disappearance)
        is a change of meaning, written at once even when only words differ.
        """
        if not _message_only(self._current_status(obj), status):
            return None
        memo_id = (namespace_of(obj), name_of(obj))
        if self._blockers.get(memo_id) != blocker:
            return None
        last = self._status_written_at.get(memo_id)
        if last is None:
            return None
        left = self.message_interval - (self.clock() - last)
        return left if left > 0 else None

    async def _write_status(self, obj: Obj, status: Obj) -> bool:
        """Write ``status`` unless the server already has it. True when written."""
        name, namespace = name_of(obj), namespace_of(obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        current = self._current_status(obj)
        if _same_status(current, status):
            return False
        body: Obj = {"status": _merge_patch(current, status)}
        if self.kind.shared_status:
            body["metadata"] = {"resourceVersion": rv}
        await self.client.patch(
            self.kind.api_version,
            self.kind.kind,
            name,
            body,
            namespace=namespace or None,
            patch_type="merge",
            subresource="status",
        )
        # ``status`` was built for this pass and is not changed after it is written:
        # kept as is (a deep copy per write was ~2% of the operator's CPU at 1,000).
        self._status.record((namespace, name), rv, status)
        self._status_written_at[(namespace, name)] = self.clock()
        return True

    def _forget(self, namespace: str, name: str) -> None:
        self._status.forget((namespace, name))
        self._status_written_at.pop((namespace, name), None)
        self._blockers.pop((namespace, name), None)
        self._renders.pop((namespace, name), None)
        self._writes.forget_namespace_name(namespace, name)
        self.kind.forget(namespace, name)


class _Terminating(Exception):
    """A create was refused because the namespace is terminating."""


def _message_only(current: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """Whether ``status`` differs from ``current`` only in condition messages."""
    if _same_status(current, status):
        return False

    def without_messages(st: Mapping[str, Any]) -> dict[str, Any]:
        out = {k: v for k, v in st.items() if k != "conditions"}
        out["conditions"] = [
            {k: v for k, v in c.items() if k not in ("message", "lastTransitionTime")}
            for c in st.get("conditions") or ()
        ]
        return out

    a, b = without_messages(current), without_messages(status)
    return all(a.get(k) == b.get(k) for k in b)


#: ``by_kind``'s policies, shared (frozen): one per (create_only, keep_on_prune).
_BY_KIND: dict[tuple[bool, bool], WritePolicy] = {
    (c, k): WritePolicy(create_only=c, keep_on_prune=k)
    for c in (False, True)
    for k in (False, True)
}


def _deleting(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _failed(reason: str, message: str) -> Readiness:
    return Readiness(state="Failed", reason=reason, message=message, failed=True)


def _merge_patch(current: Mapping[str, Any], status: Mapping[str, Any]) -> Obj:
    """The merge patch from ``current`` to ``status`` for the fields ``status`` sets.

    A map field (such as NIMPipeline's ``status.states``) loses the keys the new
    value no longer has: a merge patch would keep them, so they are sent as null.
    """
    out: Obj = {}
    for k, v in status.items():
        old = current.get(k)
        if old == v:
            continue
        if isinstance(v, Mapping) and isinstance(old, Mapping):
            patch: Obj = {ok: None for ok in old if ok not in v}
            patch.update({nk: nv for nk, nv in v.items() if old.get(nk) != nv})
            out[k] = patch
        else:
            out[k] = v
    return out


def _same_status(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(a.get(k) == b.get(k) for k in b)
