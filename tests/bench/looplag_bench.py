"""Benchmark: the operator's event-loop lag and its Lease renewals under ~1 MB bodies.

Run: ``.venv/bin/python -m tests.bench.looplag_bench [--seconds 30] [--mb 1.0]
[--senders 2] [--only webhook|api]``

An in-process localcluster (no simulator) and ``nimctl run`` as its own process,
with the chart's arguments that matter here (leader election, webhooks on,
metrics on loopback), so the lag measured is the operator's alone. Two phases:
idle, then load: ``--senders`` loops POST NIMService AdmissionReviews of about
``--mb`` MB (a long ``spec.env``) straight to the operator's validating webhook,
while as many loops create and update NIMServices of that size through the API
(watch events of that size reach the operator's informers, and its reconciles
render Deployments as large). Prints, per phase, the lag the operator's
``LoopLagMonitor`` measured (``nimctl_event_loop_lag_seconds``: samples, mean,
p99 from the buckets, max), the webhook requests answered, the Lease renewals
the API server received from the operator, the longest gap between two of them
(the retry period is 2 s, the lease 15 s) and whether leadership was lost.
Figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import itertools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from localcluster import LocalCluster
from localcluster.extensions import extensions_of
from nimctl.operator import install_crds
from nimctl_runtime.certs import client_ssl_context, generate_ca, generate_serving_cert
from nimctl_runtime.client import Client
from nimctl_runtime.logsetup import configure_logging
from tests.ports import free_ports

USER = "nimctl-operator"
API = "apps.nvidia.com/v1alpha1"
PATH = "/validate-apps-nvidia-com-v1alpha1-nimservice"
REPO = Path(__file__).resolve().parents[2]



def nimservice(name: str, mb: float, salt: str = "") -> dict[str, Any]:
    """A NIMService whose ``spec.env`` makes it about *mb* MB."""
    value = ("x" * 180) + salt
    count = int(mb * 1024 * 1024 / (len(value) + 40))
    return {
        "apiVersion": API,
        "kind": "NIMService",
        "metadata": {"name": name, "namespace": "load"},
        "spec": {
            "image": {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.3.3"},
            "authSecret": "ngc-api-secret",
            "storage": {"emptyDir": {}},
            "expose": {"service": {"type": "ClusterIP", "port": 8000}},
            "resources": {"limits": {"nvidia.com/gpu": 1}},
            "env": [{"name": f"VAR_{i}", "value": value} for i in range(count)],
        },
    }


def review(obj: dict[str, Any], i: int) -> bytes:
    return json.dumps(
        {
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {
                "uid": f"uid-{i}",
                "kind": {"group": "apps.nvidia.com", "version": "v1alpha1", "kind": "NIMService"},
                "resource": {"group": "apps.nvidia.com", "version": "v1alpha1", "resource": "nimservices"},
                "name": obj["metadata"]["name"],
                "namespace": "load",
                "operation": "CREATE",
                "userInfo": {"username": "bench"},
                "object": obj,
                "oldObject": None,
            },
        }
    ).encode()  # fmt: skip


def lag_figures(text: str) -> dict[str, float]:
    """count, sum, max and cumulative buckets of the lag metrics from /metrics text."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("nimctl_event_loop_lag_seconds_bucket"):
            le = line.split('le="', 1)[1].split('"', 1)[0]
            out[f"le {le}"] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("nimctl_event_loop_lag_seconds_count"):
            out["count"] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("nimctl_event_loop_lag_seconds_sum"):
            out["sum"] = float(line.rsplit(" ", 1)[1])
        elif line.startswith("nimctl_event_loop_lag_max_seconds"):
            out["max"] = float(line.rsplit(" ", 1)[1])
    return out


def summarize(before: dict[str, float], after: dict[str, float]) -> str:
    count = after.get("count", 0) - before.get("count", 0)
    total = after.get("sum", 0) - before.get("sum", 0)
    buckets = sorted(
        ((float(k[3:]), after[k] - before.get(k, 0)) for k in after if k.startswith("le ")),
        key=lambda b: b[0],
    )
    p99 = next((le for le, n in buckets if count and n >= 0.99 * count), float("inf"))
    p50 = next((le for le, n in buckets if count and n >= 0.5 * count), float("inf"))
    mean = total / count if count else 0.0
    return (
        f"lag samples={int(count)} mean={mean * 1000:.1f}ms p50<={p50 * 1000:g}ms "
        f"p99<={p99 * 1000:g}ms max-since-start={after.get('max', 0) * 1000:.0f}ms"
    )


def renewals(cluster: LocalCluster, since_seq: int) -> tuple[int, float]:
    """Lease renewals the server accepted from the operator after *since_seq*, and the longest gap."""
    records = [
        r
        for r in extensions_of(cluster).audit.records(user=USER, resource="leases", verb="update")
        if r.seq > since_seq and r.code is not None and r.code < 300
    ]
    times = [dt.datetime.fromisoformat(r.timestamp).timestamp() for r in records]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return len(records), max(gaps, default=0.0)


async def scrape(http: aiohttp.ClientSession, port: int) -> dict[str, float]:
    async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
        return lag_figures(await resp.text())


async def run(seconds: float, mb: float, senders: int, only: str = "") -> None:
    tmp = Path(tempfile.mkdtemp(prefix="looplag-"))
    async with LocalCluster(simulator=False, workdir=tmp / "cluster") as cluster:
        admin = Client(str(cluster.kubeconfig_path))
        await install_crds(admin)
        await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "load"}})
        ca = generate_ca()
        generate_serving_cert(ca, ["127.0.0.1"]).write(tmp / "certs")
        ports = dict(zip(("webhook", "metrics", "health"), free_ports(3), strict=True))
        kubeconfig = cluster.write_kubeconfig(tmp / "operator.kubeconfig", user=USER)
        log_path = tmp / "operator.log"
        print(f"operator log: {log_path}")
        with open(log_path, "wb") as log:
            proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "nimctl", "run", "--kubeconfig", str(kubeconfig),
                "--leader-elect", "--leader-election-namespace", "default",
                "--enable-webhooks", "--webhook-port", str(ports["webhook"]),
                "--webhook-cert-dir", str(tmp / "certs"),
                "--metrics-bind-address", f"127.0.0.1:{ports['metrics']}",
                "--health-probe-bind-address", f"127.0.0.1:{ports['health']}",
                cwd=str(REPO), stdout=asyncio.subprocess.DEVNULL, stderr=log,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )  # fmt: skip
        sent = {"webhook": 0, "api": 0}
        try:
            async with aiohttp.ClientSession() as http:
                while True:  # until the operator leads and serves its webhook
                    try:
                        async with http.get(f"http://127.0.0.1:{ports['health']}/readyz") as r:
                            if r.status == 200 and renewals(cluster, 0)[0] > 0:
                                break
                    except aiohttp.ClientError:
                        pass
                    if proc.returncode is not None:
                        raise SystemExit(f"the operator exited: {log_path.read_text()[-2000:]}")
                    await asyncio.sleep(0.2)
                print(f"operator up; body size {len(review(nimservice('x', mb), 0)) / 1e6:.2f} MB")
                for phase, load in (("idle", False), (f"~{mb:.1f} MB load", True)):
                    before = await scrape(http, ports["metrics"])
                    seq = extensions_of(cluster).audit.records()[-1].seq
                    stop = time.monotonic() + seconds
                    ssl = client_ssl_context(ca.cert_pem)

                    async def webhook_sender(n: int, stop: float, ssl: Any) -> None:
                        url = f"https://127.0.0.1:{ports['webhook']}{PATH}"
                        i = 0
                        while time.monotonic() < stop:
                            body = review(nimservice(f"w{n}-{i}", mb), i)
                            async with http.post(url, data=body, ssl=ssl,
                                                 headers={"Content-Type": "application/json"}) as r:  # fmt: skip
                                await r.read()
                            sent["webhook"] += 1
                            i += 1

                    async def api_sender(n: int, stop: float) -> None:
                        i = 0
                        while time.monotonic() < stop:
                            obj = nimservice(f"a{n}", mb, salt=str(i))
                            if i == 0:
                                await admin.create(obj)
                            else:
                                await admin.patch(API, "NIMService", f"a{n}",
                                                  {"spec": {"env": obj["spec"]["env"]}}, namespace="load")  # fmt: skip
                            sent["api"] += 1
                            i += 1

                    if load:
                        await asyncio.gather(
                            *(webhook_sender(n, stop, ssl) for n in range(senders) if only != "api"),
                            *(api_sender(n, stop) for n in range(senders) if only != "webhook"),
                        )
                    else:
                        await asyncio.sleep(seconds)
                    after = await scrape(http, ports["metrics"])
                    count, gap = renewals(cluster, seq)
                    print(
                        f"{phase:>14}: {summarize(before, after)}; webhook reviews={sent['webhook']} "
                        f"api writes={sent['api']}; renewals={count} longest-gap={gap:.2f}s"
                    )
        finally:
            proc.terminate()
            await proc.wait()
            await admin.close()
        text = log_path.read_text()
        print(
            f"operator log: 'leadership lost' x{text.count('leadership lost')}, "
            f"'event loop lagged' x{text.count('event loop lagged')}, exit code {proc.returncode}"
        )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--mb", type=float, default=1.0)
    p.add_argument("--senders", type=int, default=2)
    p.add_argument("--only", choices=["webhook", "api"], default="", help="one kind of load")
    args = p.parse_args()
    configure_logging("console", "warning")
    asyncio.run(run(args.seconds, args.mb, args.senders, args.only))


if __name__ == "__main__":
    main()
