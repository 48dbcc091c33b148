"""Benchmark: the long fuzz run, 5,000+ mutated NVIDIA samples, and its counts.

Run: ``.venv/bin/python -m tests.bench.fuzz_bench [--mutants 5000] [--batch 500] [--wait 60]
[--stall 5]``

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
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

from nimctl_runtime.logsetup import configure_logging
from tests.integration.fuzz.api_runner import fuzz_api, fuzz_cluster
from tests.integration.fuzz.mutations import draw_mutants
from tests.integration.fuzz.outcomes import Tally
from tests.integration.fuzz.webhook_runner import fuzz_webhook


def _watch_loop(stall: float) -> None:
    """Print where the event loop is stuck whenever it stalls for *stall* seconds.

    Everything shares one loop here (API server, webhooks, operator, simulator,
    runner): a stall shows up as webhook timeouts and late statuses, and this
    names the code that caused it.
    """
    loop = asyncio.get_running_loop()
    main_id = threading.get_ident()
    beat = [time.monotonic()]

    def tick() -> None:
        beat[0] = time.monotonic()
        loop.call_later(0.1, tick)

    def watch() -> None:
        reported = 0.0
        while True:
            time.sleep(0.5)
            now = time.monotonic()
            if now - beat[0] > stall and now - reported > stall:
                reported = now
                frame = sys._current_frames().get(main_id)
                lines = [ln for ln in traceback.format_stack(frame) if "copy.py" not in ln]
                print(f"event loop stalled {now - beat[0]:.1f} s at:\n" + "".join(lines[-12:]))

    tick()
    threading.Thread(target=watch, daemon=True).start()


async def main(count: int, batch: int, wait: float, stall: float) -> None:
    configure_logging("json", "critical")
    started = time.perf_counter()
    mutants = draw_mutants(count, start_seed=19_000)
    print(f"drew {len(mutants)} mutants in {time.perf_counter() - started:.1f} s", flush=True)
    if stall > 0:
        _watch_loop(stall)

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
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--wait", type=float, default=60.0)
    parser.add_argument(
        "--stall", type=float, default=0.0, help="print where the loop is stuck past S seconds"
    )
    ns = parser.parse_args()
    asyncio.run(main(ns.mutants, ns.batch, ns.wait, ns.stall))
