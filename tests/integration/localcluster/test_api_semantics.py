"""The API server's answers over real HTTPS: bad input, deletion and garbage
collection, subresources, tables, discovery as CRDs come and go, pod logs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest

from localcluster.cluster import LocalCluster


class Http:
    def __init__(self, cluster: LocalCluster, session: aiohttp.ClientSession) -> None:
        self.cluster = cluster
        self.session = session

    async def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        token: str | None = "admin",
    ) -> tuple[int, Any, aiohttp.ClientResponse]:
        hdrs = {"Content-Type": content_type, **(headers or {})}
        if token is not None:
            hdrs["Authorization"] = f"Bearer {self.cluster.token_for(token)}"
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        async with self.session.request(
            method, self.cluster.url + path, data=data, headers=hdrs
        ) as resp:
            text = await resp.read()
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = text.decode()
            return resp.status, parsed, resp


@pytest.fixture
async def http(cluster: LocalCluster) -> AsyncIterator[Http]:
    conn = aiohttp.TCPConnector(ssl=cluster.client_ssl_context())
    async with aiohttp.ClientSession(connector=conn) as session:
        yield Http(cluster, session)


CMS = "/api/v1/namespaces/default/configmaps"
DEPLOYS = "/apis/apps/v1/namespaces/default/deployments"


def _cm(name: str, **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, **meta}}


async def _eventually(check: Callable[[], bool], timeout: float = 5) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.02)


@pytest.mark.parametrize(
    ("kwargs", "code", "reason"),
    [
        ({"raw": b"{not json"}, 400, "BadRequest"),
        ({"raw": b"kind: [unclosed", "content_type": "application/yaml"}, 400, "BadRequest"),
        ({"body": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}}, 400, "BadRequest"),
        ({"body": {"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "x"}}}, 400, "BadRequest"),
        ({"raw": b"x" * (3 * 1024 * 1024 + 10)}, 413, "RequestEntityTooLarge"),
        ({"raw": b"\x00\x01", "content_type": "application/vnd.kubernetes.protobuf"}, 400, "BadRequest"),
        ({"raw": b"<x/>", "content_type": "application/xml"}, 415, "UnsupportedMediaType"),
        ({"body": [1, 2, 3]}, 400, "BadRequest"),
        ({"body": _cm("Bad_Name")}, 422, "Invalid"),
    ],
)  # fmt: skip
async def test_bad_input_gets_status_bodies(
    http: Http, kwargs: dict[str, Any], code: int, reason: str
) -> None:
    status, body, _ = await http.call("POST", CMS, **kwargs)
    assert status == code
    assert body["kind"] == "Status" and body["reason"] == reason and body["code"] == code
    # and the server still answers
    ok, _, _ = await http.call("GET", CMS)
    assert ok == 200


async def test_unknown_paths_auth_and_selectors(http: Http) -> None:
    status, body, _ = await http.call("GET", "/apis/example.com/v1/namespaces/default/things")
    assert status == 404 and body["reason"] == "NotFound"
    status, _, _ = await http.call("GET", CMS, token=None)
    assert status == 401
    status, body, _ = await http.call("GET", CMS + "?labelSelector=a%20in%20(")
    assert status == 400
    status, body, _ = await http.call("GET", CMS + "?fieldSelector=spec.foo%3Dbar")
    assert status == 400 and "field label not supported" in body["message"]
    status, body, _ = await http.call("GET", "/api/v1/configmaps/x")
    assert status == 404
    status, body, _ = await http.call("POST", "/api/v1/namespaces/missing/configmaps", _cm("a"))
    assert status == 404 and 'namespaces "missing" not found' in body["message"]
    status, _, _ = await http.call("GET", "/version", token=None)
    assert status == 200


async def test_conflicts_and_generate_name(http: Http) -> None:
    status, created, _ = await http.call("POST", CMS, _cm("", generateName="gen-"))
    assert status == 201 and created["metadata"]["name"].startswith("gen-")
    name = created["metadata"]["name"]
    status, body, _ = await http.call("POST", CMS, _cm(name))
    assert status == 409 and body["reason"] == "AlreadyExists"
    stale = dict(created, data={"a": "1"})
    status, _, _ = await http.call("PUT", f"{CMS}/{name}", stale)
    assert status == 200
    status, body, _ = await http.call("PUT", f"{CMS}/{name}", dict(stale, data={"a": "2"}))
    assert status == 409 and body["reason"] == "Conflict"


async def test_list_pagination_with_continue(http: Http) -> None:
    for i in range(5):
        await http.call("POST", CMS, _cm(f"p{i}"))
    names: list[str] = []
    path = CMS + "?limit=2"
    while True:
        status, page, _ = await http.call("GET", path)
        assert status == 200
        names += [i["metadata"]["name"] for i in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
        path = f"{CMS}?limit=2&continue={token}"
    assert names == [f"p{i}" for i in range(5)]


def _owner_ref(owner: dict[str, Any], block: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": block,
    }


@pytest.mark.parametrize("policy", ["Background", "Foreground", "Orphan"])
async def test_propagation_policies(cluster: LocalCluster, http: Http, policy: str) -> None:
    _, owner, _ = await http.call("POST", CMS, _cm("owner"))
    await http.call("POST", CMS, _cm("dep", ownerReferences=[_owner_ref(owner, block=True)]))
    status, _body, _ = await http.call(
        "DELETE", f"{CMS}/owner", {"kind": "DeleteOptions", "propagationPolicy": policy}
    )
    assert status == 200
    store = cluster.storage

    def names() -> set[str]:
        return {o["metadata"]["name"] for o in store.list("v1", "ConfigMap", "default")}

    if policy == "Orphan":
        await _eventually(lambda: names() == {"dep"})
        dep = store.get("v1", "ConfigMap", "dep", "default")
        assert "ownerReferences" not in dep["metadata"]
    else:
        await _eventually(lambda: names() == set())


async def test_dependent_with_missing_owner_is_collected(cluster: LocalCluster, http: Http) -> None:
    ghost = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "ghost", "uid": "nope"}}
    status, _, _ = await http.call("POST", CMS, _cm("orphan", ownerReferences=[_owner_ref(ghost)]))
    assert status == 201
    await _eventually(lambda: not cluster.storage.list("v1", "ConfigMap", "default"))


async def test_scale_status_and_table(http: Http) -> None:
    deploy = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        },
        "status": {"replicas": 7},
    }
    status, created, _ = await http.call("POST", DEPLOYS, deploy)
    assert status == 201 and "status" not in created  # status is reset on create
    status, scale, _ = await http.call("GET", f"{DEPLOYS}/web/scale")
    assert scale["kind"] == "Scale" and scale["spec"]["replicas"] == 1
    assert scale["status"]["selector"] == "app=web"
    status, scale, _ = await http.call(
        "PATCH", f"{DEPLOYS}/web/scale", {"spec": {"replicas": 4}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    assert status == 200 and scale["spec"]["replicas"] == 4
    _, obj, _ = await http.call("GET", f"{DEPLOYS}/web")
    obj["status"] = {"replicas": 4, "readyReplicas": 2}
    status, after, _ = await http.call("PUT", f"{DEPLOYS}/web/status", obj)
    assert after["status"]["readyReplicas"] == 2 and after["metadata"]["generation"] == 2
    table_accept = {"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"}
    status, table, _ = await http.call("GET", DEPLOYS, headers=table_accept)
    assert table["kind"] == "Table"
    assert [c["name"] for c in table["columnDefinitions"]][:3] == ["Name", "Ready", "Up-to-date"]
    assert table["rows"][0]["cells"][:2] == ["web", "2/4"]


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gizmos.example.com"},
    "spec": {
        "group": "example.com",
        "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo"},
        "scope": "Cluster",
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {"spec": {"type": "object", "properties": {"n": {"type": "integer"}}}},
                    }
                },
            }
        ],
    },
}  # fmt: skip


async def test_crd_served_then_removed_from_discovery(http: Http) -> None:
    status, _, _ = await http.call(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", CRD
    )
    assert status == 201
    _, doc, _ = await http.call("GET", "/apis/example.com/v1")
    assert [r["name"] for r in doc["resources"]] == ["gizmos"]
    gizmo = {"apiVersion": "example.com/v1", "kind": "Gizmo", "metadata": {"name": "g"},
             "spec": {"n": 1, "extra": True}}  # fmt: skip
    status, created, resp = await http.call("POST", "/apis/example.com/v1/gizmos", gizmo)
    assert status == 201 and created["spec"] == {"n": 1}  # pruned
    assert 'unknown field \\"spec.extra\\"' in resp.headers.get("Warning", "")
    status, body, _ = await http.call(
        "PATCH", "/apis/example.com/v1/gizmos/g", {"spec": {"n": 2}},
        content_type="application/strategic-merge-patch+json",
    )  # fmt: skip
    assert status == 415
    status, body, _ = await http.call(
        "PATCH", "/apis/example.com/v1/gizmos/g", {"spec": {"n": "two"}},
        content_type="application/merge-patch+json",
    )  # fmt: skip
    assert status == 422 and body["details"]["causes"][0]["field"] == "spec.n"
    status, _, _ = await http.call(
        "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.example.com"
    )
    assert status == 200
    status, _, _ = await http.call("GET", "/apis/example.com/v1")
    assert status == 404
    _, groups, _ = await http.call("GET", "/apis")
    assert "example.com" not in [g["name"] for g in groups["groups"]]


async def test_aggregated_discovery(http: Http) -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    status, doc, resp = await http.call("GET", "/apis", headers={"Accept": accept})
    assert status == 200 and resp.headers["Content-Type"] == accept
    apps = next(i for i in doc["items"] if i["metadata"]["name"] == "apps")
    deploy = next(r for r in apps["versions"][0]["resources"] if r["resource"] == "deployments")
    assert {s["subresource"] for s in deploy["subresources"]} == {"scale", "status"}


async def test_pod_log_from_provider(cluster: LocalCluster, http: Http) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "main", "image": "x"}]},
    }
    await http.call("POST", "/api/v1/namespaces/default/pods", pod)
    cluster.pod_log_provider = lambda ns, name, container: f"{ns}/{name}/{container}\nline2\n"
    status, text, _ = await http.call("GET", "/api/v1/namespaces/default/pods/p/log?tailLines=2")
    assert status == 200 and text == "default/p/main\nline2\n"
    status, _body, _ = await http.call("GET", "/api/v1/namespaces/default/pods/p/log?container=x")
    assert status == 400


async def test_metadata_validation_and_protected_namespaces(http: Http) -> None:
    status, body, _ = await http.call("POST", CMS, _cm("x", labels={"bad key!": "v"}))
    assert status == 422 and body["details"]["causes"][0]["field"] == "metadata.labels"
    status, body, _ = await http.call("DELETE", "/api/v1/namespaces/default")
    assert status == 403 and "may not be deleted" in body["message"]


async def test_events_are_served_by_both_event_apis(http: Http) -> None:
    new_style = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e1"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "regarding": {"kind": "Pod", "name": "p", "namespace": "default"},
        "reason": "Pulled",
        "note": "image pulled",
        "type": "Normal",
        "action": "Pull",
        "reportingController": "kubelet",
        "reportingInstance": "node-1",
    }
    status, created, _ = await http.call(
        "POST", "/apis/events.k8s.io/v1/namespaces/default/events", new_style
    )
    assert status == 201 and created["note"] == "image pulled"
    assert created["apiVersion"] == "events.k8s.io/v1"
    status, core, _ = await http.call(
        "GET", "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dp"
    )
    [item] = core["items"]
    assert item["message"] == "image pulled" and item["involvedObject"]["name"] == "p"
    assert item["source"] == {"component": "kubelet", "host": "node-1"}
    status, listed, _ = await http.call(
        "GET", "/apis/events.k8s.io/v1/namespaces/default/events?fieldSelector=regarding.name%3Dp"
    )
    assert listed["kind"] == "EventList" and listed["items"][0]["reportingController"] == "kubelet"


async def test_hostile_bodies_are_refused(http: Http) -> None:
    deep = b"[" * 100000 + b"]" * 100000
    status, _, _ = await http.call("POST", CMS, raw=deep)
    assert status == 400
    laughs = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        laughs += f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]\n"
    status, _body, _ = await http.call(
        "POST", CMS, raw=laughs.encode(), content_type="application/yaml"
    )
    assert status == 413
    ok, _, _ = await http.call("GET", CMS)
    assert ok == 200


async def test_create_with_resource_version_is_refused(http: Http) -> None:
    status, body, _ = await http.call("POST", CMS, _cm("x", resourceVersion="5"))
    assert status == 400 and "resourceVersion should not be set" in body["message"]


async def test_metadata_only_reads(http: Http) -> None:
    await http.call("POST", CMS, {**_cm("m"), "data": {"big": "x" * 100}})
    accept = {"Accept": "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"}
    status, doc, _ = await http.call("GET", CMS, headers=accept)
    assert status == 200 and doc["kind"] == "PartialObjectMetadataList"
    assert doc["items"][0]["metadata"]["name"] == "m" and "data" not in doc["items"][0]
    accept = {"Accept": "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"}
    status, one, _ = await http.call("GET", f"{CMS}/m", headers=accept)
    assert one["kind"] == "PartialObjectMetadata" and one["metadata"]["name"] == "m"
