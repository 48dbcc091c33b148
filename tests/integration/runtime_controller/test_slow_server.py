"""A slow API server is not a lost Lease (issue 26).

Two in-process managers; the API server answers the leader's Lease renewals
after 2-8 s (two 8 s answers back to back among them), within the lease of
20 s. client-go bounds a renewal at renew_deadline / 2 (7.5 s here) and gives
up after the renew deadline; ours lets a renewal use what is left of the
lease. Expected: the leader keeps the Lease all along (no transition, the
standby never acquires), does not exit, and keeps reconciling.
"""

from __future__ import annotations

import asyncio

from localcluster.faults import LatencyRule
from nimctl_runtime.manager import Manager, ManagerOptions

from .conftest import Env, accepted_writes
from .echo import add_echo_controller
from .test_leader_election import create_sources, holder, wait_echoes, wait_holder

LEASE, RENEW, RETRY = 20.0, 15.0, 0.5
LATENCIES = [8.0, 8.0, 2.0, 6.0, 3.0]  # seconds, one per renewal, in this order


def options(identity: str) -> ManagerOptions:
    return ManagerOptions(
        leader_election=True,
        leader_election_id="echo-operator",
        leader_election_namespace="default",
        identity=identity,
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
        graceful_shutdown_timeout=5,
    )


def lease_updates(env: Env, user: str) -> list[int]:
    return [r.seq for r in env.audit.records(user=user, resource="leases", verb="update")]


async def pace(env: Env, rule: LatencyRule) -> int:
    """Give each renewal the next latency of LATENCIES; return how many were slowed."""
    seen = len(lease_updates(env, "alice"))
    slowed = 0
    for latency in LATENCIES:
        rule.seconds = latency  # for the next renewal to arrive
        async with asyncio.timeout(LEASE):
            while len(lease_updates(env, "alice")) == seen:
                await asyncio.sleep(0.01)
        seen = len(lease_updates(env, "alice"))
        slowed += 1
    rule.seconds = 0.0
    return slowed


async def test_slow_renewals_within_the_lease_keep_the_leader(env: Env) -> None:
    await create_sources(env, 2)
    managers: list[tuple[Manager, asyncio.Event, asyncio.Task[None]]] = []
    clients = []
    try:
        for name in ("alice", "bob"):
            client = env.client(name)
            clients.append(client)
            manager = Manager(client, options(name))
            add_echo_controller(manager, identity=name)
            stop = asyncio.Event()
            managers.append((manager, stop, asyncio.create_task(manager.start(stop))))
            if name == "alice":
                await wait_holder(env, "alice", 10)
        alice, bob = managers[0][0], managers[1][0]
        await wait_echoes(env, 2)
        rule = env.faults.add_latency(0.0, verbs="update", resources="leases", users="alice")
        slowed = await pace(env, rule)
        # the last slow renewal answered: alice still leads and still reconciles
        async with asyncio.timeout(LEASE):
            while len(lease_updates(env, "alice")) < len(LATENCIES) + 2:
                await asyncio.sleep(0.05)
        mark = env.audit.records()[-1].seq
        await create_sources(env, 1, prefix="late")
        await wait_echoes(env, 3)
        assert slowed == len(LATENCIES)
        assert holder(env) == "alice"
        assert alice.is_leader() and not bob.is_leader()
        assert alice.losses == 0 and alice.elector is not None and not alice.elector.lost
        assert not any(t.done() for _, _, t in managers), "no replica exited"
        assert not [r for r in accepted_writes(env.audit, resource="leases") if r.user == "bob"]
        assert any(
            r.seq > mark for r in accepted_writes(env.audit, user="alice", resource="configmaps")
        )
    finally:
        for _, stop, _ in managers:
            stop.set()
        await asyncio.gather(*(t for _, _, t in managers), return_exceptions=True)
        for c in clients:
            await c.close()
