"""kube-controller-manager's ServiceAccount controller: a ``default`` ServiceAccount per namespace.

Every namespace that is not terminating gets a ServiceAccount named ``default``
(created when the namespace appears, and again if someone deletes it), as on a
real cluster, so ``kubectl create token default`` and pods that name no
ServiceAccount find one. The controller follows storage events (a listener that
only queues) and writes in its own task, like the garbage collector.
:class:`ServiceAccountAdmission` refuses pods naming a ServiceAccount that does
not exist, as kube-apiserver's ServiceAccount admission plugin does.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from collections import deque
from typing import Any

from nimctl_runtime.logsetup import get_logger

from . import errors
from .errors import StatusError
from .hooks import AdmissionAttributes
from .storage import Storage
from .watchcache import DELETED, StoredEvent

log = get_logger(__name__)

DEFAULT = "default"


class ServiceAccountsController:
    """Keeps a ``default`` ServiceAccount in every active namespace."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage
        self._pending: deque[str] = deque()
        self._wakeup = asyncio.Event()
        self._unsubscribe = storage.subscribe(self._on_event)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        namespaces = self.storage.resolve("v1", "Namespace")
        entries, _, _ = self.storage.list_entries(namespaces)
        for entry in entries:
            self.ensure(entry.name)
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="localcluster-serviceaccounts"
        )

    async def stop(self) -> None:
        self._unsubscribe()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _on_event(self, ev: StoredEvent) -> None:
        if ev.group:
            return
        if ev.resource == "namespaces" and ev.type != DELETED:
            self._pending.append(ev.name)
        elif ev.resource == "serviceaccounts" and ev.type == DELETED and ev.name == DEFAULT:
            self._pending.append(ev.namespace)
        else:
            return
        self._wakeup.set()

    async def _run(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                self.ensure(self._pending.popleft())
                await asyncio.sleep(0)

    def ensure(self, namespace: str) -> None:
        """Create ``default`` in *namespace* when it is active and has none."""
        ns_info = self.storage.resolve("v1", "Namespace")
        entry = self.storage.get_entry(ns_info, "", namespace)
        if entry is None:
            return
        ns = entry.decode()
        if (ns.get("metadata") or {}).get("deletionTimestamp"):
            return
        if (ns.get("status") or {}).get("phase") == "Terminating":
            return
        info = self.storage.resolve("v1", "ServiceAccount")
        if self.storage.get_entry(info, namespace, DEFAULT) is not None:
            return
        account = {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": DEFAULT, "namespace": namespace},
        }
        try:
            self.storage.create_object(info, account)
        except StatusError as exc:
            if exc.code not in (403, 409):  # terminating meanwhile, or created meanwhile
                log.warning("default serviceaccount not created", namespace=namespace, error=exc)


class ServiceAccountAdmission:
    """The ServiceAccount admission plugin: a pod's ServiceAccount is ``default`` unless named,
    and a pod whose ServiceAccount is missing is refused.

    A pod created (by a client or a simulated controller) naming a ServiceAccount
    that does not exist in its namespace is 403 ``pods "web-7d4b9-" is forbidden:
    error looking up service account nim/llm: serviceaccount "llm" not found``;
    a controller records that as a ``FailedCreate`` Event and retries. A missing
    ``default`` is not refused: the controller above creates it right after the
    namespace, and refusing in between would only add a race.
    """

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    async def mutate(
        self, attrs: AdmissionAttributes, obj: dict[str, Any] | None, old: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]:
        if (
            obj is None
            or attrs.operation != "CREATE"
            or attrs.group
            or attrs.resource != "pods"
            or attrs.subresource
        ):
            return None, []
        spec = obj.get("spec") or {}
        account = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or "")
        if not account:  # a pod naming none runs as ``default``, and says so
            named = copy.deepcopy(obj)
            named.setdefault("spec", {}).update(serviceAccountName=DEFAULT, serviceAccount=DEFAULT)
            return named, []
        info = self.storage.resolve("v1", "ServiceAccount")
        if account == DEFAULT or self.storage.get_entry(info, attrs.namespace, account):
            return None, []
        meta = obj.get("metadata") or {}
        name = attrs.name or str(meta.get("generateName") or "") or "Unknown"
        raise errors.forbidden(
            f'pods "{name}" is forbidden: error looking up service account '
            f'{attrs.namespace}/{account}: serviceaccount "{account}" not found',
            "",
            "pods",
            name,
        )

    async def validate(
        self, attrs: AdmissionAttributes, obj: dict[str, Any] | None, old: dict[str, Any] | None
    ) -> list[str]:
        return []
