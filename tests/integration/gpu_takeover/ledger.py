"""What nimctl changes on a GPU cluster it takes over, counted.

A take-over is quiet when every operand pod NVIDIA's operator started keeps
running: no DaemonSet gets a new pod template (its generation would go up and
the DaemonSet controller, or the upgrade controller for an ``OnDelete``
driver, would replace pods), no pod is deleted, and no node enters a driver
upgrade. ``Ledger.before`` snapshots the cluster before nimctl starts and
watches the Nodes from then on, so an upgrade that starts and ends between
two looks still counts; ``Ledger.after`` compares with the snapshot.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Any

from nimctl_runtime.client import Client
from nimctl_runtime.meta import Obj, dig

UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
UPGRADE_DONE = "upgrade-done"
UPGRADE_PREFIXES = ("nvidia.com/gpu-driver-upgrade", "nimctl.io/gpu-driver-upgrade")


def _upgrade_marks(node: Obj) -> dict[str, str]:
    """The node's driver-upgrade labels and annotations (NVIDIA's keys and ours)."""
    marks: dict[str, str] = {}
    for where in ("labels", "annotations"):
        for key, value in (dig(node, "metadata", where) or {}).items():
            if key.startswith(UPGRADE_PREFIXES):
                marks[f"{where}:{key}"] = str(value)
    return marks


@dataclass
class Counts:
    """What changed between the snapshot and now."""

    template_changes: list[str] = field(default_factory=list)
    """``DaemonSet/<name>: generation a -> b`` or ``...: pod template differs``."""
    restarts: list[str] = field(default_factory=list)
    """Pods of the snapshot that are gone or terminating (``Pod/<name>``)."""
    upgrades: list[str] = field(default_factory=list)
    """Nodes whose driver-upgrade state left the snapshot's (``Node/<name>: <label>=<state>``)."""
    other_marks: list[str] = field(default_factory=list)
    """Other driver-upgrade labels/annotations that changed (no upgrade by themselves)."""
    daemonset_writes: int = 0
    """Updates nimctl sent to the DaemonSets it took over (metadata only when quiet)."""

    def summary(self) -> str:
        return (
            f"template changes {len(self.template_changes)}, restarts {len(self.restarts)}, "
            f"upgrades {len(self.upgrades)} (DaemonSet writes {self.daemonset_writes})"
        )


@dataclass
class Ledger:
    admin: Client
    namespace: str
    daemonsets: dict[str, Obj] = field(default_factory=dict)
    pods: dict[str, str] = field(default_factory=dict)
    """pod uid -> name"""
    marks: dict[str, dict[str, str]] = field(default_factory=dict)
    """node -> its upgrade marks at the snapshot"""
    seen: list[str] = field(default_factory=list)
    """Driver-upgrade states nodes entered (their state label changed)."""
    other_marks: list[str] = field(default_factory=list)
    """Other driver-upgrade labels/annotations written (bookkeeping, no upgrade)."""
    _task: asyncio.Task[None] | None = None

    async def _snapshot(self) -> str:
        for ds in (await self.admin.list("apps/v1", "DaemonSet", self.namespace))["items"]:
            self.daemonsets[ds["metadata"]["name"]] = ds
        for pod in (await self.admin.list("v1", "Pod", self.namespace))["items"]:
            self.pods[pod["metadata"]["uid"]] = pod["metadata"]["name"]
        nodes = await self.admin.list("v1", "Node")
        for node in nodes["items"]:
            self.marks[node["metadata"]["name"]] = _upgrade_marks(node)
        return str(nodes["metadata"]["resourceVersion"])

    async def _watch_nodes(self, resource_version: str) -> None:
        while True:
            async for event in self.admin.watch(
                "v1", "Node", resource_version=resource_version, allow_bookmarks=True
            ):
                resource_version = str(
                    dig(event.object, "metadata", "resourceVersion") or resource_version
                )
                if event.type not in ("ADDED", "MODIFIED"):
                    continue
                name = event.object["metadata"]["name"]
                marks = _upgrade_marks(event.object)
                before = self.marks.get(name, {})
                state = f"labels:{UPGRADE_STATE}"
                if marks.get(state) != before.get(state):
                    self.seen.append(f"Node/{name}: {UPGRADE_STATE}={marks.get(state)}")
                for key in sorted(set(marks) | set(before)):
                    if key != state and marks.get(key) != before.get(key):
                        self.other_marks.append(f"Node/{name}: {key}={marks.get(key)}")

    @classmethod
    @contextlib.asynccontextmanager
    async def before(cls, admin: Client, namespace: str) -> AsyncIterator[Ledger]:
        ledger = cls(admin, namespace)
        resource_version = await ledger._snapshot()
        ledger._task = asyncio.create_task(ledger._watch_nodes(resource_version))
        try:
            yield ledger
        finally:
            ledger._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await ledger._task

    async def after(self, writes: Iterable[tuple[str, str]] = ()) -> Counts:
        counts = Counts(
            upgrades=list(dict.fromkeys(self.seen)),
            other_marks=list(dict.fromkeys(self.other_marks)),
        )
        now = {
            ds["metadata"]["name"]: ds
            for ds in (await self.admin.list("apps/v1", "DaemonSet", self.namespace))["items"]
        }
        for name, old in self.daemonsets.items():
            new = now.get(name)
            if new is None:
                counts.template_changes.append(f"DaemonSet/{name}: deleted")
                continue
            diff = template_diff(dig(old, "spec", "template"), dig(new, "spec", "template"))
            if new["metadata"].get("generation") != old["metadata"].get("generation") or diff:
                counts.template_changes.append(
                    f"DaemonSet/{name}: generation {old['metadata'].get('generation')} -> "
                    f"{new['metadata'].get('generation')}; " + "; ".join(diff[:12])
                )
        live = {
            pod["metadata"]["uid"]: pod
            for pod in (await self.admin.list("v1", "Pod", self.namespace))["items"]
        }
        for uid, name in self.pods.items():
            pod = live.get(uid)
            if pod is None or dig(pod, "metadata", "deletionTimestamp"):
                counts.restarts.append(f"Pod/{name}")
        names = set(self.daemonsets)
        counts.daemonset_writes = sum(
            1
            for method, path in writes
            if method in ("PUT", "PATCH") and "/daemonsets/" in path
            and path.rsplit("/", 1)[-1] in names
        )  # fmt: skip
        return counts


def template_diff(old: Any, new: Any, path: str = "") -> list[str]:
    """Leaf paths where two JSON values differ (for a readable failure)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted(set(old) | set(new)):
            out += template_diff(old.get(key), new.get(key), f"{path}.{key}")
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        out = []
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out += template_diff(a, b, f"{path}[{i}]")
        return out
    return [] if old == new else [f"{path}: {old!r} -> {new!r}"]
