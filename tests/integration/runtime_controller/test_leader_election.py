"""Two managers with Lease leader election against localcluster.

Durations are short (lease 2 s, renew deadline 1.5 s, retry 0.2 s) so the
hand-over tests stay fast; the claims are the ones the runtime makes with its
15/10/2 s defaults.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp

from nimctl_runtime.manager import LeaderElectionLostError, Manager, ManagerOptions

from .conftest import Env, accepted_writes, at
from .echo import EchoReconciler, add_echo_controller, source_cm

LEASE, RENEW, RETRY = 2.0, 1.5, 0.2
REPO = Path(__file__).resolve().parents[3]


def options(identity: str, **kw: Any) -> ManagerOptions:
    return ManagerOptions(
        leader_election=True,
        leader_election_id="echo-operator",
        leader_election_namespace="default",
        identity=identity,
        lease_duration=LEASE,
        renew_deadline=RENEW,
        retry_period=RETRY,
        graceful_shutdown_timeout=5,
        **kw,
    )


def holder(env: Env) -> str:
    """The Lease holder, read from the server's storage (no client latency)."""
    from localcluster.errors import StatusError

    try:
        lease = env.cluster.storage.get(
            "coordination.k8s.io/v1", "Lease", "echo-operator", "default"
        )
    except StatusError:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def wait_holder(env: Env, want: str, timeout: float) -> float:
    """Seconds until the Lease names ``want`` as holder."""
    t0 = time.monotonic()
    async with asyncio.timeout(timeout):
        while holder(env) != want:
            await asyncio.sleep(0.01)
    return time.monotonic() - t0


class Member:
    """One in-process manager with the echo controller, its own user and identity."""

    def __init__(self, env: Env, identity: str, **kw: Any) -> None:
        self.identity = identity
        self.client = env.client(identity)
        self.manager = Manager(self.client, options(identity, **kw))
        self.rec: EchoReconciler
        self.rec, _ = add_echo_controller(self.manager, identity=identity)
        self.stop = asyncio.Event()
        self.task = asyncio.create_task(self.manager.start(self.stop))

    async def close(self) -> None:
        self.stop.set()
        try:
            async with asyncio.timeout(15):
                await self.task
        except LeaderElectionLostError:
            pass
        finally:
            await self.client.close()


async def create_sources(env: Env, n: int, prefix: str = "s") -> None:
    async with env.client() as c:
        for i in range(n):
            await c.create(source_cm(f"{prefix}{i}"))


async def echoes(env: Env) -> int:
    async with env.client() as c:
        out = await c.list("v1", "ConfigMap", "default", label_selector="echo=copy")
    return len(out["items"])


async def wait_echoes(env: Env, n: int, timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while await echoes(env) < n:
            await asyncio.sleep(0.05)


async def test_only_the_leader_reconciles_and_a_graceful_stop_hands_over_fast(env: Env) -> None:
    await create_sources(env, 5)
    a = Member(env, "alice")
    await wait_holder(env, "alice", 5)
    b = Member(env, "bob")
    try:
        await wait_echoes(env, 5)
        await asyncio.sleep(3 * RETRY)
        assert a.rec.reconciles > 0
        assert b.rec.reconciles == 0, "the standby must not reconcile"
        assert not accepted_writes(env.audit, user="bob", resource="configmaps")
        assert a.manager.is_leader() and not b.manager.is_leader()
        # graceful stop: drain, release, hand over within 3 s
        t0 = time.monotonic()
        a.stop.set()
        await a.task
        assert await wait_holder(env, "bob", 3) + (time.monotonic() - t0) < 3.0 + 0.5
        handover = time.monotonic() - t0
        assert handover < 3.0
        await create_sources(env, 2, prefix="after")
        await wait_echoes(env, 7)
        assert b.rec.reconciles > 0
    finally:
        await a.close()
        await b.close()


async def test_leader_that_cannot_renew_stops_writing_before_its_lease_can_expire(
    env: Env,
) -> None:
    await create_sources(env, 3)
    a = Member(env, "alice", health_probe_bind_address="127.0.0.1:0")
    await wait_holder(env, "alice", 5)
    a.rec.delay = 0.01
    b = Member(env, "bob")
    await wait_echoes(env, 3)

    # keep alice writing: a source that changes all the time
    async def churn() -> None:
        async with env.client() as c:
            i = 0
            while True:
                i += 1
                await c.patch("v1", "ConfigMap", "s0", {"data": {"n": str(i)}},
                              namespace="default")  # fmt: skip
                await asyncio.sleep(0.02)

    churner = asyncio.create_task(churn())
    try:
        reconciled = a.rec.reconciles
        async with asyncio.timeout(10):  # alice is busy echoing the churn
            while a.rec.reconciles < reconciled + 5:
                await asyncio.sleep(0.02)
        # alice is cut off from the Lease only; her ConfigMap writes still go through
        env.faults.inject_errors(500, resources="leases", users="alice")
        await wait_holder(env, "bob", 2 * LEASE + 2)
        async with asyncio.timeout(10):
            while a.manager.losses < 1:
                await asyncio.sleep(0.02)
        # alice stepped down and is a candidate again: still running, not leading,
        # and still answering its probes (as it would its webhooks)
        assert not a.task.done()
        assert not a.manager.is_leader()
        assert a.manager.health_server is not None
        probes = f"http://127.0.0.1:{a.manager.health_server.port}"
        async with aiohttp.ClientSession() as http:
            for path in ("/healthz", "/readyz"):
                async with http.get(probes + path) as resp:
                    assert resp.status == 200, (path, await resp.text())
        async with asyncio.timeout(10):
            while not accepted_writes(env.audit, user="bob", resource="configmaps"):
                await asyncio.sleep(0.02)
        # the candidate leads again once bob goes: its controllers start a second time
        env.faults.reset()
        bob_stopped = env.audit.records()[-1].seq
        b.stop.set()
        await b.task
        await wait_holder(env, "alice", 2 * LEASE + 2)
        async with asyncio.timeout(10):
            while not any(
                r.seq > bob_stopped
                for r in accepted_writes(env.audit, user="alice", resource="configmaps")
            ):
                await asyncio.sleep(0.02)
        assert a.manager.is_leader() and not a.task.done()
    finally:
        churner.cancel()
        await asyncio.gather(churner, return_exceptions=True)
        await a.close()
        await b.close()

    lease_writes = accepted_writes(env.audit, resource="leases")
    bob_acquired = next(r for r in lease_writes if r.user == "bob")
    alice_renewals = [r for r in lease_writes if r.user == "alice" and r.seq < bob_acquired.seq]
    alice_writes = [
        r for r in accepted_writes(env.audit, user="alice", resource="configmaps")
        if r.seq < bob_stopped
    ]  # fmt: skip
    assert alice_writes, "alice was reconciling before the partition"
    last_alice = alice_writes[-1]
    assert at(last_alice) < at(alice_renewals[-1]) + LEASE, "wrote after its lease could expire"
    assert last_alice.seq < bob_acquired.seq, "a non-holder wrote"
    bob_writes = accepted_writes(env.audit, user="bob", resource="configmaps")
    assert bob_writes and bob_writes[0].seq > bob_acquired.seq


async def wait_standby(env: Env, identity: str, timeout: float = 60) -> None:
    """Wait until a freshly started process is polling the Lease (imports can be slow)."""
    async with asyncio.timeout(timeout):
        while len(env.audit.records(user=identity, resource="leases", verb="get")) < 2:
            await asyncio.sleep(0.02)


async def spawn(
    env: Env,
    identity: str,
    *extra: str,
    timings: tuple[float, float, float] = (LEASE, RENEW, RETRY),
) -> asyncio.subprocess.Process:
    """Start operator_proc as ``identity`` with (lease, renew, retry) ``timings`` and
    ``extra`` arguments; its log goes to ``<tmp>/<identity>.log``."""
    lease, renew, retry = timings
    with open(env.tmp / f"{identity}.log", "wb") as log:
        return await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.integration.runtime_controller.operator_proc",
            "--kubeconfig",
            env.kubeconfig(identity),
            "--identity",
            identity,
            "--lease-duration",
            str(lease),
            "--renew-deadline",
            str(renew),
            "--retry-period",
            str(retry),
            *extra,
            cwd=str(REPO),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=log,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )


async def test_killed_leader_is_replaced_within_lease_plus_retry_and_sigterm_exits_0(
    env: Env,
) -> None:
    await create_sources(env, 3)
    procs: list[asyncio.subprocess.Process] = []
    try:
        a = await spawn(env, "proc-a")
        procs.append(a)
        await wait_holder(env, "proc-a", 60)
        b = await spawn(env, "proc-b")
        procs.append(b)
        await wait_echoes(env, 3)
        await wait_standby(env, "proc-b")
        # SIGKILL: no release, b must wait for the lease to expire
        killed_at = time.monotonic()
        a.send_signal(signal.SIGKILL)
        await wait_holder(env, "proc-b", LEASE + RETRY + 3)
        handover = time.monotonic() - killed_at
        print(f"kill hand-over {handover:.2f}s")
        # lease + retry, plus scheduling slack: three processes share 2 CPUs in CI
        assert handover <= LEASE + RETRY + 0.5, f"hand-over took {handover:.2f}s"
        await a.wait()
        # SIGTERM to the new leader: graceful stop, Lease released, exit 0
        c = await spawn(env, "proc-c")
        procs.append(c)
        await wait_standby(env, "proc-c")
        t0 = time.monotonic()
        b.send_signal(signal.SIGTERM)
        await wait_holder(env, "proc-c", 5)
        assert time.monotonic() - t0 < 3.0
        async with asyncio.timeout(10):
            assert await b.wait() == 0
    finally:
        for p in procs:
            if p.returncode is None:
                p.kill()
                await p.wait()


async def test_the_lease_is_held_until_in_flight_reconciles_finished(env: Env) -> None:
    """A graceful stop releases the Lease only after draining: two leaders never overlap."""
    a = Member(env, "alice")
    await wait_holder(env, "alice", 5)
    b = Member(env, "bob")
    try:
        await wait_standby(env, "bob")
        a.rec.delay = 1.0  # the reconcile will still be running when the stop comes
        await create_sources(env, 1, prefix="slow")
        async with asyncio.timeout(10):
            while not a.rec.active:
                await asyncio.sleep(0.01)
        a.stop.set()
        await wait_holder(env, "bob", 5)
        await a.task
    finally:
        await a.close()
        await b.close()
    alice_write = next(
        r
        for r in accepted_writes(env.audit, user="alice", resource="configmaps")
        if r.name == "slow0-echo"
    )
    bob_acquired = next(r for r in accepted_writes(env.audit, resource="leases")
                        if r.user == "bob")  # fmt: skip
    assert alice_write.seq < bob_acquired.seq, "the standby took over during the drain"
