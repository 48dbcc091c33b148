"""A localcluster per test, with a small audit log and fault switch as request hooks.

The audit records every write the API server accepted (user, verb, resource,
name, time on the server's monotonic clock); ``faults`` makes chosen
(user, resource) requests fail with 500, to partition one manager from the
Lease or from its lists.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from nimctl_runtime.client import Client, load_config
from nimctl_runtime.localcluster.cluster import LocalCluster
from nimctl_runtime.localcluster.errors import StatusError
from nimctl_runtime.localcluster.hooks import Handler, RequestInfo

WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


@dataclass(frozen=True)
class AuditEntry:
    at: float
    user: str
    verb: str
    resource: str
    namespace: str
    name: str
    code: int


@dataclass
class Audit:
    entries: list[AuditEntry] = field(default_factory=list)
    # (user, resource) pairs whose requests fail with 500
    faults: set[tuple[str, str]] = field(default_factory=set)

    async def hook(self, request: web.Request, info: RequestInfo, handler: Handler) -> web.StreamResponse:
        if (info.user, info.resource) in self.faults:
            raise StatusError(500, "InternalError", "injected fault: etcd unavailable")
        response = await handler(request)
        if info.verb in WRITE_VERBS and response.status < 300:
            entry = AuditEntry(
                time.monotonic(),
                info.user,
                info.verb,
                info.resource,
                info.namespace,
                info.name,
                response.status,
            )
            self.entries.append(entry)
        return response

    def writes(self, *, user: str | None = None, resource: str | None = None) -> list[AuditEntry]:
        return [
            e for e in self.entries
            if (user is None or e.user == user) and (resource is None or e.resource == resource)
        ]  # fmt: skip


@dataclass
class Env:
    cluster: LocalCluster
    audit: Audit
    tmp: Path

    def kubeconfig(self, user: str) -> str:
        return str(self.cluster.write_kubeconfig(self.tmp / f"kubeconfig-{user}", user=user))

    def client(self, user: str = "admin") -> Client:
        return Client(load_config(self.kubeconfig(user)))


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    audit = Audit()
    async with LocalCluster(simulator=False, workdir=tmp_path / "cluster") as cluster:
        cluster.request_hooks.append(audit.hook)
        yield Env(cluster, audit, tmp_path)
