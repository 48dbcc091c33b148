"""Benchmark: NVIDIA's sample ClusterPolicy on N bare simulated GPU nodes (default 100 and 1000).

Run: ``.venv/bin/python -m tests.bench.clusterpolicy_bench [--nodes 100 1000] [--steady-seconds S]``

With ``NIMCTL_BENCH_PROFILE=DIR`` set, cProfile statistics are written to
``DIR/operator-N.prof`` (the operator, from applying the ClusterPolicy until
ready) and ``DIR/cluster-N.prof`` (the cluster process, its whole life), to read
with ``python -m pstats``.

The LocalCluster (API server and the simulated GPU stack on every node) runs
in a child process, so the memory figures are the operator's alone. For each
size, printed figures:

* time from applying the ClusterPolicy to ``ready``/``Reconciled`` with every
  GPU node advertising ``nvidia.com/gpu``;
* the operator's CPU time until then (this process; the cluster runs in the child);
* API writes the operator sent, in total and per node (Events apart), by kind;
* writes per minute once ready (aim 0);
* bytes the GPU cache holds per node (trimmed Node + driver pod, as stored)
  and, with ``--memory``, the Python memory the operator's caches take per
  node (tracemalloc over ``nimctl_runtime/cache``), and their ratio (aim
  under 1.5).

The operator runs only the ClusterPolicy and node-labelling controllers (the
driver upgrade controller of the same ``gpu`` group is left out: its cache and
writes are its own).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import itertools
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from nimctl.cli import build_parser
from nimctl.operator import compose_operator, install_crds
from nimctl_runtime.client import Client
from tests.integration.controllers.harness import CountingClient, Operator

NS = "gpu-operator"
SAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "clusterpolicy-defaults.yaml"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _profile(path: Path, nodes: int) -> None:
    profile = {
        "description": f"{nodes} bare GPU nodes",
        "pools": [
            {
                "namePrefix": "gpu-node",
                "count": nodes,
                "cpu": "96",
                "memory": "1536Gi",
                "labels": {"feature.node.kubernetes.io/pci-10de.present": "true"},
                "annotations": {
                    "localcluster.nimctl.io/gpus": "8",
                    "localcluster.nimctl.io/gpu-product": "NVIDIA-H100-80GB-HBM3",
                    "localcluster.nimctl.io/gpu-memory": "81559",
                    "localcluster.nimctl.io/mig-capable": "false",
                },
            }
        ],
    }
    with path.open("w") as f:
        YAML(typ="safe").dump(profile, f)


async def _serve_cluster(kubeconfig: str, profile: str) -> None:
    from localcluster import LocalCluster

    async with LocalCluster(profile=profile, history_size=200_000) as cluster:
        cluster.write_kubeconfig(kubeconfig)
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, sys.stdin.read)


def _profile_dir() -> Path | None:
    value = os.environ.get("NIMCTL_BENCH_PROFILE")
    return Path(value) if value else None


async def _advertising(admin: Client) -> int:
    items = (await admin.list("v1", "Node"))["items"]
    return sum(
        1 for n in items if ((n.get("status") or {}).get("allocatable") or {}).get("nvidia.com/gpu")
    )


async def _policy_reason(admin: Client) -> tuple[str, str]:
    obj = await admin.get("nvidia.com/v1", "ClusterPolicy", "cluster-policy")
    status = obj.get("status") or {}
    ready: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {}
    )
    return str(status.get("state", "")), str(ready.get("reason", ""))


def _gpu_cache(manager: Any) -> Any:
    for slot in getattr(manager, "_other_runnables", []):
        cache = slot.runnable
        if ("v1", "Node") in getattr(cache, "by_object", {}) and getattr(cache, "namespace", None):
            return cache
    raise RuntimeError("the GPU cache is not running")


def _cached_bytes(cache: Any, kinds: tuple[tuple[str, str], ...]) -> int:
    total = 0
    for gvk, informer in cache._informers.items():
        if gvk in kinds:
            total += sum(len(e.data) for e in informer.store._items.values())
    return total


def _writes_by_kind(writes: list[tuple[str, str]]) -> dict[str, int]:
    kinds: dict[str, int] = {}
    for method, path in writes:
        parts = path.split("?")[0].split("/")
        resource = f"{parts[-2]}/status" if parts[-1] == "status" else parts[-2]
        if method == "POST":
            resource = parts[-1]
        key = f"{method} {resource}"
        kinds[key] = kinds.get(key, 0) + 1
    return dict(sorted(kinds.items()))


async def _start_gpu_operator(kubeconfig: Path) -> Operator:
    """An operator running only the ClusterPolicy and node-labelling controllers.

    Every controller group is off in the composition; the two controllers are
    added on their own, so the figures are theirs (the driver upgrade
    controller, also in the ``gpu`` group, has its own cache and writes).
    """
    from controllers.gpu.setup import setup_gpu
    from controllers.setup import SetupOptions, discover_capabilities

    client = CountingClient(str(kubeconfig))
    args = build_parser().parse_args(
        [
            "local",
            "--disable-webhooks",
            "--disable-nim-controllers",
            "--disable-nemo-controllers",
            "--disable-gpu-lifecycle",
        ]
    )
    manager = await compose_operator(client, args, model_query=None, leader_election=False)
    setup_gpu(manager, client, SetupOptions(capabilities=await discover_capabilities(client)))
    stop = asyncio.Event()
    task = asyncio.create_task(manager.start(stop))
    return Operator(client=client, manager=manager, stop=stop, task=task)


async def run(nodes: int, steady_seconds: float, memory: bool) -> tuple[int, int, int]:
    """One size; returns ``(nodes, cache memory, cached bytes)`` (memory 0 without --memory)."""
    tmp = Path(tempfile.mkdtemp(prefix="nimctl-cp-bench-"))
    profile = tmp / "profile.yaml"
    _profile(profile, nodes)
    kubeconfig = str(tmp / "kubeconfig")
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.bench.clusterpolicy_bench",
            "--serve-cluster",
            kubeconfig,
            str(profile),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    loop = asyncio.get_running_loop()
    while (line := await loop.run_in_executor(None, child.stdout.readline)).strip() != "ready":
        if not line:
            raise RuntimeError("the cluster process exited before it was ready")
    os.environ["OPERATOR_NAMESPACE"] = NS
    if memory:
        tracemalloc.start()
    try:
        async with Client(kubeconfig) as admin:
            await install_crds(admin)
            await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            op = await _start_gpu_operator(Path(kubeconfig))
            await asyncio.sleep(2.0)
            writes0 = len(op.client.object_writes())
            policy = YAML(typ="safe").load(SAMPLE.read_text())
            profiler = cProfile.Profile() if _profile_dir() else None
            t0, cpu0 = time.monotonic(), _cpu()
            if profiler is not None:
                profiler.enable()
            await admin.create(policy)
            while True:
                advertising = await _advertising(admin)
                state, reason = await _policy_reason(admin)
                if advertising == nodes and (state, reason) == ("ready", "Reconciled"):
                    break
                print(
                    f"  ... {advertising}/{nodes} nodes advertise GPUs, policy {state}/{reason}"
                    f" after {time.monotonic() - t0:.0f} s",
                    flush=True,
                )
                await asyncio.sleep(2.0)
            t_ready, cpu_ready = time.monotonic() - t0, _cpu() - cpu0
            out = _profile_dir()
            if profiler is not None and out is not None:
                profiler.disable()
                out.mkdir(parents=True, exist_ok=True)
                profiler.dump_stats(str(out / f"operator-{nodes}.prof"))
            # Settle: late status changes of the last pods.
            settle = time.monotonic()
            while time.monotonic() - settle < 120:
                before = len(op.client.object_writes())
                await asyncio.sleep(5.0)
                if len(op.client.object_writes()) == before:
                    break
            writes = op.client.object_writes()[writes0:]
            w1 = len(op.client.object_writes())
            await asyncio.sleep(steady_seconds)
            steady = op.client.object_writes()[w1:]
            cache = _gpu_cache(op.manager)
            cached = _cached_bytes(cache, (("v1", "Node"), ("v1", "Pod")))
            cache_mem = 0
            snapshot = None
            if memory:
                snapshot = tracemalloc.take_snapshot().filter_traces(
                    [tracemalloc.Filter(True, "*nimctl_runtime/cache/*")]
                )
                cache_mem = sum(s.size for s in snapshot.statistics("filename"))
            print(f"GPU nodes                       {nodes}")
            print(f"time to ready (all advertise)   {t_ready:8.1f} s")
            print(f"operator CPU to ready           {cpu_ready:8.1f} s")
            print(f"operator writes, total          {len(writes):8d}")
            print(f"operator writes per node        {len(writes) / nodes:8.2f}")
            print(f"  by kind                       {_writes_by_kind(writes)}")
            print(
                f"writes/min once ready           {len(steady) * 60.0 / steady_seconds:8.1f}"
                "   (aim 0)"
            )
            if steady:
                print(f"  steady writes by kind         {_writes_by_kind(steady)}")
            print(
                f"cached bytes per node           {cached / nodes:8.0f} B (trimmed Node + driver pod)"
            )
            if snapshot is None:
                print("cache memory per node           (run with --memory)")
                await op.shutdown()
                return nodes, 0, cached
            print(
                f"cache memory per node           {cache_mem / nodes:8.0f} B (all GPU-cache stores)"
            )
            for stat in snapshot.statistics("lineno")[:5]:
                print(f"  {stat.size / nodes:8.0f} B/node at {stat.traceback[0]}")
            print(
                f"memory / cached bytes           {cache_mem / max(cached, 1):8.2f}   (aim < 1.5)"
            )
            await op.shutdown()
            return nodes, cache_mem, cached
    finally:
        tracemalloc.stop()
        if child.stdin is not None:
            child.stdin.close()
        child.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--steady-seconds", type=float, default=30.0)
    parser.add_argument(
        "--memory",
        action="store_true",
        help="trace the caches' memory (tracemalloc: the operator runs 2-3x slower)",
    )
    parser.add_argument("--serve-cluster", nargs=2, metavar=("KUBECONFIG", "PROFILE"))
    args = parser.parse_args()
    if args.serve_cluster:
        from nimctl_runtime.logsetup import configure_logging

        configure_logging("console", "warning")
        out = _profile_dir()
        if out is None:
            asyncio.run(_serve_cluster(*args.serve_cluster))
            return
        nodes = YAML(typ="safe").load(Path(args.serve_cluster[1]).read_text())["pools"][0]["count"]
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            asyncio.run(_serve_cluster(*args.serve_cluster))
        finally:
            profiler.disable()
            out.mkdir(parents=True, exist_ok=True)
            profiler.dump_stats(str(out / f"cluster-{nodes}.prof"))
        return
    results = [asyncio.run(run(n, args.steady_seconds, args.memory)) for n in args.nodes]
    if args.memory and len(results) > 1:
        # Flat memory per node: what each added node costs, between the sizes run.
        print("memory per node added (between sizes; fixed costs cancel out):")
        for (n0, m0, c0), (n1, m1, c1) in itertools.pairwise(results):
            added = max(n1 - n0, 1)
            print(
                f"  {n0} -> {n1} nodes: {(m1 - m0) / added:8.0f} B per node "
                f"({(c1 - c0) / added:.0f} B cached), ratio {(m1 - m0) / max(c1 - c0, 1):.2f}"
            )


if __name__ == "__main__":
    main()
