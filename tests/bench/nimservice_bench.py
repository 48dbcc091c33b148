"""Benchmark: N NIMServices sharing one ready NIMCache (default N = 1000).

Run: ``.venv/bin/python -m tests.bench.nimservice_bench [--count N] [--steady-seconds S]``

The LocalCluster runs in a child process so the CPU and memory figures are the
operator's alone. Printed figures:

* time from creating all NIMServices at once to all Ready;
* API writes per NIMService (objects + status), by verb and resource, and
  Events per NIMService;
* the same API server's time for the same writes from one client with 16 in
  flight (the objects the operator created, copied into another namespace,
  plus the status patches), and the ratio of the operator's time to it;
* writes per minute in steady state with N services held NotReady (their pods
  cannot be scheduled: nodeSelector matches no node);
* writes during a full resync (every NIMService re-enqueued) and after an
  operator restart (fresh caches): both must be 0;
* operator CPU seconds and resident memory at N services: measured when all
  are Ready, before the baseline's own client writes in this process (and
  again after it, and at 2N services);
* with ``--memory``: where the memory goes (objects and stored bytes per
  informer, tracemalloc's top lines per NIMService, live objects by type);
  tracemalloc makes the operator slower and bigger, so the RSS of such a run
  is not the figure to quote. ``--until-ready`` stops after those figures.

NVIDIA's figures for comparison (issue 6): 8.45 writes per NIMService on a
real API server, about 4 writes per NotReady service per minute, 198 MB RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from controllers.reconciler import KindReconciler
from manifests.labels import MANAGED_BY_LABEL
from nimctl.demo import apply_objects, demo_objects
from nimctl.operator import install_crds
from nimctl_runtime.client import Client
from nimctl_runtime.reconcile import Request
from tests.bench._memory_report import connections, informer_table, object_census, traced_top
from tests.integration.controllers.harness import API, start_operator

NS = "bench"


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _serve_cluster(kubeconfig: str) -> None:
    from localcluster import LocalCluster

    # The default profile's 3 nodes hold 330 pods; the scale profile holds thousands.
    async with LocalCluster(profile="many-nodes") as cluster:
        cluster.write_kubeconfig(kubeconfig)
        cluster.write_kubeconfig(kubeconfig + ".operator", user="nimctl-operator")
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)


def _service(i: int, *, schedulable: bool) -> dict[str, Any]:
    svc = next(o for o in demo_objects(NS) if o["kind"] == "NIMService")
    svc["metadata"]["name"] = f"svc-{i:05d}"
    svc["spec"]["storage"]["nimCache"]["name"] = "shared"
    svc["spec"]["resources"] = {}
    if not schedulable:
        svc["spec"]["nodeSelector"] = {"example.com/nowhere": "true"}
    return svc


async def _create_all(admin: Client, objs: list[dict[str, Any]], concurrency: int = 64) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(o: dict[str, Any]) -> None:
        async with sem:
            await admin.create(o)

    await asyncio.gather(*(one(o) for o in objs))


def _by_verb_and_resource(writes: list[tuple[str, str]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for method, path in writes:
        parts = path.split("?")[0].rstrip("/").split("/")
        if parts[-1] == "status":
            resource = f"{parts[-3]}/status"
        elif method == "POST":
            resource = parts[-1]
        else:
            resource = parts[-2]
        key = f"{method} {resource}"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


_OWNED = (
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
)


def _copy_for(obj: dict[str, Any], name: str, namespace: str) -> dict[str, Any]:
    meta = obj["metadata"]
    out = {k: v for k, v in obj.items() if k != "status"}
    # Without the managed-by label: the operator's filtered cache would otherwise
    # hold the 5 x N copies too (the later RSS figures are the operator's own).
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k != MANAGED_BY_LABEL}
    out["metadata"] = {
        "name": name,
        "namespace": namespace,
        "labels": labels,
        "annotations": meta.get("annotations") or {},
    }
    if obj["kind"] == "Service":
        out["spec"] = {k: v for k, v in obj["spec"].items() if not k.startswith("clusterIP")}
    if obj["kind"] == "Deployment":
        # The same object to write, without making the simulator run 1,000 more pods.
        out["spec"] = {**obj["spec"], "replicas": 0}
    return out


async def _baseline(admin: Client, count: int, status_patches: int) -> float:
    """Seconds for one client, 16 in flight, to write what the operator wrote for ``count``."""
    ns = "baseline"
    await apply_objects(
        admin, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}]
    )
    templates = [await admin.get(av, kind, "svc-00000", NS) for av, kind in _OWNED]
    objs = [_copy_for(t, f"b-{i:05d}", ns) for i in range(count) for t in templates]
    names = [f"svc-{i:05d}" for i in range(count)]
    sem = asyncio.Semaphore(16)

    async def create(o: dict[str, Any]) -> None:
        async with sem:
            await admin.create(o)

    async def patch(name: str) -> None:
        async with sem:
            await admin.patch(
                API,
                "NIMService",
                name,
                {"status": {"state": "Ready"}},
                namespace=NS,
                subresource="status",
            )

    t0 = time.monotonic()
    await asyncio.gather(*(create(o) for o in objs))
    await asyncio.gather(*(patch(names[i % count]) for i in range(status_patches)))
    return time.monotonic() - t0


async def _count_state(admin: Client, state: str, prefix: str) -> int:
    items = (await admin.list(API, "NIMService", NS))["items"]
    return sum(
        1
        for o in items
        if o["metadata"]["name"].startswith(prefix)
        and (o.get("status") or {}).get("state") == state
    )


async def _controllers(manager: Any) -> dict[str, Any]:
    out = {}
    for slot in getattr(manager, "_leader_runnables", []):
        r = slot.runnable
        if hasattr(r, "enqueue") and hasattr(r, "name"):
            out[r.name] = r
    return out


async def _drain(ctrl: Any, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(ctrl.queue) == 0 and ctrl.in_flight() == 0:
            await asyncio.sleep(0.5)
            if len(ctrl.queue) == 0 and ctrl.in_flight() == 0:
                return
        await asyncio.sleep(0.2)


async def main(
    count: int,
    steady_seconds: float,
    workers: int,
    *,
    memory: bool = False,
    until_ready: bool = False,
) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="nimctl-bench-"))
    kubeconfig = str(tmp / "kubeconfig")
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.bench.nimservice_bench", "--serve-cluster", kubeconfig],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    loop = asyncio.get_running_loop()
    line = await loop.run_in_executor(None, child.stdout.readline)
    assert line.strip() == "ready", line
    if memory and not tracemalloc.is_tracing():
        tracemalloc.start()  # PYTHONTRACEMALLOC=N traces imports too, with N frames
    try:
        async with Client(kubeconfig) as admin:
            await install_crds(admin)
            await apply_objects(admin, [o for o in demo_objects(NS) if o["kind"] != "NIMService"])
            cache = next(o for o in demo_objects(NS) if o["kind"] == "NIMCache")
            cache["metadata"]["name"] = "shared"
            await apply_objects(admin, [cache])
            op = await start_operator(
                Path(kubeconfig + ".operator"),
                model_query=None,
                max_concurrent_reconciles=workers,
            )
            while ((await admin.get(API, "NIMCache", "shared", NS)).get("status") or {}).get(
                "state"
            ) != "Ready":
                await asyncio.sleep(0.5)
            cpu0, writes0 = _cpu(), len(op.client.writes)
            objs0 = len(op.client.object_writes())

            t0 = time.monotonic()
            await _create_all(admin, [_service(i, schedulable=True) for i in range(count)])
            t_created = time.monotonic() - t0
            while (ready := await _count_state(admin, "Ready", "svc-")) < count:
                print(
                    f"  ... {ready}/{count} Ready after {time.monotonic() - t0:.0f} s", flush=True
                )
                await asyncio.sleep(2.0)
            t_ready = time.monotonic() - t0
            await asyncio.sleep(2.0)
            cpu_ready = _cpu() - cpu0
            obj_writes = len(op.client.object_writes()) - objs0
            rss_ready = _rss_mb()
            all_writes = len(op.client.writes) - writes0
            print(f"NIMServices                    {count}")
            print(f"create all (client side)       {t_created:8.1f} s")
            print(f"time to all Ready              {t_ready:8.1f} s   ({ready} ready)")
            print(
                f"writes per NIMService          {obj_writes / count:8.2f}   (aim <= 7; NVIDIA 8.45)"
            )
            print(f"  Events per NIMService        {(all_writes - obj_writes) / count:8.2f}")
            breakdown = _by_verb_and_resource(op.client.object_writes()[objs0:])
            for key, n in breakdown.items():
                print(f"    {key:<38} {n / count:6.2f}")
            print(f"operator CPU to Ready          {cpu_ready:8.1f} s")
            print(
                f"operator RSS at {count} Ready   {rss_ready:8.1f} MB  (aim <= 198; NVIDIA 198 MB)"
            )
            connections(op.client, "operator client")
            connections(admin, "bench client")
            if memory:
                cached = informer_table(op.manager)
                traced_top(per=count, unit="NIMService")
                object_census(per=max(cached, 1))
            if until_ready:
                await op.shutdown()
                return
            status_patches = sum(n for k, n in breakdown.items() if k.endswith("/status"))
            t_base = await _baseline(admin, count, status_patches)
            print(f"same writes, 1 client, 16 in flight {t_base:6.1f} s")
            print(f"ratio (time to Ready / that)   {t_ready / t_base:8.2f}   (aim <= 2)")
            print(f"process RSS after the baseline {_rss_mb():8.1f} MB  (its client's garbage too)")

            # Steady state with services held NotReady.
            await _create_all(admin, [_service(count + i, schedulable=False) for i in range(count)])
            while await _count_state(admin, "NotReady", "svc-") < count:
                await asyncio.sleep(1.0)
            # Settle: the rollout messages change a few times while the pods go Pending,
            # and a message-only change is written at most once per message interval,
            # so the last of them lands up to one interval later. Quiet means no write
            # for longer than that interval.
            quiet = KindReconciler.message_interval + 5.0
            settle_start = time.monotonic()
            while time.monotonic() - settle_start < 240:
                before = len(op.client.object_writes())
                await asyncio.sleep(quiet)
                if len(op.client.object_writes()) == before:
                    break
            w1, c1 = len(op.client.object_writes()), _cpu()
            await asyncio.sleep(steady_seconds)
            w2, c2 = len(op.client.object_writes()), _cpu()
            per_min = (w2 - w1) * 60.0 / steady_seconds
            kinds: dict[str, int] = {}
            for method, path in op.client.object_writes()[w1:w2]:
                parts = path.split("/")
                key = f"{method} {'/'.join(parts[-2:]) if parts[-1] == 'status' else parts[-2]}"
                kinds[key] = kinds.get(key, 0) + 1
            print(
                f"settled after                  {time.monotonic() - settle_start - steady_seconds:8.1f} s"
            )
            if kinds:
                print(f"  steady-state writes by kind  {kinds}")
            print(f"NotReady services              {count}")
            print(f"steady-state writes/min        {per_min:8.1f}   (aim 0; NVIDIA ~4 per service)")
            print(f"steady-state CPU               {(c2 - c1) / steady_seconds:8.3f} cores")

            # Full resync: every NIMService re-enqueued.
            ctrls = await _controllers(op.manager)
            nims = ctrls.get("nimservice")
            if nims is not None:
                w1 = len(op.client.object_writes())
                for o in (await admin.list(API, "NIMService", NS))["items"]:
                    nims.enqueue(Request(NS, o["metadata"]["name"]))
                await _drain(nims)
                print(
                    f"writes during full resync      {len(op.client.object_writes()) - w1:8d}   (must be 0)"
                )
            await op.shutdown()

            # Restart: fresh operator, fresh caches.
            op2 = await start_operator(
                Path(kubeconfig + ".operator"), model_query=None, max_concurrent_reconciles=workers
            )
            await asyncio.sleep(5.0)
            ctrls = await _controllers(op2.manager)
            if "nimservice" in ctrls:
                await _drain(ctrls["nimservice"])
            print(
                f"writes after restart           {len(op2.client.object_writes()):8d}   (must be 0)"
            )
            print(f"operator RSS at {2 * count} services {_rss_mb():8.1f} MB")
            await op2.shutdown()
    finally:
        tracemalloc.stop()
        with contextlib.suppress(Exception):
            assert child.stdin is not None
            child.stdin.close()
        child.wait(timeout=30)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--steady-seconds", type=float, default=65.0)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument(
        "--memory", action="store_true", help="where the memory goes (tracemalloc: slower)"
    )
    parser.add_argument(
        "--until-ready", action="store_true", help="stop once all are Ready (after the RSS)"
    )
    parser.add_argument("--serve-cluster", default=None, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    os.environ.setdefault("NIMCTL_LOG_LEVEL", "warning")
    from nimctl_runtime.logsetup import configure_logging

    configure_logging("json", "warning")
    if ns.serve_cluster:
        tracemalloc.stop()  # PYTHONTRACEMALLOC is for the operator's process, not the cluster's
        asyncio.run(_serve_cluster(ns.serve_cluster))
    else:
        asyncio.run(
            main(
                ns.count,
                ns.steady_seconds,
                ns.workers,
                memory=ns.memory,
                until_ready=ns.until_ready,
            )
        )
