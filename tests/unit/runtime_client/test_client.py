"""Client behaviour against a scripted server: paths, verbs, errors, retries, watches."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from nimctl_runtime import metrics
from nimctl_runtime.client import (
    AlreadyExists,
    Conflict,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    NoKindMatchError,
    NotFound,
    TooManyRequests,
)

from .fakeapi import FakeAPI, serve, status, stream_lines

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}}


async def test_get_builds_paths_from_discovery_and_sends_bearer_token():
    api = FakeAPI()
    api.route("GET", "/api/v1/namespaces/ns/configmaps/a", lambda r: CM)
    api.route("GET", "/api/v1/nodes/n1", lambda r: {"kind": "Node", "metadata": {"name": "n1"}})
    async with serve(api) as client:
        assert await client.get("v1", "ConfigMap", "a", "ns") == CM
        assert (await client.get("v1", "Node", "n1"))["metadata"]["name"] == "n1"
        # Namespace is ignored for cluster-scoped kinds.
        assert (await client.get("v1", "Node", "n1", "ns"))["metadata"]["name"] == "n1"
    assert api.requests[-1].headers["Authorization"] == "Bearer secret"
    assert api.discovery_calls == 1


async def test_kinds_from_crds_installed_after_start_are_found_on_a_miss():
    api = FakeAPI()
    api.route(
        "GET",
        "/apis/apps.nvidia.com/v1alpha1/namespaces/ns/nimservices/x",
        lambda r: {"kind": "NIMService"},
    )
    async with serve(api) as client:
        with pytest.raises(NoKindMatchError):
            await client.get("apps.nvidia.com/v1alpha1", "NIMService", "x", "ns")
        api.group_resources["apps.nvidia.com/v1alpha1"] = [
            {"name": "nimservices", "kind": "NIMService", "namespaced": True},
            {"name": "nimservices/status", "kind": "NIMService", "namespaced": True},
        ]
        assert (await client.get("apps.nvidia.com/v1alpha1", "NIMService", "x", "ns"))[
            "kind"
        ] == "NIMService"


async def test_list_follows_continue_tokens():
    api = FakeAPI()

    def handler(request: web.Request):
        token = request.query.get("continue")
        assert request.query["limit"] == "2"
        assert request.query["labelSelector"] == "app=x"
        start = int(token or 0)
        items = [{"metadata": {"name": f"c{i}"}} for i in range(start, min(start + 2, 5))]
        meta = {"resourceVersion": "77"}
        if start + 2 < 5:
            meta["continue"] = str(start + 2)
        return {"kind": "ConfigMapList", "metadata": meta, "items": items}

    api.route("GET", "/api/v1/namespaces/ns/configmaps", handler)
    async with serve(api) as client:
        result = await client.list("v1", "ConfigMap", "ns", label_selector={"app": "x"}, limit=2)
    assert [i["metadata"]["name"] for i in result["items"]] == ["c0", "c1", "c2", "c3", "c4"]
    assert result["metadata"] == {"resourceVersion": "77"}


@pytest.mark.parametrize(
    ("code", "reason", "exc"),
    [
        (404, "NotFound", NotFound),
        (409, "AlreadyExists", AlreadyExists),
        (409, "Conflict", Conflict),
        (403, "Forbidden", Forbidden),
        (410, "Expired", Gone),
    ],
)
async def test_errors_are_typed_by_reason(code, reason, exc):
    api = FakeAPI()
    api.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: status(code, reason, "nope"))
    async with serve(api) as client:
        with pytest.raises(exc) as info:
            await client.create(CM)
    assert info.value.status == code
    assert info.value.message == "nope"


async def test_invalid_carries_field_causes():
    api = FakeAPI()
    causes = [{"reason": "FieldValueRequired", "field": "spec.image", "message": "Required value"}]
    api.route(
        "PUT",
        "/api/v1/namespaces/ns/configmaps/a",
        lambda r: status(422, "Invalid", "bad", causes=causes),
    )
    async with serve(api) as client:
        with pytest.raises(Invalid) as info:
            await client.update(CM)
    assert info.value.causes == causes


async def test_429_with_retry_after_is_retried_for_writes_and_counted_in_metrics():
    api = FakeAPI()
    calls = {"n": 0}

    def handler(request):
        calls["n"] += 1
        if calls["n"] < 3:
            resp = status(429, "TooManyRequests", "slow down")
            resp.headers["Retry-After"] = "0"
            return resp
        return {**CM, "metadata": {**CM["metadata"], "resourceVersion": "1"}}

    api.route("POST", "/api/v1/namespaces/ns/configmaps", handler)
    async with serve(api) as client:
        created = await client.create(CM)
        host = client._host_label
    assert created["metadata"]["resourceVersion"] == "1"
    assert calls["n"] == 3
    # Each port is a new host label, so the counts are this test's own.
    throttled = metrics.REGISTRY.get_sample_value(
        "rest_client_requests_total", {"code": "429", "method": "POST", "host": host}
    )
    ok = metrics.REGISTRY.get_sample_value(
        "rest_client_requests_total", {"code": "200", "method": "POST", "host": host}
    )
    assert (throttled, ok) == (2.0, 1.0)
    assert (
        metrics.REGISTRY.get_sample_value(
            "rest_client_request_duration_seconds_count", {"verb": "POST", "host": host}
        )
        == 3.0
    )


async def test_500_storm_on_reads_is_ridden_out_but_writes_are_not_repeated():
    api = FakeAPI()
    reads = {"n": 0}
    writes = {"n": 0}

    def read(request):
        reads["n"] += 1
        return status(500, "InternalError", "etcd hiccup") if reads["n"] < 4 else CM

    def write(request):
        writes["n"] += 1
        return status(500, "InternalError", "etcd hiccup")

    api.route("GET", "/api/v1/namespaces/ns/configmaps/a", read)
    api.route("DELETE", "/api/v1/namespaces/ns/configmaps/a", write)
    async with serve(api) as client:
        client.max_retries = 5
        assert await client.get("v1", "ConfigMap", "a", "ns") == CM
        with pytest.raises(InternalError):
            await client.delete("v1", "ConfigMap", "a", "ns")
    assert reads["n"] == 4
    assert writes["n"] == 1


async def test_retries_give_up_with_typed_error_and_retry_after():
    api = FakeAPI()

    def handler(request):
        resp = status(429, "TooManyRequests", "slow down")
        resp.headers["Retry-After"] = "0"
        return resp

    api.route("GET", "/api/v1/namespaces/ns/configmaps/a", handler)
    async with serve(api) as client:
        client.max_retries = 2
        with pytest.raises(TooManyRequests) as info:
            await client.get("v1", "ConfigMap", "a", "ns")
    assert info.value.retry_after == 0.0
    assert len(api.requests) == 1 + 3  # discovery + 3 attempts


async def test_patch_content_types_and_write_options():
    api = FakeAPI()
    api.route("PATCH", "/api/v1/namespaces/ns/configmaps/a", lambda r: CM)
    api.route("PATCH", "/api/v1/namespaces/ns/configmaps/a/status", lambda r: CM)
    async with serve(api) as client:
        await client.patch("v1", "ConfigMap", "a", {"data": {"x": "1"}}, namespace="ns")
        await client.patch(
            "v1",
            "ConfigMap",
            "a",
            [{"op": "remove", "path": "/data"}],
            namespace="ns",
            patch_type="json",
        )
        await client.patch(
            "v1",
            "ConfigMap",
            "a",
            {"data": {}},
            namespace="ns",
            patch_type="strategic",
            subresource="status",
        )
        await client.apply(CM, field_manager="nimctl", force=True)
        with pytest.raises(ValueError, match="field_manager"):
            await client.patch("v1", "ConfigMap", "a", CM, namespace="ns", patch_type="apply")
    patches = [r for r in api.requests if r.method == "PATCH"]
    assert [r.headers["Content-Type"] for r in patches] == [
        "application/merge-patch+json",
        "application/json-patch+json",
        "application/strategic-merge-patch+json",
        "application/apply-patch+yaml",
    ]
    assert patches[2].path.endswith("/status")
    assert patches[3].query["fieldManager"] == "nimctl"
    assert patches[3].query["force"] == "true"


async def test_delete_sends_propagation_and_preconditions():
    api = FakeAPI()
    api.route("DELETE", "/api/v1/namespaces/ns/configmaps/a", lambda r: {"kind": "Status"})
    async with serve(api) as client:
        await client.delete(
            "v1",
            "ConfigMap",
            "a",
            "ns",
            propagation_policy="Foreground",
            preconditions={"uid": "u1"},
            grace_period_seconds=0,
        )
    body = json.loads(api.bodies[-1])
    assert body["propagationPolicy"] == "Foreground"
    assert body["preconditions"] == {"uid": "u1"}
    assert body["gracePeriodSeconds"] == 0


async def test_create_and_update_status_paths():
    api = FakeAPI()
    api.route("POST", "/api/v1/namespaces/ns/configmaps", lambda r: CM)
    api.route("PUT", "/api/v1/namespaces/ns/configmaps/a/status", lambda r: CM)
    async with serve(api) as client:
        await client.create(CM, field_manager="m", dry_run=True)
        await client.update_status(CM)
    post = next(r for r in api.requests if r.method == "POST")
    assert post.query["dryRun"] == "All" and post.query["fieldManager"] == "m"


async def test_watch_streams_events_with_bookmarks_and_raises_gone_on_error_event():
    api = FakeAPI()

    async def handler(request):
        assert request.query["watch"] == "true"
        assert request.query["allowWatchBookmarks"] == "true"
        assert request.query["timeoutSeconds"] == "300"
        if request.query["resourceVersion"] == "1":
            return await stream_lines(
                request,
                [
                    {"type": "ADDED", "object": CM},
                    {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "5"}}},
                ],
            )
        return await stream_lines(
            request,
            [
                {
                    "type": "ERROR",
                    "object": {
                        "kind": "Status",
                        "code": 410,
                        "reason": "Expired",
                        "message": "too old resource version",
                    },
                },
            ],
        )

    api.route("GET", "/api/v1/namespaces/ns/configmaps", handler)
    async with serve(api) as client:
        events = [
            e
            async for e in client.watch(
                "v1", "ConfigMap", "ns", resource_version="1", timeout_seconds=300
            )
        ]
        assert [e.type for e in events] == ["ADDED", "BOOKMARK"]
        with pytest.raises(Gone):
            async for _ in client.watch(
                "v1", "ConfigMap", "ns", resource_version="0", timeout_seconds=300
            ):
                pass


async def test_a_silent_watch_ends_after_the_idle_timeout_instead_of_hanging():
    api = FakeAPI()
    release = asyncio.Event()

    async def handler(request):
        return await stream_lines(request, [{"type": "ADDED", "object": CM}], release)

    api.route("GET", "/api/v1/namespaces/ns/configmaps", handler)
    async with serve(api, watch_idle_timeout=0.3) as client:
        async with asyncio.timeout(10):
            events = [e async for e in client.watch("v1", "ConfigMap", "ns")]
        release.set()
    assert [e.type for e in events] == ["ADDED"]


async def test_watch_refused_with_429_and_retry_after_is_retried_then_surfaces():
    api = FakeAPI()
    calls = {"n": 0}

    async def handler(request):
        calls["n"] += 1
        if calls["n"] <= 2:
            resp = status(429, "TooManyRequests", "slow down")
            resp.headers["Retry-After"] = "0"
            return resp
        return await stream_lines(request, [{"type": "ADDED", "object": CM}])

    api.route("GET", "/api/v1/namespaces/ns/configmaps", handler)
    async with serve(api) as client:
        events = [e async for e in client.watch("v1", "ConfigMap", "ns")]
        assert [e.type for e in events] == ["ADDED"]
        assert calls["n"] == 3
        # Out of retries: the caller (the reflector) gets the typed error.
        calls["n"] = 0
        client.max_retries = 1
        with pytest.raises(TooManyRequests) as info:
            async for _ in client.watch("v1", "ConfigMap", "ns"):
                pass
    assert info.value.retry_after == 0.0
    assert calls["n"] == 2


async def test_a_401_re_reads_a_rotated_service_account_token(tmp_path):
    import time as _time

    token_file = tmp_path / "token"
    token_file.write_text("first")
    api = FakeAPI()

    def handler(request):
        if request.headers.get("Authorization") != "Bearer second":
            return status(401, "Unauthorized", "Unauthorized")
        return CM

    api.route("GET", "/api/v1/namespaces/ns/configmaps/a", handler)
    async with serve(api, token_file=str(token_file)) as client:
        client.config._token_read_at = _time.monotonic()  # "first" was read just now
        token_file.write_text("second")
        assert await client.get("v1", "ConfigMap", "a", "ns") == CM
