"""Benchmark: NVIDIA's sample ClusterPolicy over N fake GPU Nodes, the operator in its own process.

Run: ``.venv/bin/python -m tests.bench.gpu_scale [--nodes 200 1000] [--window S]
[--heartbeats N] [--profile]``

``python -m nimctl localcluster`` serves N GPU Nodes carrying NFD's PCI label
(the simulator runs the GPU stack on each); ``python -m nimctl run`` (GPU
lifecycle controllers only, its own ServiceAccount kubeconfig) is the operator.
For each size, printed figures:

* operator CPU over a window of ``--window`` seconds from applying the
  ClusterPolicy (the issue's window is 180 s), the Node watch events in it and
  the CPU per Node event; whether the policy was ready within it;
* the operator's writes in the window (audit log, by verb and resource);
* peak RSS (``VmHWM``) and RSS at the end;
* then ``--heartbeats`` Node status patches as a kubelet sends them (only the
  conditions' heartbeat times change), 16 in flight, and the operator CPU they
  cost, in total and per heartbeat (aim below 0.2 ms), and the writes meanwhile.

With ``--profile`` (or ``NIMCTL_BENCH_PROFILE=1``) the window and the heartbeats
are profiled and the top 15 functions by cumulative (and own) time are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from ruamel.yaml import YAML

from nimctl.operator import install_crds
from nimctl_runtime.client import Client
from tests.bench._separate import (
    audit,
    by_resource,
    cluster_endpoint,
    operator_kubeconfig,
    print_profile,
    proc_hwm_mb,
    profiling_requested,
    start_cluster,
    start_operator,
    writes,
)

NS = "gpu-operator"
SAMPLE = Path(__file__).parents[2] / "docs" / "examples" / "clusterpolicy-defaults.yaml"
IN_FLIGHT = 16


def _profile(path: Path, nodes: int) -> None:
    profile = {
        "description": f"{nodes} bare GPU nodes",
        "pools": [
            {
                "namePrefix": "gpu-node",
                "count": nodes,
                "cpu": "96",
                "memory": "1536Gi",
                "labels": {
                    "feature.node.kubernetes.io/pci-10de.present": "true",
                    "feature.node.kubernetes.io/kernel-version.full": "6.8.0-45-generic",
                    "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
                    "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
                },
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


async def _policy_ready(admin: Client) -> bool:
    obj = await admin.get("nvidia.com/v1", "ClusterPolicy", "cluster-policy")
    return str((obj.get("status") or {}).get("state", "")) == "ready"


class NodeEvents:
    """Counts the Node watch events this client sees (the ones the operator is sent)."""

    def __init__(self, admin: Client) -> None:
        self.admin = admin
        self.count = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self, rv: str) -> None:
        while True:
            async for ev in self.admin.watch("v1", "Node", resource_version=rv):
                if ev.type == "BOOKMARK":
                    rv = ev.object["metadata"]["resourceVersion"]
                    continue
                self.count += 1
                rv = ev.object["metadata"]["resourceVersion"]

    async def start(self) -> None:
        rv = (await self.admin.list("v1", "Node"))["metadata"]["resourceVersion"]
        self._task = asyncio.create_task(self._run(rv))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


async def _heartbeats(admin: Client, names: list[str], count: int) -> None:
    sem = asyncio.Semaphore(IN_FLIGHT)
    nodes = {n: await admin.get("v1", "Node", n) for n in names}

    start = datetime.now(UTC).timestamp()

    async def beat(i: int) -> None:
        name = names[i % len(names)]
        # A kubelet's heartbeat times are whole seconds: one second more per beat, so
        # every patch changes the Node (a patch that changes nothing sends no event).
        now = datetime.fromtimestamp(start + i, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        conditions = [
            {**c, "lastHeartbeatTime": now}
            for c in (nodes[name].get("status") or {}).get("conditions") or []
        ]
        async with sem:
            await admin.patch(
                "v1",
                "Node",
                name,
                {"status": {"conditions": conditions}},
                subresource="status",
                patch_type="strategic",
            )

    await asyncio.gather(*(beat(i) for i in range(count)))


async def run(nodes: int, window: float, heartbeats: int, profile: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="nimctl-gpu-scale-"))
    prof = tmp / "profile.yaml"
    _profile(prof, nodes)
    cluster = start_cluster(tmp, profile=str(prof))
    op = None
    events = None
    try:
        async with Client(str(cluster.kubeconfig)) as admin:
            await install_crds(admin)
            server, ca = cluster_endpoint(cluster.kubeconfig)
            op_kc = await operator_kubeconfig(admin, server, ca, tmp / "operator.kubeconfig")
            await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            op = start_operator(
                op_kc,
                tmp,
                ["--disable-nim-controllers", "--disable-nemo-controllers"],
                profile=profile,
                env={"OPERATOR_NAMESPACE": NS},
            )
            await asyncio.sleep(5.0)  # the operator starts and syncs its caches
            events = NodeEvents(admin)
            await events.start()
            before = len(await audit(admin))
            policy = YAML(typ="safe").load(SAMPLE.read_text())
            op.profile_start()
            cpu0, t0, ev0 = op.cpu(), time.monotonic(), events.count
            await admin.create(policy)
            t_ready = None
            while time.monotonic() - t0 < window:
                if t_ready is None and await _policy_ready(admin):
                    t_ready = time.monotonic() - t0
                await asyncio.sleep(2.0)
            cpu_window, ev_window = op.cpu() - cpu0, events.count - ev0
            op.profile_stop()
            records = (await audit(admin))[before:]
            w = writes(records)
            objects = [r for r in w if r["resource"] != "events"]
            rss_window = op.rss_mb()

            names = [f"gpu-node-{i}" for i in range(nodes)]
            listed = {n["metadata"]["name"] for n in (await admin.list("v1", "Node"))["items"]}
            names = [n for n in names if n in listed] or sorted(listed)
            # The heartbeats are measured on a settled cluster: no operator write for 10 s.
            settle0 = time.monotonic()
            while time.monotonic() - settle0 < 900:
                n = len(writes(await audit(admin)))
                await asyncio.sleep(10.0)
                if len(writes(await audit(admin))) == n:
                    break
            settled = time.monotonic() - settle0
            n_before = len(await audit(admin))
            await asyncio.sleep(5.0)
            cpu_idle0 = op.cpu()
            await asyncio.sleep(5.0)
            idle = (op.cpu() - cpu_idle0) / 5.0  # cores used with no heartbeats
            op.profile_start()
            c1, t1, e1 = op.cpu(), time.monotonic(), events.count
            await _heartbeats(admin, names, heartbeats)
            await asyncio.sleep(3.0)  # let the operator see the last of them
            dt = time.monotonic() - t1
            c2, e2 = op.cpu(), events.count
            op.profile_stop()
            hb_cpu = max(c2 - c1 - idle * dt, 0.0)
            hb_writes = writes((await audit(admin))[n_before:])
            hwm = proc_hwm_mb(op.pid)

            print(f"GPU nodes                           {nodes}")
            print(
                "policy ready after                  "
                + (f"{t_ready:8.1f} s" if t_ready is not None else f"   not within {window:.0f} s")
            )
            print(f"operator CPU over {window:.0f} s              {cpu_window:8.2f} s")
            print(f"Node events in the window           {ev_window:8d}")
            print(
                f"operator CPU per Node event         {1000 * cpu_window / max(ev_window, 1):8.2f} ms"
                "  (all the window's CPU over its Node events)"
            )
            print(
                f"operator writes in the window       {len(objects):8d}  (+{len(w) - len(objects)} Events)"
            )
            for key, n in by_resource(objects).items():
                print(f"    {key:<38} {n:6d}")
            print(f"operator RSS after the window       {rss_window:8.1f} MB")
            print(f"settled (10 s without a write)    {settled:8.1f} s after the window")
            print(f"operator peak RSS                   {hwm:8.1f} MB")
            print(
                f"{heartbeats} heartbeats ({e2 - e1} Node events): operator CPU {hb_cpu:6.3f} s"
                f" above idle ({idle:.3f} cores) = {1000 * hb_cpu / max(heartbeats, 1):.3f} ms"
                " per heartbeat (aim < 0.2)"
            )
            print(f"  writes meanwhile                  {len(hb_writes):8d}")
            print_profile(op.profile_out, f"{nodes} nodes: the window, then the heartbeats")
    finally:
        if events is not None:
            await events.stop()
        if op is not None:
            op.stop()
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[200])
    parser.add_argument("--window", type=float, default=60.0, help="seconds (the issue's: 180)")
    parser.add_argument("--heartbeats", type=int, default=1000)
    parser.add_argument("--profile", action="store_true", help="print the operator's profile")
    args = parser.parse_args()
    for n in args.nodes:
        asyncio.run(run(n, args.window, args.heartbeats, profiling_requested(args.profile)))


if __name__ == "__main__":
    main()
