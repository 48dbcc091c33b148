"""Benchmark: N NIMServices from NVIDIA's standalone sample, the operator in its own process.

Run: ``.venv/bin/python -m tests.bench.nim_scale [--count 200 1000] [--steady-seconds S]
[--later-seconds S] [--profile]``

``python -m nimctl localcluster`` (the API server, with the simulator and the
``many-nodes`` profile) and ``python -m nimctl run`` (the operator, with its own
ServiceAccount kubeconfig) are two child processes; this process is the client.
The client creates N NIMServices (``standalone-basic-llm``, names varied) with
16 requests in flight, all sharing one NIMCache. Printed figures:

* operator CPU during creation (from the first create until every Deployment
  exists, read from ``/proc/<pid>/stat``) and per NIMService;
* time until every Deployment exists, beside the time the same client needs to
  create as many plain ConfigMaps as the operator wrote (same server, same run,
  after the operator is done) and their ratio;
* the operator's writes per NIMService from the API server's audit log (by verb
  and resource; Events apart);
* writes per minute in steady state, and the operator's CPU meanwhile;
* the operator's RSS at the end and ``--later-seconds`` later (before the plain
  ConfigMaps, which the operator caches too: its RSS with them is printed apart).

With ``--bare-api-server`` the simulator (localcluster's controllers, scheduler
and kubelets) is stalled from the first create until every Deployment exists,
then resumed: the server is then an API server alone, as the issue's measurement
on a real kube-apiserver, so the ratio compares the operator's pace with the API
server's. Without it the same core also runs every ReplicaSet, Pod and status
write of the NIMServices already created, which plain ConfigMaps do not cost.

With ``--profile`` (or ``NIMCTL_BENCH_PROFILE=1``) the operator's creation window
is profiled and the top 15 functions by cumulative (and own) time are printed.
With ``NIMCTL_BENCH_PROFILE_SERVER=1`` py-spy samples the API server over the
same window (until every Deployment exists). ``NIMCTL_BENCH_PROFILE_UNTIL=quiet``
extends both profiles until the operator is quiet (the status churn after creation).
``--operator-arg`` passes one more argument to ``nimctl run`` (repeat it).
The figures never fail on a time. The default N is 200 (a 2-core machine); the
issue's figures are at ``--count 1000``.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import os
import tempfile
import time
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from nimctl.operator import install_crds
from nimctl_runtime.client import Client
from tests.bench._separate import (
    WRITE_VERBS,
    audit,
    by_resource,
    cluster_endpoint,
    operator_kubeconfig,
    print_profile,
    print_server_profile,
    proc_cpu,
    profiling_requested,
    server_profiling_requested,
    start_cluster,
    start_operator,
    wait_for,
    writes,
)
from tests.ports import free_ports

NS = "nim-scale"
SAMPLE = (
    Path(__file__).resolve().parents[2]
    / ".."
    / "shared"
    / "nvidia-samples"
    / "golden-inputs"
    / "standalone-basic-llm.yaml"
)
IN_FLIGHT = 16


def _reconciles(port: int, controller: str = "nimservice") -> int:
    """``controller_runtime_reconcile_total`` of ``controller`` (all results) from /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("controller_runtime_reconcile_total{") and (
            f'controller="{controller}"' in line
        ):
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


def _sample() -> tuple[dict[str, Any], dict[str, Any]]:
    docs = list(YAML(typ="safe").load_all(SAMPLE.read_text()))
    cache = next(d for d in docs if d["kind"] == "NIMCache")
    svc = next(d for d in docs if d["kind"] == "NIMService")
    for d in (cache, svc):
        d["metadata"]["namespace"] = NS
    return cache, svc


async def _create(admin: Client, objs: list[dict[str, Any]]) -> None:
    sem = asyncio.Semaphore(IN_FLIGHT)

    async def one(o: dict[str, Any]) -> None:
        async with sem:
            await admin.create(o)

    await asyncio.gather(*(one(o) for o in objs))


async def _count(admin: Client, verb: str, resource: str) -> int:
    return sum(
        1
        for r in await audit(admin, verb=verb, resource=resource)
        if r["verb"] == verb and r["resource"] == resource and (r["code"] or 0) < 300
    )


async def run(
    count: int,
    steady: float,
    later: float,
    profile: bool,
    quiet_seconds: float = 15.0,
    bare: bool = False,
    operator_args: tuple[str, ...] = (),
) -> None:
    if not SAMPLE.exists():
        print(f"skipped: NVIDIA's sample is not at {SAMPLE}")
        return
    tmp = Path(tempfile.mkdtemp(prefix="nimctl-nim-scale-"))
    cluster = start_cluster(tmp, profile="many-nodes")
    op = None
    try:
        async with Client(str(cluster.kubeconfig)) as admin:
            await install_crds(admin)
            server, ca = cluster_endpoint(cluster.kubeconfig)
            op_kc = await operator_kubeconfig(admin, server, ca, tmp / "operator.kubeconfig")
            cache, svc = _sample()
            from nimctl.demo import demo_objects

            for o in demo_objects(NS):
                if o["kind"] in ("Namespace", "Secret"):
                    await admin.create(o)
            await admin.create(cache)
            (metrics_port,) = free_ports(1)
            op = start_operator(
                op_kc,
                tmp,
                [
                    "--disable-nemo-controllers",
                    "--disable-gpu-lifecycle",
                    "--metrics-bind-address",
                    f"127.0.0.1:{metrics_port}",
                    *operator_args,
                ],
                profile=profile,
                env={"OPERATOR_NAMESPACE": "nimctl-bench"},
            )
            name = cache["metadata"]["name"]

            async def cache_ready() -> bool:
                obj = await admin.get("apps.nvidia.com/v1alpha1", "NIMCache", name, NS)
                return (obj.get("status") or {}).get("state") == "Ready"

            if not await wait_for(cache_ready, 300):
                raise RuntimeError(f"the NIMCache never got Ready (log: {op.log})")
            await asyncio.sleep(2.0)
            before = len(await audit(admin))
            services = []
            for i in range(count):
                s = copy.deepcopy(svc)
                s["metadata"]["name"] = f"llm-{i:05d}"
                services.append(s)

            if bare:
                await admin.request("POST", "/debug/simulator/stall")
            op.profile_start()
            if server_profiling_requested():
                cluster.profile_start(tmp / "server.spy")
            reconciles0 = _reconciles(metrics_port)
            cpu0, t0, server0 = op.cpu(), time.monotonic(), proc_cpu(cluster.proc.pid)
            await _create(admin, services)
            t_created = time.monotonic() - t0

            async def all_deployments() -> bool:
                return await _count(admin, "create", "deployments") >= count

            await wait_for(all_deployments, 1800, interval=0.25)
            t_deploy, cpu_deploy = time.monotonic() - t0, op.cpu() - cpu0
            server_deploy = proc_cpu(cluster.proc.pid) - server0
            reconciles_deploy = _reconciles(metrics_port) - reconciles0
            profile_until_quiet = os.environ.get("NIMCTL_BENCH_PROFILE_UNTIL") == "quiet"
            if not profile_until_quiet:
                op.profile_stop()
                cluster.profile_stop()
            if bare:
                await admin.request("POST", "/debug/simulator/resume")

            # Settle: the status writes that follow the Deployments (pods start, Ready).
            async def quiet() -> bool:
                n = len(writes(await audit(admin)))
                await asyncio.sleep(quiet_seconds)
                return len(writes(await audit(admin))) == n

            await wait_for(quiet, 600, interval=0.0)
            t_settled = time.monotonic() - t0
            cpu_settled = op.cpu() - cpu0
            server_settled = proc_cpu(cluster.proc.pid) - server0
            if profile_until_quiet:
                op.profile_stop()
                cluster.profile_stop()
            reconciles_settled = _reconciles(metrics_port) - reconciles0
            records = (await audit(admin))[before:]
            w = writes(records)
            objects = [r for r in w if r["resource"] != "events"]
            events = len(w) - len(objects)
            rss_end = op.rss_mb()
            codes: dict[str, int] = {}
            for r in records:
                if r["code"] is not None and r["code"] >= 300:
                    key = f"{r['verb']} {r['resource']} {r['code']}"
                    codes[key] = codes.get(key, 0) + 1
            created = {
                r["name"]: r["timestamp"]
                for r in (await audit(admin, "admin"))
                if r["verb"] == "create" and r["resource"] == "nimservices"
            }
            lags = sorted(
                (
                    datetime.fromisoformat(r["timestamp"])
                    - datetime.fromisoformat(created[r["name"]])
                ).total_seconds()
                for r in records
                if r["verb"] == "create" and r["resource"] == "deployments" and r["name"] in created
            )

            # Steady state.
            n1, c1 = len(writes(await audit(admin))), op.cpu()
            await asyncio.sleep(steady)
            steady_writes = writes(await audit(admin))[n1:]
            n2, c2 = n1 + len(steady_writes), op.cpu()

            # RSS once settled, before the plain ConfigMaps below: the operator caches every
            # ConfigMap of the cluster, so they would count in its memory too.
            await asyncio.sleep(later)
            rss_later = op.rss_mb()

            # The server's own pace: as many ConfigMaps as the operator wrote objects.
            base = [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"b-{i:06d}", "namespace": NS},
                    "data": {"k": "v"},
                }
                for i in range(len(objects))
            ]
            tb = time.monotonic()
            await _create(admin, base)
            t_base = time.monotonic() - tb
            await asyncio.sleep(5.0)
            rss_with_base = op.rss_mb()

            print(
                f"NIMServices                         {count}"
                + ("   (simulator stalled until every Deployment exists)" if bare else "")
            )
            print(f"client creates done                 {t_created:8.1f} s")
            print(f"time to all Deployments             {t_deploy:8.1f} s")
            print(
                f"same client, {len(objects)} ConfigMaps, {IN_FLIGHT} in flight "
                f"{t_base:6.1f} s  ratio {t_deploy / max(t_base, 1e-9):.2f} (aim <= 2)"
            )
            print(
                f"operator CPU to all Deployments     {cpu_deploy:8.2f} s  "
                f"= {1000 * cpu_deploy / count:.2f} ms per NIMService (aim <= 3)"
            )
            print(
                f"API server CPU meanwhile            {server_deploy:8.2f} s  "
                f"({server_deploy / max(t_deploy, 1e-9):.2f} cores; "
                f"{'simulator stalled' if bare else 'simulator included'})"
            )
            print(
                f"API server CPU until quiet          {server_settled:8.2f} s  "
                f"= {1000 * server_settled / count:.2f} ms per NIMService "
                f"({'simulator resumed at all Deployments' if bare else 'every rollout'}, "
                f"{quiet_seconds:.0f} s quiet wait included)"
            )
            print(
                f"operator CPU until quiet            {cpu_settled:8.2f} s  "
                f"= {1000 * cpu_settled / count:.2f} ms per NIMService (quiet after {t_settled:.0f} s)"
            )
            print(
                f"NIMService reconciles per NIMService {reconciles_deploy / count:7.2f} to all "
                f"Deployments, {reconciles_settled / count:.2f} until quiet"
            )
            if lags:
                print(
                    f"NIMService create -> its Deployment  p50 {lags[len(lags) // 2]:.1f} s"
                    f"  p90 {lags[int(len(lags) * 0.9)]:.1f} s  max {lags[-1]:.1f} s"
                )
            if codes:
                print(f"operator requests answered >= 300  {codes}")
            print(f"writes per NIMService (audit)       {len(objects) / count:8.2f}   (today 6.8)")
            print(f"  Events per NIMService             {events / count:8.2f}")
            for key, n in by_resource(objects).items():
                print(f"    {key:<38} {n / count:6.2f}")
            print(f"steady writes/min                   {(n2 - n1) * 60 / steady:8.1f}   (aim 0)")
            reads = [r for r in records if r["verb"] not in WRITE_VERBS and r["verb"] != "watch"]
            print(
                f"other requests per NIMService       {len(reads) / count:8.2f}   (reads, not watches)"
            )
            for key, n in by_resource(reads).items():
                print(f"    {key:<38} {n / count:6.2f}")
            if steady_writes:
                print(f"  steady writes by resource         {by_resource(steady_writes)}")
            print(f"steady operator CPU                 {(c2 - c1) / steady:8.4f} cores")
            print(f"operator RSS at end                 {rss_end:8.1f} MB  (aim <= 150 at 1000)")
            print(f"operator RSS {later:.0f} s later            {rss_later:8.1f} MB")
            print(f"  then with {len(base)} plain ConfigMaps cached too {rss_with_base:8.1f} MB")
            print_profile(
                op.profile_out,
                f"creating {count} NIMServices"
                + (" and until quiet" if profile_until_quiet else ""),
            )
            print_server_profile(cluster.profile_out, f"creating {count} NIMServices")
    finally:
        if op is not None:
            op.stop()
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, nargs="+", default=[200])
    parser.add_argument("--steady-seconds", type=float, default=30.0)
    parser.add_argument("--later-seconds", type=float, default=30.0)
    parser.add_argument(
        "--quiet-seconds",
        type=float,
        default=15.0,
        help="settled once the operator wrote nothing for this long (then the steady window)",
    )
    parser.add_argument("--profile", action="store_true", help="print the operator's profile")
    parser.add_argument(
        "--bare-api-server",
        action="store_true",
        help="stall localcluster's simulator until every Deployment exists (an API server alone)",
    )
    parser.add_argument(
        "--operator-arg",
        action="append",
        default=[],
        help="one more argument for `nimctl run` (repeat it), e.g. --operator-arg=--max-concurrent-reconciles=8",
    )
    args = parser.parse_args()
    for n in args.count:
        asyncio.run(
            run(
                n,
                args.steady_seconds,
                args.later_seconds,
                profiling_requested(args.profile),
                args.quiet_seconds,
                args.bare_api_server,
                tuple(args.operator_arg),
            )
        )


if __name__ == "__main__":
    main()
