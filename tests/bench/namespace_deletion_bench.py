"""Benchmark: deleting a namespace that holds N Ready NIMServices (issue 18).

Run: ``.venv/bin/python -m tests.bench.namespace_deletion_bench [--count 1000]``

N NIMServices on one NIMCache reach Ready; then the namespace is deleted and
localcluster's namespace controller empties it (pods first, then the rest).
Printed, from the delete until the namespace is gone:

* the operator's requests of every verb, from the audit log (aim <= 1.5 per
  NIMService), and its creates (aim 0);
* error lines the operator logged at info level (aim 0) and tracebacks;
* time from the delete until the namespace is gone.

NVIDIA's operator on a real API server (issue 18): 4,234 requests and 327
error lines over 69 s at 1,000; nimctl before this work: 19,460 and 6,952.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from localcluster import LocalCluster
from localcluster.extensions import extensions_of
from nimctl.demo import DEMO_NAME, apply_objects, demo_objects
from nimctl.operator import install_crds
from nimctl_runtime.client import Client, NotFound
from tests.bench.failure_bench import _CountingStream
from tests.integration.controllers.harness import API, start_operator

OPERATOR_USER = "nimctl-operator"
NS = "doomed"


def _services(count: int) -> list[dict[str, Any]]:
    base = next(o for o in demo_objects(NS) if o["kind"] == "NIMService")
    out = []
    for i in range(count):
        svc = json.loads(json.dumps(base))
        svc["metadata"]["name"] = f"svc-{i:05d}"
        svc["spec"]["resources"] = {}
        out.append(svc)
    return out


async def _create(admin: Client, objs: list[dict[str, Any]]) -> None:
    sem = asyncio.Semaphore(32)

    async def one(o: dict[str, Any]) -> None:
        async with sem:
            await admin.create(o)

    await asyncio.gather(*(one(o) for o in objs))


async def main(count: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="nimctl-nsdelete-bench-"))
    async with LocalCluster(workdir=tmp, profile="many-nodes") as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            await install_crds(admin)
            await apply_objects(admin, [o for o in demo_objects(NS) if o["kind"] != "NIMService"])
            stream = _CountingStream()
            saved, sys.stderr = sys.stderr, stream  # type: ignore[assignment]
            try:
                from nimctl_runtime.logsetup import configure_logging

                configure_logging("json", "info")
                op = await start_operator(
                    cluster.write_kubeconfig(tmp / "operator.kubeconfig", user=OPERATOR_USER),
                    model_query=None,
                    max_concurrent_reconciles=16,
                )
                await _create(admin, _services(count))
                while True:
                    items = (await admin.list(API, "NIMService", NS))["items"]
                    ready = sum(1 for o in items if (o.get("status") or {}).get("state") == "Ready")
                    if ready >= count:
                        break
                    await asyncio.sleep(2.0)
                await asyncio.sleep(2.0)
                audit = extensions_of(cluster).audit
                start = max(r.seq for r in audit.records())
                stream.reset()
                t0 = time.monotonic()
                await admin.delete("v1", "Namespace", NS)
                while True:
                    try:
                        await admin.get("v1", "Namespace", NS)
                    except NotFound:
                        break
                    await asyncio.sleep(0.5)
                t_gone = time.monotonic() - t0
                await asyncio.sleep(2.0)
                await op.shutdown()
            finally:
                sys.stderr = saved
            records = [r for r in audit.records(user=OPERATOR_USER) if r.seq > start]
    by_verb: dict[str, int] = {}
    for r in records:
        by_verb[r.verb] = by_verb.get(r.verb, 0) + 1
    creates = [r for r in records if r.verb == "create" and r.resource != "events"]
    print(f"NIMServices in the namespace   {count} ({DEMO_NAME} cache)")
    print(f"operator requests              {len(records):8d}   (aim <= {int(1.5 * count)})")
    print(f"  by verb                      {dict(sorted(by_verb.items()))}")
    print(f"  creates (not Events)         {len(creates):8d}   (aim 0)")
    print(f"error lines                    {stream.error_lines:8d}   (aim 0)")
    print(f"tracebacks                     {stream.tracebacks:8d}")
    print(f"time to gone                   {t_gone:8.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1000)
    ns = parser.parse_args()
    asyncio.run(main(ns.count))
