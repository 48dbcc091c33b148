"""The lean HTTP/1.1 transport of unary requests against a scripted raw server: every
framing the API server may answer with, split anywhere, kept-alive connections reused,
and what a broken or silent server turns into."""

from __future__ import annotations

import asyncio
import gzip
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import pytest

from nimctl_runtime.client import ApiConnectionError, Client, RestConfig, ServerTimeout
from nimctl_runtime.client.http1 import ConnectFailed, ConnectionLost, Pool

HEAD = b"GET /x HTTP/1.1\r\nHost: t\r\n\r\n"

Answer = Callable[[bytes], list[bytes] | None]


class RawServer:
    """Answers each request with the byte pieces *answer* returns (None: say nothing),
    writing them one by one so the client sees an answer split at every boundary."""

    def __init__(self, answer: Answer, *, close_after: bool = False) -> None:
        self.answer = answer
        self.close_after = close_after
        self.connections = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                self.requests.append(head + body)
                pieces = self.answer(head + body)
                if pieces is None:
                    await asyncio.sleep(3600)
                    return
                for piece in pieces:
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0)
                if self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@asynccontextmanager
async def raw_server(answer: Answer, **kw: bool) -> AsyncIterator[tuple[RawServer, int]]:
    server = RawServer(answer, **kw)
    listener = await asyncio.start_server(server.handle, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        yield server, port
    finally:
        listener.close()


def split(data: bytes, size: int = 7) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


JSON = b'{"kind":"ConfigMap","metadata":{"name":"a"}}'


@pytest.mark.parametrize(
    "answer",
    [
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (len(JSON), JSON),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in split(JSON, 10))
        + b"0\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"%x;ext=1\r\n%s\r\n" % (len(JSON), JSON)
        + b"0\r\nX-Trailer: t\r\n\r\n",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s"
        % (len(JSON), JSON),
        b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
        % (len(gzip.compress(JSON)), gzip.compress(JSON)),
    ],
    ids=["content-length", "chunked", "chunk-extension-and-trailer", "100-continue", "gzip"],
)
async def test_every_framing_split_anywhere_gives_the_body_and_keeps_the_connection(
    answer: bytes,
) -> None:
    async with raw_server(lambda _: split(answer)) as (server, port):
        pool = Pool("127.0.0.1", port)
        for _ in range(3):
            response = await pool.request(HEAD, None, time_limit=5)
            assert response.status == 200 and response.body == JSON
        assert server.connections == 1 and pool.connections_made == 1 and pool.idle == 1
        pool.close()


async def test_a_body_until_close_and_connection_close_are_read_whole_and_not_reused() -> None:
    until_close = b"HTTP/1.1 200 OK\r\n\r\n" + JSON
    async with raw_server(lambda _: split(until_close), close_after=True) as (server, port):
        pool = Pool("127.0.0.1", port)
        for _ in range(2):
            response = await pool.request(HEAD, None, time_limit=5)
            assert response.body == JSON
        assert pool.connections_made == 2 and pool.idle == 0
    closing = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s" % (
        len(JSON),
        JSON,
    )
    async with raw_server(lambda _: [closing], close_after=True) as (server, port):
        pool = Pool("127.0.0.1", port)
        for _ in range(2):
            assert (await pool.request(HEAD, None, time_limit=5)).body == JSON
        assert pool.connections_made == 2 and server.connections == 2


async def test_headers_are_all_kept_in_order_with_lower_case_names() -> None:
    answer = (
        b'HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nWarning: 299 - "a"\r\n'
        b'warning: 299 - "b"\r\nContent-Length: 0\r\n\r\n'
    )
    async with raw_server(lambda _: [answer]) as (_, port):
        pool = Pool("127.0.0.1", port)
        response = await pool.request(HEAD, None, time_limit=5)
        assert response.status == 429 and response.body == b""
        assert response.header("retry-after") == "1"
        assert response.header_all("warning") == ['299 - "a"', '299 - "b"']
        pool.close()


async def test_a_request_body_goes_out_after_its_head() -> None:
    ok = b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\n{}"
    async with raw_server(lambda _: [ok]) as (server, port):
        pool = Pool("127.0.0.1", port)
        head = b"POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\n"
        response = await pool.request(head, b"body", time_limit=5)
        assert response.status == 201 and server.requests == [head + b"body"]
        pool.close()


async def test_an_answer_cut_short_is_a_lost_connection_and_the_next_request_reconnects() -> None:
    answers = iter(
        [
            [b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial'],
            [b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"],
        ]
    )
    async with raw_server(lambda _: next(answers), close_after=True) as (_, port):
        pool = Pool("127.0.0.1", port)
        with pytest.raises(ConnectionLost):
            await pool.request(HEAD, None, time_limit=5)
        assert (await pool.request(HEAD, None, time_limit=5)).body == b"{}"
        assert pool.connections_made == 2


async def test_garbage_is_a_lost_connection() -> None:
    async with raw_server(lambda _: [b"SSH-2.0-OpenSSH\r\n\r\n"]) as (_, port):
        pool = Pool("127.0.0.1", port)
        with pytest.raises(ConnectionLost):
            await pool.request(HEAD, None, time_limit=5)
        assert pool.idle == 0
        pool.close()


async def test_a_silent_server_times_out_and_its_connection_is_dropped() -> None:
    async with raw_server(lambda _: None) as (_, port):
        pool = Pool("127.0.0.1", port)
        with pytest.raises(TimeoutError):
            await pool.request(HEAD, None, time_limit=0.2)
        assert pool.idle == 0
        pool.close()


async def test_a_refused_connection_is_connect_failed() -> None:
    listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    listener.close()
    await listener.wait_closed()
    pool = Pool("127.0.0.1", port)
    with pytest.raises(ConnectFailed) as failed:
        await pool.request(HEAD, None, time_limit=5)
    assert isinstance(failed.value.os_error, ConnectionRefusedError)


async def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    async with raw_server(lambda _: [ok], close_after=True) as (server, port):
        pool = Pool("127.0.0.1", port)
        await pool.request(HEAD, None, time_limit=5)
        # The answer said keep-alive, then the server closed the connection.
        for _ in range(100):
            if pool.idle == 0:
                break
            await asyncio.sleep(0.01)
        assert pool.idle == 0
        assert (await pool.request(HEAD, None, time_limit=5)).body == b"{}"
        assert server.connections == 2


async def test_client_maps_transport_failures_to_api_errors() -> None:
    """A read that times out is retried and then a ServerTimeout; a write whose answer is
    cut short is not repeated and is an ApiConnectionError."""
    async with raw_server(lambda _: None) as (server, port):
        client = Client(RestConfig(host=f"http://127.0.0.1:{port}", timeout=0.1), max_retries=1)
        client.mapper.rest_mapping = _configmaps  # type: ignore[method-assign]
        try:
            with pytest.raises(ServerTimeout):
                await client.get("v1", "ConfigMap", "a", "ns")
            assert len(server.requests) == 2
        finally:
            await client.close()
    cut = [b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"]
    async with raw_server(lambda _: cut, close_after=True) as (server, port):
        client = Client(RestConfig(host=f"http://127.0.0.1:{port}"), max_retries=3)
        client.mapper.rest_mapping = _configmaps  # type: ignore[method-assign]
        try:
            with pytest.raises(ApiConnectionError):
                await client.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {"name": "a", "namespace": "ns"},
                    }
                )
            assert len(server.requests) == 1
        finally:
            await client.close()


async def test_client_sends_the_path_prefix_query_and_credentials() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    async with raw_server(lambda _: [ok]) as (server, port):
        config = RestConfig(host=f"http://127.0.0.1:{port}/k8s/clusters/c-1", token="t0k")
        async with Client(config) as client:
            await client.request("GET", "/api/v1/pods", params={"labelSelector": "a in (b,c)"})
    head = server.requests[0].decode()
    assert head.startswith(
        "GET /k8s/clusters/c-1/api/v1/pods?labelSelector=a%20in%20%28b%2Cc%29 HTTP/1.1\r\n"
    )
    assert f"Host: 127.0.0.1:{port}\r\n" in head and "Authorization: Bearer t0k\r\n" in head


async def _configmaps(api_version: str, kind: str) -> object:
    from nimctl_runtime.client.mapper import RESTMapping

    return RESTMapping(
        group="", version="v1", kind="ConfigMap", resource="configmaps", namespaced=True
    )


async def test_requests_beyond_the_connection_limit_wait_for_a_free_connection() -> None:
    ok = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    async with raw_server(lambda _: [ok]) as (server, port):
        pool = Pool("127.0.0.1", port, limit=2)
        answers = await asyncio.gather(*(pool.request(HEAD, None, time_limit=5) for _ in range(9)))
        assert [a.body for a in answers] == [b"{}"] * 9
        assert pool.connections_made == 2 and server.connections == 2
        pool.close()
