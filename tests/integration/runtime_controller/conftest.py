"""A localcluster per test, with its audit log and fault injector at hand.

``env.audit`` is localcluster's audit log (every request: user, verb,
resource, response code, in arrival order); ``env.faults`` injects errors for
chosen users and resources, to cut one manager off from the Lease or from
its lists.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from localcluster.audit import AuditLog, AuditRecord
from localcluster.cluster import LocalCluster
from localcluster.faults import FaultInjector
from nimctl_runtime.client import Client, load_config

WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}


def accepted_writes(
    audit: AuditLog, *, user: str | None = None, resource: str | None = None
) -> list[AuditRecord]:
    """Writes the server accepted (2xx), in arrival order."""
    return [
        r
        for r in audit.records(user=user, resource=resource)
        if r.verb in WRITE_VERBS and r.code is not None and r.code < 300
    ]


def at(record: AuditRecord) -> float:
    """The record's time as POSIX seconds."""
    return dt.datetime.fromisoformat(record.timestamp).timestamp()


@dataclass
class Env:
    cluster: LocalCluster
    audit: AuditLog
    faults: FaultInjector
    tmp: Path

    def kubeconfig(self, user: str) -> str:
        return str(self.cluster.write_kubeconfig(self.tmp / f"kubeconfig-{user}", user=user))

    def client(self, user: str = "admin") -> Client:
        return Client(load_config(self.kubeconfig(user)))


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    async with LocalCluster(simulator=False, workdir=tmp_path / "cluster") as cluster:
        ext: Any = getattr(cluster, "extensions", None)  # set by start_extensions
        assert ext is not None, "localcluster started without its extensions"
        yield Env(cluster, ext.audit, ext.faults, tmp_path)
