"""Benchmark: a persistent failure beside healthy NIMServices (issue 18's failure run).

Run: ``.venv/bin/python -m tests.bench.failure_bench [--failing 750] [--healthy 50] [--seconds 240]``

Every Service create in namespace ``failing`` is answered 500 ("failed to
allocate a serviceIP: range is full", as a full service CIDR answers); the
NIMServices in ``healthy`` are unaffected. After the window it prints:

* operator writes (objects, status, Events) and writes per failing NIMService;
* status writes per failing NIMService (aim 1: ``Failed`` is written once);
* log bytes and error-level lines the operator wrote at info level (aim: one
  error line per failing NIMService, no tracebacks);
* how many healthy NIMServices reached Ready (all must).

NVIDIA's operator, same run on a real API server (issue 18): 22,070 writes.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from localcluster import LocalCluster
from localcluster.extensions import extensions_of
from nimctl.demo import apply_objects, demo_objects
from nimctl.operator import install_crds
from nimctl_runtime.client import Client
from tests.bench.nimservice_bench import _by_verb_and_resource
from tests.integration.controllers.harness import API, start_operator

OPERATOR_USER = "nimctl-operator"


class _CountingStream(io.TextIOBase):
    """Counts the bytes, lines, error lines and tracebacks written to it."""

    def __init__(self) -> None:
        self.bytes = 0
        self.error_lines = 0
        self.tracebacks = 0
        self._pending = ""

    def reset(self) -> None:
        self.bytes = self.error_lines = self.tracebacks = 0

    def write(self, text: str) -> int:
        self.bytes += len(text.encode())
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("level") == "error":
                self.error_lines += 1
            if "exception" in entry or "Traceback" in line:
                self.tracebacks += 1
        return len(text)


def _services(namespace: str, count: int, prefix: str) -> list[dict[str, Any]]:
    base = next(o for o in demo_objects(namespace) if o["kind"] == "NIMService")
    out = []
    for i in range(count):
        svc = json.loads(json.dumps(base))
        svc["metadata"]["name"] = f"{prefix}-{i:04d}"
        svc["spec"]["storage"]["nimCache"]["name"] = "shared"
        svc["spec"]["resources"] = {}
        out.append(svc)
    return out


async def _setup_namespace(admin: Client, namespace: str) -> None:
    objs = [o for o in demo_objects(namespace) if o["kind"] not in ("NIMService",)]
    cache = next(o for o in objs if o["kind"] == "NIMCache")
    cache["metadata"]["name"] = "shared"
    await apply_objects(admin, objs)


async def _create(admin: Client, objs: list[dict[str, Any]]) -> None:
    sem = asyncio.Semaphore(32)

    async def one(o: dict[str, Any]) -> None:
        async with sem:
            await admin.create(o)

    await asyncio.gather(*(one(o) for o in objs))


async def main(failing: int, healthy: int, seconds: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="nimctl-failure-bench-"))
    async with LocalCluster(workdir=tmp, profile="many-nodes") as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            await install_crds(admin)
            for ns in ("failing", "healthy"):
                await _setup_namespace(admin, ns)
            stream = _CountingStream()
            saved, sys.stderr = sys.stderr, stream  # type: ignore[assignment]
            try:
                from nimctl_runtime.logsetup import configure_logging

                configure_logging("json", "info")
                op = await start_operator(
                    cluster.write_kubeconfig(tmp / "operator.kubeconfig", user=OPERATOR_USER),
                    model_query=None,
                )
                for ns in ("failing", "healthy"):
                    while (
                        (await admin.get(API, "NIMCache", "shared", ns)).get("status") or {}
                    ).get("state") != "Ready":
                        await asyncio.sleep(0.5)
                extensions_of(cluster).faults.inject_errors(
                    500,
                    verbs="create",
                    resources="services",
                    users=OPERATOR_USER,
                    namespaces="failing",
                )
                stream.reset()
                before = len(op.client.writes)
                t0 = time.monotonic()
                await _create(admin, _services("failing", failing, "bad"))
                await _create(admin, _services("healthy", healthy, "good"))
                await asyncio.sleep(max(0.0, seconds - (time.monotonic() - t0)))
                writes = list(op.client.writes[before:])
                await op.shutdown()
            finally:
                sys.stderr = saved
            items = (await admin.list(API, "NIMService", "healthy"))["items"]
            ready = sum(1 for o in items if (o.get("status") or {}).get("state") == "Ready")
    in_failing = [w for w in writes if "/namespaces/failing/" in w[1]]
    status = [w for w in in_failing if w[1].endswith("/status") and "/nimservices/" in w[1]]
    events = [w for w in writes if "/events" in w[1]]
    print(f"failing / healthy NIMServices  {failing} / {healthy} for {seconds:.0f} s")
    print(f"operator writes                {len(writes):8d}   (aim < 2,000 at 750; NVIDIA 22,070)")
    print(
        f"  in the failing namespace     {len(in_failing):8d}   "
        f"({len(in_failing) / max(failing, 1):.2f} per failing NIMService)"
    )
    print(f"  Events                       {len(events):8d}")
    print(f"status writes per failing      {len(status) / max(failing, 1):8.2f}   (aim 1)")
    print(f"log bytes at info level        {stream.bytes:8d}")
    print(f"  error lines                  {stream.error_lines:8d}   (one per failing NIMService)")
    print(f"  tracebacks                   {stream.tracebacks:8d}   (aim 0)")
    print(f"healthy NIMServices Ready      {ready:8d} / {healthy}")
    _arithmetic(in_failing, failing, seconds)


def _arithmetic(in_failing: list[tuple[str, str]], failing: int, seconds: float) -> None:
    """Why the aim of < 2,000 writes cannot be met: the writes each failing object needs.

    Every failing NIMService needs, before any retry: the objects applied before
    the Service (ServiceAccount, Role, RoleBinding), the Service create that
    fails, its one ``Failed`` status write and the one Event of that
    transition. Retries then cost one failed create each, bounded per object by
    the exponential backoff and in all by the controller's retry bucket
    (client-go's 10 qps, burst 100).
    """
    by = _by_verb_and_resource(in_failing)
    print("writes in the failing namespace, per failing NIMService:")
    for key, n in by.items():
        print(f"    {key:<38} {n / max(failing, 1):6.2f}")
    before_service = sum(
        n for k, n in by.items() if k in ("POST serviceaccounts", "POST roles", "POST rolebindings")
    )
    service_creates = by.get("POST services", 0)
    floor = before_service + 3 * failing  # + one failed create, one status, one Event each
    retries = max(0, service_creates - failing)
    bucket = int(10 * seconds) + 100
    print(
        f"floor without retries          {floor:8d}   = {before_service} creates before the "
        f"Service + {failing} x (failed create + status + Event)"
    )
    print(
        f"retried Service creates        {retries:8d}   (<= {bucket}: the 10 qps retry bucket "
        f"over {seconds:.0f} s + burst 100)"
    )
    print(
        f"unreachable: even the floor is {floor / 2000:.1f}x the aim of 2,000"
        if floor >= 2000
        else "the floor is below the aim of 2,000"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--failing", type=int, default=750)
    parser.add_argument("--healthy", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=240.0)
    ns = parser.parse_args()
    asyncio.run(main(ns.failing, ns.healthy, ns.seconds))
