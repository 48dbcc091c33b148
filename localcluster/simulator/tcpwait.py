"""Containers that wait for a TCP service: ``until nc -z <host> <port>; do ...; done``.

Operators put such loops in init containers to hold a pod until a dependency
answers (NVIDIA's NeMo services wait for their PostgreSQL host this way). No
network exists in localcluster, so the simulator answers the question from the
cluster's objects: ``<host>:<port>`` answers when ``<host>`` names a Service of
this cluster (``name``, ``name.namespace``, ``name.namespace.svc`` or
``name.namespace.svc.cluster.local``) that has ``<port>`` and ready endpoints.
A host outside the cluster's DNS (``db.example.com``) is taken as reachable:
the simulator cannot know better and must not hold the pod forever.

While a host does not answer, the engine keeps the container from starting and
looks again every :data:`POLL_SECONDS` (the loops' usual ``sleep 5``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["POLL_SECONDS", "service_of", "tcp_wait_problem", "tcp_waits"]

POLL_SECONDS = 5.0
_WAIT_LOOP = re.compile(r"\buntil\s+nc\s+(?:-\w+\s+)*-z\s+(?:-\w+\s+)*(\S+)\s+(\d+)")

Lookup = Callable[[str, str, str], Mapping[str, Any] | None]
"""``(kind, namespace, name) -> object or None`` over the cluster's core/v1 objects."""


def tcp_waits(container: Mapping[str, Any]) -> list[tuple[str, int]]:
    """``(host, port)`` of every ``until nc -z host port`` loop in the container's command line."""
    words = [*(container.get("command") or ()), *(container.get("args") or ())]
    line = " ".join(str(w) for w in words)
    return [(host.strip("'\""), int(port)) for host, port in _WAIT_LOOP.findall(line)]


def service_of(host: str, namespace: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of the Service ``host`` resolves to in cluster DNS, else None."""
    parts = host.rstrip(".").split(".")
    if len(parts) == 1:
        return namespace, parts[0]
    if len(parts) == 2 or parts[2:] in (["svc"], ["svc", "cluster", "local"]):
        return parts[1], parts[0]
    return None


def _answers(lookup: Lookup, namespace: str, name: str, port: int) -> bool:
    svc = lookup("Service", namespace, name)
    if svc is None:
        return False
    ports = {int(p.get("port", 0)) for p in (svc.get("spec") or {}).get("ports") or ()}
    if port not in ports:
        return False
    endpoints = lookup("Endpoints", namespace, name)
    subsets = (endpoints or {}).get("subsets") or ()
    return any(s.get("addresses") for s in subsets)


def tcp_wait_problem(container: Mapping[str, Any], namespace: str, lookup: Lookup) -> str | None:
    """Why the container's wait loop would not finish yet (None: every host answers)."""
    for host, port in tcp_waits(container):
        target = service_of(host, namespace)
        if target is None:
            continue
        if not _answers(lookup, target[0], target[1], port):
            return f"{host}:{port} does not answer (no Service with ready endpoints)"
    return None
