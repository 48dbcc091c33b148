"""Object updates keep what the server allocated; the model query speaks OpenAI's /v1/models."""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from controllers.nimservice import http_model_query
from controllers.sync import hpa_owned, needs_write, update_body
from manifests.hashing import stamp_hash


def test_service_update_keeps_cluster_ip_and_node_ports() -> None:
    desired = stamp_hash(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s", "namespace": "d"},
            "spec": {"type": "NodePort", "ports": [{"name": "api", "port": 8000}]},
        }
    )
    live = {
        "metadata": {"name": "s", "resourceVersion": "7", "uid": "u"},
        "spec": {
            "clusterIP": "10.0.0.3",
            "clusterIPs": ["10.0.0.3"],
            "ports": [{"name": "api", "port": 8000, "nodePort": 31000}],
        },
    }
    body = update_body(desired, live)
    assert body["metadata"]["resourceVersion"] == "7"
    assert body["spec"]["clusterIP"] == "10.0.0.3"
    assert body["spec"]["ports"][0]["nodePort"] == 31000


VERSION = "app.kubernetes.io/operator-version"


def _template(labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "c"}]}}


def test_an_update_keeps_the_operator_version_nvidia_put_on_the_pod_template() -> None:
    """Dropping a pod label rolls the pods: NVIDIA's version label stays where it is."""
    desired = stamp_hash(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d", "namespace": "n", "labels": {VERSION: "v2"}},
            "spec": {"template": _template({"app": "d"})},
        }
    )
    live = {
        "metadata": {"name": "d", "resourceVersion": "3"},
        "spec": {"template": _template({"app": "d", VERSION: ""})},
    }
    body = update_body(desired, live)
    assert body["spec"]["template"]["metadata"]["labels"] == {"app": "d", VERSION: ""}
    assert body["metadata"]["labels"] == {VERSION: "v2"}  # the object's label is ours
    # the desired object (and with it the hash) stays as rendered
    assert desired["spec"]["template"]["metadata"]["labels"] == {"app": "d"}
    fresh = update_body(desired, {"metadata": {}, "spec": {"template": _template({"app": "d"})}})
    assert fresh["spec"]["template"]["metadata"]["labels"] == {"app": "d"}


def test_a_leader_worker_set_update_keeps_the_leader_template_version_label() -> None:
    lwt = {"leaderTemplate": _template({"app": "x-lws"}), "workerTemplate": {"spec": {}}}
    desired = stamp_hash(
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "x-lws", "namespace": "n"},
            "spec": {"leaderWorkerTemplate": lwt},
        }
    )
    live_lwt = {
        "leaderTemplate": _template({"app": "x-lws", VERSION: ""}),
        "workerTemplate": {"spec": {}},
    }
    body = update_body(desired, {"metadata": {}, "spec": {"leaderWorkerTemplate": live_lwt}})
    got = body["spec"]["leaderWorkerTemplate"]
    assert got["leaderTemplate"]["metadata"]["labels"] == {"app": "x-lws", VERSION: ""}
    assert "metadata" not in got["workerTemplate"]  # no labels made up for the workers


def test_hpa_owned_deployment_ignores_replica_changes() -> None:
    d: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {"replicas": 1, "template": {}},
    }
    owned = hpa_owned(stamp_hash(d))
    assert owned["spec"]["replicas"] == 1
    live = {**owned, "spec": {**owned["spec"], "replicas": 5}}
    assert not needs_write(owned, live, keep_live_replicas=True)
    assert needs_write(owned, live)
    body = update_body(owned, live, keep_live_replicas=True)
    assert body["spec"]["replicas"] == 5


async def _serve(routes: web.RouteTableDef) -> TestServer:
    app = web.Application()
    app.add_routes(routes)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


async def test_model_query_reads_v1_models() -> None:
    routes = web.RouteTableDef()

    @routes.get("/v1/models")
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "meta/llama3-8b"}]})

    server = await _serve(routes)
    try:
        assert await http_model_query({}, f"127.0.0.1:{server.port}") == "meta/llama3-8b"
    finally:
        await server.close()


async def test_model_query_falls_back_to_metadata_on_404() -> None:
    routes = web.RouteTableDef()

    @routes.get("/v1/metadata")
    async def metadata(request: web.Request) -> web.Response:
        return web.json_response({"modelInfo": [{"shortName": "nv-embedqa:1.0"}]})

    server = await _serve(routes)
    try:
        assert await http_model_query({}, f"127.0.0.1:{server.port}") == "nv-embedqa"
    finally:
        await server.close()


async def test_the_operators_model_query_uses_the_lean_transport_and_keeps_nothing_open() -> None:
    """A plain-HTTP NIM is asked over the client's HTTP/1.1 transport: no aiohttp
    session, one connection per query (``/v1/models`` then ``/v1/metadata`` on 404
    over the same one), none left open once the query returned."""
    import asyncio

    from controllers.nimservice import HttpModelQuery

    routes = web.RouteTableDef()

    @routes.get("/v1/metadata")
    async def metadata(request: web.Request) -> web.Response:
        return web.json_response({"modelInfo": [{"shortName": "nv-embedqa:1.0"}]})

    @routes.get("/prefix/v1/models")
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "meta/llama3-8b"}]})

    server = await _serve(routes)
    query = HttpModelQuery()
    stop = asyncio.Event()
    runner = asyncio.create_task(query.run(stop))
    try:
        for _ in range(5):
            assert await query({}, f"127.0.0.1:{server.port}") == "nv-embedqa"
        assert query.connections_made == 5  # the 404 and the fallback share one
        assert await query({}, f"http://127.0.0.1:{server.port}/prefix/") == "meta/llama3-8b"
        assert query.connections_made == 6
        assert query.open_connections == 0
        assert query.sessions_opened == 0
        stop.set()
        await runner
    finally:
        await server.close()


async def test_the_operators_model_query_reports_a_server_error_and_a_dead_nim() -> None:
    from controllers.nimservice import HttpModelQuery

    routes = web.RouteTableDef()

    @routes.get("/v1/models")
    async def models(request: web.Request) -> web.Response:
        return web.Response(status=503)

    server = await _serve(routes)
    endpoint = f"127.0.0.1:{server.port}"
    query = HttpModelQuery()
    try:
        with pytest.raises(RuntimeError, match="HTTP 503"):
            await query({}, endpoint)
    finally:
        await server.close()
    with pytest.raises(OSError):
        await query({}, endpoint)  # nothing listens there now
    assert query.open_connections == 0
    await query.close()


async def test_the_operators_model_query_keeps_one_session_for_other_schemes() -> None:
    """An ``https://`` endpoint (KServe with TLS) goes through one aiohttp session,
    kept across queries and closed on stop."""
    import asyncio

    from controllers.nimservice import HttpModelQuery

    query = HttpModelQuery()
    stop = asyncio.Event()
    runner = asyncio.create_task(query.run(stop))
    for _ in range(3):
        with pytest.raises(Exception):  # noqa: B017 - nothing listens on port 1
            await query({}, "https://127.0.0.1:1")
    assert query.sessions_opened == 1
    session = query._session
    assert session is not None and not session.closed
    stop.set()
    await runner
    assert session.closed
