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


def _record_request_writes(monkeypatch: pytest.MonkeyPatch, events: list[str]) -> None:
    """Record each write request the client hands to a socket transport (reads, and the
    server's answers, which start with ``HTTP/``, are not recorded)."""
    from asyncio import selector_events

    transport_class = selector_events._SelectorSocketTransport
    real_write = transport_class.write

    def write(self: object, data: bytes | bytearray | memoryview) -> None:
        if not bytes(data[:5]).startswith((b"HTTP/", b"GET ")):
            events.append("write " + bytes(data).split(b" ", 1)[0].decode())
        real_write(self, data)  # type: ignore[arg-type]

    monkeypatch.setattr(transport_class, "write", write)


async def test_the_fence_is_asked_a_last_time_right_before_the_socket_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Checked before the attempt, paused while the connection opens, resumed: the fence
    is asked once more once the connection is held, and no await (no turn of the event
    loop, in which a pause could resume) lies between that check and the socket write:
    a callback the check schedules has not run when the bytes are written."""
    import asyncio

    api = FakeAPI()
    api.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: CM)
    api.route("DELETE", "/api/v1/namespaces/ns/configmaps/a", lambda r: {})
    events: list[str] = []
    _record_request_writes(monkeypatch, events)
    loop = asyncio.get_running_loop()

    def fence() -> None:
        events.append("fence")
        loop.call_soon(events.append, "loop turned")

    async with serve(api) as client:
        client.fence = fence
        await client.create(CM)  # a new connection
        await client.create(CM)  # a kept-alive one
        await client.delete("v1", "ConfigMap", "a", "ns")
    writes = [i for i, e in enumerate(events) if e.startswith("write")]
    assert [events[i] for i in writes] == ["write POST", "write POST", "write DELETE"]
    for i in writes:
        assert events[i - 2 : i] == ["fence", "fence"], events  # before the attempt, at send
    assert sent(api, "POST") == 2 and sent(api, "DELETE") == 1


async def test_a_write_refused_at_the_last_check_sends_nothing_and_keeps_the_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Valid before the attempt, not any more once the connection is held: not a byte of
    the request is written, the caller gets NotLeaderError, and the connection it held
    goes back to the pool for the next request."""
    api = FakeAPI()
    api.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: CM)
    events: list[str] = []
    _record_request_writes(monkeypatch, events)
    calls = [0]

    def fence() -> None:
        calls[0] += 1
        if calls[0] == 2:  # valid at the first check only (the process 'slept' after it)
            refuse()

    async with serve(api) as client:
        client.fence = fence
        with pytest.raises(NotLeaderError):
            await client.create(CM)
        assert calls[0] == 2 and client.fenced_writes == 1
        assert not any(e == "write POST" for e in events)
        assert sent(api, "POST") == 0
        assert await client.create(CM) == CM  # valid again: sent
        client.fence = None
        assert await client.create(CM) == CM  # unfenced: asked nothing
        assert calls[0] == 4
        pool = client._pool
        assert pool is not None and pool.connections_made == 1
    assert sent(api, "POST") == 2


async def test_unary_requests_build_no_aiohttp_request(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads and writes, fenced or not, go through the lean HTTP/1.1 transport on one
    kept-alive connection: aiohttp (its ClientRequest, header multidicts, timers and
    response parser per request) is left to watches."""
    import aiohttp

    built = [0]
    real_init = aiohttp.ClientRequest.__init__

    def counting(self: aiohttp.ClientRequest, *args: object, **kw: object) -> None:
        built[0] += 1
        real_init(self, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(aiohttp.ClientRequest, "__init__", counting)
    asked = [0]

    def fence() -> None:
        asked[0] += 1

    api = FakeAPI()
    api.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: CM)
    api.route("PATCH", "/api/v1/namespaces/ns/configmaps/a", lambda r: CM)
    api.route("GET", "/api/v1/namespaces/ns/configmaps/a", lambda r: CM)
    async with serve(api) as client:
        await client.get("v1", "ConfigMap", "a", "ns")
        await client.create(CM)
        client.fence = fence
        await client.get("v1", "ConfigMap", "a", "ns")
        await client.create(CM)
        await client.patch("v1", "ConfigMap", "a", {"data": {"k": "v"}}, namespace="ns")
        assert built[0] == 0, "a unary request went through aiohttp"
        assert asked[0] == 4  # two fenced writes, each asked before the attempt and at send
        pool = client._pool
        assert pool is not None and pool.connections_made == 1
    assert api.bodies[-1] == b'{"data":{"k":"v"}}'
