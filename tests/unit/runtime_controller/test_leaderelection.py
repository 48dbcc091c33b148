"""Lease leader election against an in-memory API: acquire, renew, hand over, lose."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from nimctl_runtime import metrics
from nimctl_runtime.client.errors import InternalError, NotLeaderError
from nimctl_runtime.leaderelection import LeaderElectionConfig, LeaderElector
from tests.conditions import until

from .fakes import FakeObjectClient

FAST = {"lease_duration": 1.0, "renew_deadline": 0.6, "retry_period": 0.1}
_names = iter(range(10**6))


def config(identity: str, **kw: object) -> LeaderElectionConfig:
    opts: dict[str, object] = {**FAST, **kw}
    return LeaderElectionConfig(name="lease", namespace="ns", identity=identity, **opts)  # type: ignore[arg-type]


class Candidate:
    def __init__(self, client: FakeObjectClient, identity: str, **kw: object) -> None:
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self.stop = asyncio.Event()
        self.elector = LeaderElector(
            client,
            config(identity, **kw),
            on_started_leading=self.started.set,
            on_stopped_leading=self.stopped.set,
        )
        self.task = asyncio.create_task(self.elector.run(self.stop))

    async def shutdown(self) -> None:
        self.stop.set()
        async with asyncio.timeout(5):
            await self.task


def lease_spec(client: FakeObjectClient) -> dict[str, Any]:
    spec: dict[str, Any] = client.objects[("Lease", "ns", "lease")]["spec"]
    return spec


def test_timings_are_validated() -> None:
    with pytest.raises(ValueError, match="leaseDuration must be greater than renewDeadline"):
        LeaderElectionConfig("l", "ns", "me", lease_duration=5, renew_deadline=5).validate()
    with pytest.raises(ValueError, match="renewDeadline must be greater than retryPeriod"):
        LeaderElectionConfig("l", "ns", "me", 15, 2.0, 2.0).validate()
    with pytest.raises(ValueError, match="--leader-election-namespace"):
        LeaderElectionConfig("l", "", "me").validate()


async def test_first_candidate_creates_the_lease_and_leads() -> None:
    client = FakeObjectClient()
    a = Candidate(client, "a")
    async with asyncio.timeout(2):
        await a.started.wait()
    spec = lease_spec(client)
    assert spec["holderIdentity"] == "a"
    assert spec["leaseDurationSeconds"] == 1
    assert spec["leaseTransitions"] == 0
    assert a.elector.is_leader()
    assert metrics.REGISTRY.get_sample_value("leader_election_master_status", {"name": "lease"}) == 1
    renewed = await until(lambda: lease_spec(client)["renewTime"] != spec["renewTime"], timeout=2)
    assert renewed, "the leader renews"
    await a.shutdown()
    assert a.stopped.is_set() and not a.elector.lost


async def test_only_one_of_two_leads_and_release_hands_over_fast() -> None:
    client = FakeObjectClient()
    a = Candidate(client, "a", release_on_cancel=True)
    async with asyncio.timeout(2):
        await a.started.wait()
    b = Candidate(client, "b", release_on_cancel=True)
    await asyncio.sleep(0.5)
    assert not b.started.is_set(), "a valid lease keeps the second candidate out"
    assert b.elector.get_leader() == "a"
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    await a.shutdown()
    assert lease_spec(client)["holderIdentity"] in ("", "b")
    async with asyncio.timeout(2):
        await b.started.wait()
    handover = loop.time() - t0
    assert handover < 0.6, "release lets the standby take over within a retry period or so"
    assert lease_spec(client)["leaseTransitions"] == 1
    await b.shutdown()


async def test_dead_leader_is_replaced_after_lease_duration() -> None:
    client = FakeObjectClient()
    a = Candidate(client, "a")
    async with asyncio.timeout(2):
        await a.started.wait()
    b = Candidate(client, "b")
    await until(lambda: b.elector.get_leader() == "a", what="b saw a's lease")
    loop = asyncio.get_running_loop()
    a.task.cancel()  # killed: no release
    t0 = loop.time()
    async with asyncio.timeout(3):
        await b.started.wait()
    waited = loop.time() - t0
    assert waited >= 0.5, "b must wait for the lease to expire by its own observation"
    assert waited < 1.0 + 0.1 * 2.2 + 0.3
    assert lease_spec(client)["holderIdentity"] == "b"
    await b.shutdown()


async def test_leader_that_cannot_renew_steps_down_before_the_lease_expires() -> None:
    client = FakeObjectClient()
    a = Candidate(client, "a")
    async with asyncio.timeout(2):
        await a.started.wait()
    loop = asyncio.get_running_loop()
    last_ok = loop.time()
    client.fail = InternalError(500, "InternalError", "etcd unavailable")
    async with asyncio.timeout(3):
        await a.stopped.wait()
    assert a.elector.lost
    assert not a.elector.is_leader()
    assert loop.time() - last_ok < 1.0, "stepped down before others may take the lease"
    async with asyncio.timeout(2):
        await a.task


async def test_hung_requests_are_bounded_and_lose_leadership() -> None:
    client = FakeObjectClient()
    a = Candidate(client, "a", lease_duration=3.0, renew_deadline=2.0, retry_period=0.1)
    async with asyncio.timeout(2):
        await a.started.wait()
    client.hang = True
    async with asyncio.timeout(4):
        await a.stopped.wait()
    assert a.elector.lost


async def test_healthz_check_fails_when_renewals_stall() -> None:
    now = [100.0]
    client = FakeObjectClient()
    elector = LeaderElector(client, config("a"), clock=lambda: now[0])
    assert await elector.try_acquire_or_renew()
    elector._leading = True  # as run() would after acquiring
    check = elector.check(0.5)
    check()
    now[0] += 1.6
    with pytest.raises(RuntimeError, match="failed election to renew leadership"):
        check()


async def test_expiry_uses_local_observation_not_renew_time() -> None:
    """A holder whose renewTime looks ancient (clock skew) is still respected."""
    client = FakeObjectClient()
    await client.create(
        {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "lease", "namespace": "ns"},
            "spec": {
                "holderIdentity": "other",
                "leaseDurationSeconds": 1,
                "renewTime": "2000-01-01T00:00:00.000000Z",
                "acquireTime": "2000-01-01T00:00:00.000000Z",
                "leaseTransitions": 4,
            },
        }
    )
    now = [0.0]
    elector = LeaderElector(client, config("me"), clock=lambda: now[0])
    assert not await elector.try_acquire_or_renew(), "first sight: valid for a lease duration"
    now[0] += 0.9
    assert not await elector.try_acquire_or_renew()
    now[0] += 0.2
    assert await elector.try_acquire_or_renew(), "unchanged for longer than the duration"
    assert lease_spec(client)["leaseTransitions"] == 5


async def test_unexpected_client_exceptions_count_as_failed_renewals() -> None:
    client = FakeObjectClient()
    a = Candidate(client, "a")
    async with asyncio.timeout(2):
        await a.started.wait()
    client.fail = RuntimeError("Server disconnected")  # not an ApiError
    async with asyncio.timeout(3):
        await a.stopped.wait()
    assert a.elector.lost
    async with asyncio.timeout(2):
        await a.task  # ended cleanly, no crash


# -- fencing (issue 26) ---------------------------------------------------------------


async def test_the_fence_holds_until_lease_minus_margin_after_the_last_renewal_started() -> None:
    now = [100.0]
    client = FakeObjectClient()
    elector = LeaderElector(client, config("a", lease_duration=10.0, renew_deadline=6.0,
                                           retry_period=1.0), clock=lambda: now[0])  # fmt: skip
    with pytest.raises(NotLeaderError, match="does not hold"):
        elector.fence()  # not leading yet
    assert await elector.try_acquire_or_renew()
    elector._leading = True  # as run() would after acquiring
    assert elector.config.margin == 1.0
    now[0] += 8.9
    elector.fence()  # 8.9 s < 10 s - 1 s
    now[0] += 0.1
    with pytest.raises(NotLeaderError, match="stepping down"):
        elector.fence()
    assert elector._expired.is_set(), "a refused write wakes the renew loop"
    assert elector.fenced == 1


def test_the_safety_margin_default_and_bounds() -> None:
    assert LeaderElectionConfig("l", "ns", "me").margin == 1.5  # 10 % of 15 s
    assert LeaderElectionConfig("l", "ns", "me", 2.0, 1.5, 0.2).margin == 0.5
    with pytest.raises(ValueError, match="safety margin"):
        LeaderElectionConfig("l", "ns", "me", 15, 10, 2, safety_margin=14).validate()


async def test_renewals_slower_than_the_old_request_bound_keep_the_lease() -> None:
    """Each renewal takes 1.3 s (the old per-request bound was 1 s): no loss while valid."""
    client = FakeObjectClient()
    a = Candidate(client, "a", lease_duration=4.0, renew_deadline=2.0, retry_period=0.1)
    async with asyncio.timeout(2):
        await a.started.wait()
    client.delay = 1.3
    before = len([c for c in client.calls if c[0] == "update"])
    async with asyncio.timeout(10):
        while len([c for c in client.calls if c[0] == "update"]) < before + 4:
            await asyncio.sleep(0.05)
    assert a.elector.is_leader() and not a.stopped.is_set()
    a.elector.fence()
    client.delay = 0.0
    await a.shutdown()
    assert not a.elector.lost


class PausedDuringRenewal(FakeObjectClient):
    """The process 'sleeps' through one renewal: its answer is read a lease later."""

    def __init__(self, skew: list[float], lease: float) -> None:
        super().__init__()
        self.skew = skew
        self.lease = lease
        self.pause_next = False

    async def update(self, obj: dict[str, Any]) -> dict[str, Any]:
        out = await super().update(obj)
        if self.pause_next:
            self.pause_next = False
            self.skew[0] += self.lease  # SIGSTOP while the answer was on its way
        return out


async def test_a_renewal_read_after_a_pause_past_the_lease_is_not_taken_as_renewed() -> None:
    loop = asyncio.get_running_loop()
    skew = [0.0]
    client = PausedDuringRenewal(skew, 1.0)
    elector = LeaderElector(client, config("a"), clock=lambda: loop.time() + skew[0])
    stop = asyncio.Event()
    task = asyncio.create_task(elector.run(stop))
    async with asyncio.timeout(2):
        await elector.leading.wait()
    client.pause_next = True
    before = sum(1 for c in client.calls if c[0] == "update")
    async with asyncio.timeout(3):
        await task
    assert elector.lost and not elector.is_leader()
    with pytest.raises(NotLeaderError):
        elector.fence()
    # the paused renewal, then nothing: no further renewal was tried past the validity
    assert not client.pause_next
    assert sum(1 for c in client.calls if c[0] == "update") in (before + 1, before + 2)
