"""The client's write fence: a refused write is never sent, reads and reviews are not fenced."""

from __future__ import annotations

import pytest

from nimctl_runtime.client import NotLeaderError, unfenced

from .fakeapi import FakeAPI, serve

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}}
REVIEW = "/apis/authentication.k8s.io/v1/tokenreviews"


def refuse() -> None:
    raise NotLeaderError("write not sent: not the leader")


def sent(api: FakeAPI, method: str) -> int:
    return sum(1 for r in api.requests if r.method == method and r.path != "/api/v1")


async def test_a_refused_write_is_not_sent_and_is_counted() -> None:
    api = FakeAPI()
    api.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: CM)
    api.route("PUT", "/api/v1/namespaces/ns/configmaps/a", lambda r: CM)
    api.route("PATCH", "/api/v1/namespaces/ns/configmaps/a", lambda r: CM)
    api.route("DELETE", "/api/v1/namespaces/ns/configmaps/a", lambda r: {})
    api.route("GET", "/api/v1/namespaces/ns/configmaps/a", lambda r: CM)
    async with serve(api) as client:
        client.fence = refuse
        with pytest.raises(NotLeaderError):
            await client.create(CM)
        with pytest.raises(NotLeaderError):
            await client.update(CM)
        with pytest.raises(NotLeaderError):
            await client.update_status(CM)
        with pytest.raises(NotLeaderError):
            await client.patch("v1", "ConfigMap", "a", {"data": {}}, namespace="ns")
        with pytest.raises(NotLeaderError):
            await client.delete("v1", "ConfigMap", "a", "ns")
        assert await client.get("v1", "ConfigMap", "a", "ns") == CM  # reads are not fenced
        assert client.fenced_writes == 5
    assert [sent(api, m) for m in ("POST", "PUT", "PATCH", "DELETE", "GET")] == [0, 0, 0, 0, 1]


async def test_the_lease_renewal_and_review_requests_pass_the_fence() -> None:
    api = FakeAPI()
    api.route("PUT", "/api/v1/namespaces/ns/configmaps/a", lambda r: CM)
    api.route("POST", REVIEW, lambda r: {"status": {"authenticated": True}})
    async with serve(api) as client:
        client.fence = refuse
        with unfenced():
            assert await client.update(CM) == CM
        review = await client.request("POST", REVIEW, body={"kind": "TokenReview"})
        assert review["status"]["authenticated"]
        with pytest.raises(NotLeaderError):
            await client.update(CM)  # outside the block: fenced again
    assert sent(api, "PUT") == 1 and sent(api, "POST") == 1


async def test_the_fence_is_asked_again_for_every_retry() -> None:
    """A write retried after a 429 is checked again: the Lease may have run out meanwhile."""
    from .fakeapi import status

    api = FakeAPI()
    leading = [True]

    def throttled(_: object) -> object:
        leading[0] = False  # the Lease runs out while the server says "slow down"
        resp = status(429, "TooManyRequests", "slow down")
        resp.headers["Retry-After"] = "0"
        return resp

    def fence() -> None:
        if not leading[0]:
            refuse()

    api.route("POST", "/api/v1/namespaces/ns/configmaps", throttled)
    async with serve(api) as client:
        client.fence = fence
        with pytest.raises(NotLeaderError):
            await client.create(CM)
    assert sent(api, "POST") == 1


async def test_the_fence_is_asked_again_once_the_connection_is_held() -> None:
    """Checked before a pause, sent after it: opening the connection takes awaits, so the
    fence runs again when aiohttp holds the connection, right before the bytes go out."""
    api = FakeAPI()
    api.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: CM)
    calls = [0]

    def fence() -> None:
        calls[0] += 1
        if calls[0] > 1:  # valid at the first check only (the process 'slept' after it)
            refuse()

    async with serve(api) as client:
        client.fence = fence
        with pytest.raises(NotLeaderError):
            await client.create(CM)
        assert calls[0] == 2
    assert sent(api, "POST") == 0


async def test_the_fence_is_asked_a_last_time_as_the_request_is_sent() -> None:
    """Checked before the connection was held, paused, resumed: the request's own send
    step asks once more, with no await between that check and the socket write."""
    api = FakeAPI()
    api.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: CM)
    calls = [0]

    def fence() -> None:
        calls[0] += 1
        if calls[0] > 2:  # valid before the attempt and at the connection, not at the send
            refuse()

    async with serve(api) as client:
        client.fence = fence
        with pytest.raises(NotLeaderError):
            await client.create(CM)
        assert calls[0] == 3
        assert client.fenced_writes == 1
        client.fence = None
        assert await client.create(CM) == CM  # unfenced again: the send step asks nothing
    assert sent(api, "POST") == 1


async def test_the_fence_is_asked_as_the_body_goes_out() -> None:
    """aiohttp holds a request's headers back to send them with the body, which a task
    of its own writes a loop iteration after ``send`` (before Python 3.12): a process
    paused between the two would send a write checked before the pause. The body step
    asks again; a refusal there sends nothing, raises NotLeaderError (not a connection
    error), and leaves the client working."""
    api = FakeAPI()
    api.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: CM)
    api.route("DELETE", "/api/v1/namespaces/ns/configmaps/a", lambda r: {})
    calls = [0]

    def fence() -> None:
        calls[0] += 1
        if calls[0] == 4:  # valid up to the send step, not when the body goes out
            refuse()

    async with serve(api) as client:
        client.fence = fence
        with pytest.raises(NotLeaderError):
            await client.create(CM)
        assert calls[0] == 4 and client.fenced_writes == 1
        assert sent(api, "POST") == 0
        assert await client.create(CM) == CM  # the next write goes out on a fresh connection
        await client.delete("v1", "ConfigMap", "a", "ns")  # no body: sent from `send` itself
    assert sent(api, "POST") == 1 and sent(api, "DELETE") == 1


async def test_only_fenced_writes_pay_for_request_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    """aiohttp's tracing (the hook that checks the fence again once a connection is
    held) builds a Trace per request and per chunk received; reads, watches and
    writes with no fence set are sent without it, a fenced write still with it."""
    import aiohttp.tracing

    traces = [0]
    real_init = aiohttp.tracing.Trace.__init__

    def counting(self: aiohttp.tracing.Trace, *args: object, **kw: object) -> None:
        traces[0] += 1
        real_init(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(aiohttp.tracing.Trace, "__init__", counting)
    asked = [0]

    def fence() -> None:
        asked[0] += 1

    api = FakeAPI()
    api.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: CM)
    api.route("GET", "/api/v1/namespaces/ns/configmaps/a", lambda r: CM)
    async with serve(api) as client:
        await client.get("v1", "ConfigMap", "a", "ns")
        await client.create(CM)
        assert traces[0] == 0, "a read or an unfenced write was traced"
        client.fence = fence
        await client.get("v1", "ConfigMap", "a", "ns")
        assert traces[0] == 0
        await client.create(CM)
        assert traces[0] == 1
        # asked before the attempt, once the connection is held, as it is sent and
        # as its body (with the held headers) goes out
        assert asked[0] == 4
