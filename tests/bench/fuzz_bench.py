"""Benchmark: the long fuzz run, 5,000+ mutated NVIDIA samples, and its counts.

Run: ``.venv/bin/python -m tests.bench.fuzz_bench [--mutants 5000] [--batch 1000] [--wait 30]``

The same seeded mutants as the CI suite (``tests/integration/fuzz``), many more of them:
every mutant goes through the API of an in-process ``nimctl local`` (admission
webhooks registered, every controller running; a fresh cluster per batch), and
every NIMService/NIMCache mutant also straight to the admission webhook server.
Prints, per path: tried; rejected with a field path; rejected as a whole request;
accepted and Ready; accepted and Failed with a message; accepted and waiting with
a message at the deadline; accepted of a kind no controller serves yet; and
other, which must be 0 (the first offenders are listed). Figures only.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from nimctl_runtime.logsetup import configure_logging
from tests.integration.fuzz.api_runner import fuzz_api, fuzz_cluster
from tests.integration.fuzz.mutations import draw_mutants
from tests.integration.fuzz.outcomes import Tally
from tests.integration.fuzz.webhook_runner import fuzz_webhook


async def main(count: int, batch: int, wait: float) -> None:
    configure_logging("json", "critical")
    started = time.perf_counter()
    mutants = draw_mutants(count, start_seed=19_000)
    print(f"drew {len(mutants)} mutants in {time.perf_counter() - started:.1f} s", flush=True)

    started = time.perf_counter()
    webhook = await fuzz_webhook(mutants)
    print(webhook.report("straight to the webhook"), flush=True)
    print(f"  ({time.perf_counter() - started:.1f} s)", flush=True)

    api = Tally()
    started = time.perf_counter()
    for first in range(0, len(mutants), batch):
        chunk = mutants[first : first + batch]
        with tempfile.TemporaryDirectory() as tmp:
            async with fuzz_cluster(Path(tmp)) as env:
                api.merge(await fuzz_api(env, chunk, wait=wait, first_index=first))
        print(f"  API: {first + len(chunk)} of {len(mutants)} sent", flush=True)
    print(api.report("through the API (kubectl create)"), flush=True)
    print(f"  ({time.perf_counter() - started:.1f} s)", flush=True)
    bad = webhook.counts["other"] + api.counts["other"]
    print(f"other (must be 0): {bad}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=int, default=5000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--wait", type=float, default=30.0)
    ns = parser.parse_args()
    asyncio.run(main(ns.mutants, ns.batch, ns.wait))
