"""The fuzz suite (issue 19): mutated NVIDIA samples never get a 5xx, a crash, or silence.

Seeded and bounded for CI (well under a minute on two cores): 300 mutants of the
webhook kinds straight to the admission webhook server, and 80 mutants of every
served kind through the API of an in-process ``nimctl local`` (admission webhooks
registered, every controller running). ``python -m tests.bench.fuzz_bench`` runs
the long version (5,000+ mutants) and prints the same counts.
"""

from __future__ import annotations

from pathlib import Path

from structlog.testing import capture_logs

from tests.integration.fuzz.api_runner import NO_CONTROLLER, fuzz_api, fuzz_cluster
from tests.integration.fuzz.mutations import MUTATIONS, draw_mutants
from tests.integration.fuzz.samples import kinds
from tests.integration.fuzz.webhook_runner import WEBHOOK_KINDS, fuzz_webhook


def test_mutants_are_the_same_on_every_run_and_cover_every_kind_and_mutation() -> None:
    first = draw_mutants(150)
    again = draw_mutants(150)
    assert [m.describe() for m in first] == [m.describe() for m in again]
    assert {m.kind for m in first} == set(kinds())
    assert {d.split()[0].rstrip(":") for m in first for d in m.mutations} == set(MUTATIONS)


async def test_webhook_answers_every_mutant_with_an_allow_or_a_field_error() -> None:
    mutants = draw_mutants(300, kinds=WEBHOOK_KINDS)
    with capture_logs() as logs:
        tally = await fuzz_webhook(mutants)
    print(tally.report("webhook fuzz"))
    assert tally.counts["other"] == 0, tally.report("webhook fuzz")
    assert tally.counts["rejected with a field path"] > 50
    assert tally.counts["accepted (webhook only: no object is created)"] > 50
    assert not [r for r in logs if "traceback" in r or r.get("event") == "webhook handler failed"]


async def test_api_answers_every_mutant_with_a_field_error_or_a_clear_status(
    tmp_path: Path,
) -> None:
    mutants = draw_mutants(80, start_seed=1919)
    with capture_logs() as logs:
        async with fuzz_cluster(tmp_path) as env:
            tally = await fuzz_api(env, mutants, wait=20)
    print(tally.report("API fuzz"))
    assert tally.counts["other"] == 0, tally.report("API fuzz")
    assert tally.counts["rejected with a field path"] > 10
    accepted = tally.tried - tally.counts["rejected with a field path"]
    accepted -= tally.counts["rejected as a whole request (413/400)"] + tally.counts[NO_CONTROLLER]
    assert accepted > 0
    crashes = [r for r in logs if "traceback" in r or r.get("event") == "webhook handler failed"]
    assert not crashes, crashes[:3]
