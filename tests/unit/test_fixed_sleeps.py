"""The suite's fixed sleeps stay few, and the counter tells a nap from a poll.

A fixed sleep makes a test slow or racy; tests wait on a condition instead
(tests/conditions.py ``until``; the operator harness's ``settle`` and
``reconciled_and_settled``). The ones left assert that nothing happens for a
while, which no event can show.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.tools.fixed_sleeps import fixed_sleeps, fixed_sleeps_in

# Lower it when you remove one; issue 28 asked for fewer than 20 (there were 59).
CEILING = 12


def test_the_suite_has_at_most_the_ceiling_of_fixed_sleeps() -> None:
    found = fixed_sleeps()
    listing = "\n".join(str(s) for s in found)
    assert len(found) <= CEILING, (
        f"{len(found)} fixed sleeps in the tests, at most {CEILING} allowed: wait on a "
        f"condition instead (tests/conditions.py until, harness settle):\n{listing}"
    )


def _count(tmp_path: Path, source: str) -> list[float]:
    path = tmp_path / "test_sample.py"
    path.write_text(textwrap.dedent(source))
    return [s.seconds for s in fixed_sleeps_in(path)]


def test_constant_naps_count_and_yields_polls_and_computed_delays_do_not(
    tmp_path: Path,
) -> None:
    source = """
        import asyncio
        import time
        from asyncio import sleep as nap

        RETRY = 0.2

        async def test_it(delay):
            await asyncio.sleep(0.5)          # a nap: counts
            time.sleep(1)                     # counts
            await nap(2)                      # counts (imported under another name)
            await asyncio.sleep(3 * RETRY)    # counts (a module constant)
            await asyncio.sleep(delay=0.25)   # counts (keyword)
            await asyncio.sleep(0)            # a yield
            await asyncio.sleep(delay)        # computed: the caller decides
            while not done():
                await asyncio.sleep(0.1)      # a poll
            for _ in range(50):
                if done():
                    break
                await asyncio.sleep(0.1)      # a poll
            for _ in range(3):
                await asyncio.sleep(0.1)      # three naps in a row: counts

            async def check():
                await asyncio.sleep(4)        # a nap inside a function: counts
            while True:
                def inner():
                    time.sleep(7)             # defined in a loop, not part of it: counts
                break
    """
    assert _count(tmp_path, source) == pytest.approx([0.5, 1.0, 2.0, 0.6, 0.25, 0.1, 4.0, 7.0])


def test_nap_helper_calls_count_with_their_seconds(tmp_path: Path) -> None:
    source = """
        from tests.integration.controllers.harness import quiet

        async def test_it(client, env):
            assert await quiet(client, 2.0) == []  # counts: 2 s
            await quiet(client)                    # counts: the default second
            await _settled_writes(env, seconds=3)  # counts
            await wait_for(check)                  # a poll

            async def quiet():                     # a local function of that name
                return True
            await quiet()                          # no arguments: not the helper
    """
    assert _count(tmp_path, source) == [2.0, 1.0, 3.0]
