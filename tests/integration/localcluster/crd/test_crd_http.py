"""Custom resources and patches through localcluster's real HTTPS API."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from localcluster.cluster import LocalCluster

GROUP = "example.nimctl.dev"
BASE = f"/apis/{GROUP}/v1/namespaces/default/widgets"

CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"widgets.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                  "listKind": "WidgetList"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["image"],
                                "x-kubernetes-validations": [
                                    {
                                        "rule": "!(has(self.replicas) && has(self.autoscale) && "
                                        "self.autoscale)",
                                        "message": "spec.replicas cannot be set when "
                                        "spec.autoscale is true",
                                    }
                                ],
                                "properties": {
                                    "image": {
                                        "type": "string",
                                        "minLength": 1,
                                        "x-kubernetes-validations": [
                                            {"rule": "self == oldSelf",
                                             "message": "image is immutable"}
                                        ],
                                    },
                                    "replicas": {"type": "integer", "minimum": 0,
                                                 "maximum": 10},
                                    "autoscale": {"type": "boolean"},
                                    "mode": {"type": "string", "enum": ["standalone", "kserve"],
                                             "default": "standalone"},
                                    "port": {"type": "integer", "default": 8000},
                                    "name": {"type": "string", "pattern": "^[a-z]+$"},
                                    "ports": {
                                        "type": "array",
                                        "x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["name"],
                                        "items": {"type": "object", "required": ["name"],
                                                  "properties": {
                                                      "name": {"type": "string"},
                                                      "port": {"type": "integer"}}},
                                    },
                                },
                            },
                            "status": {"type": "object",
                                       "properties": {"state": {"type": "string"}}},
                        },
                    }
                },
            }
        ],
    },
}


class Api:
    """A tiny HTTPS client for raw requests (status codes, Status bodies, headers)."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url

    async def call(
        self, method: str, path: str, body: Any = None, *, content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> tuple[int, Any, list[str]]:
        data = None if body is None else (body if isinstance(body, str) else json.dumps(body))
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        async with asyncio.timeout(10):
            async with self.session.request(
                method, self.url + path, data=data, headers=headers, params=params
            ) as resp:
                text = await resp.text()
                warnings = resp.headers.getall("Warning", [])
                return resp.status, (json.loads(text) if text else None), warnings


@pytest.fixture
async def api(cluster: LocalCluster) -> AsyncIterator[Api]:
    ctx = ssl.create_default_context(cadata=cluster.ca_pem.decode())
    token = cluster.token_for("admin")
    async with aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {token}"},
        connector=aiohttp.TCPConnector(ssl=ctx),
    ) as session:
        yield Api(session, cluster.url)


async def _register(api: Api, crd: dict[str, Any]) -> None:
    status, body, _ = await api.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                                     crd)
    assert status == 201, body
    async with asyncio.timeout(5):
        while True:
            status, _, _ = await api.call("GET", BASE)
            if status == 200:
                return
            await asyncio.sleep(0.05)


def _widget(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": spec}


async def test_bad_custom_resource_gets_422_with_per_field_causes(api: Api) -> None:
    await _register(api, CRD)
    status, body, _ = await api.call(
        "POST", BASE, _widget("w", {"replicas": 11, "mode": "other", "name": "ABC"})
    )
    assert status == 422
    assert body["kind"] == "Status"
    assert body["reason"] == "Invalid"
    causes = {(c["field"], c["reason"], c["message"]) for c in body["details"]["causes"]}
    assert ("spec.image", "FieldValueRequired", "Required value") in causes
    assert ("spec.replicas", "FieldValueInvalid",
            "Invalid value: 11: spec.replicas in body should be less than or equal to 10") in causes
    assert ("spec.mode", "FieldValueNotSupported",
            'Unsupported value: "other": supported values: "standalone", "kserve"') in causes
    assert ("spec.name", "FieldValueInvalid",
            "Invalid value: \"ABC\": spec.name in body should match '^[a-z]+$'") in causes
    assert body["message"].startswith(f'Widget.{GROUP} "w" is invalid: ')


async def test_defaults_applied_and_unknown_fields_pruned_with_a_warning(api: Api) -> None:
    await _register(api, CRD)
    status, body, warnings = await api.call(
        "POST", BASE, _widget("w", {"image": "img", "bogus": 1, "ports": [{"name": "a", "x": 2}]})
    )
    assert status == 201, body
    assert body["spec"] == {"image": "img", "mode": "standalone", "port": 8000,
                            "ports": [{"name": "a"}]}
    assert '299 - "unknown field \\"spec.bogus\\""' in warnings, warnings
    status, stored, _ = await api.call("GET", f"{BASE}/w")
    assert status == 200
    assert "bogus" not in stored["spec"]


async def test_cel_rules_and_old_self_immutability(api: Api) -> None:
    await _register(api, CRD)
    status, body, _ = await api.call(
        "POST", BASE, _widget("w", {"image": "img", "replicas": 1, "autoscale": True})
    )
    assert status == 422
    assert body["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "spec",
         "message": 'Invalid value: "object": spec.replicas cannot be set when spec.autoscale '
                    "is true"}
    ]
    status, created, _ = await api.call("POST", BASE, _widget("w", {"image": "img"}))
    assert status == 201, created
    created["spec"]["image"] = "other"
    status, body, _ = await api.call("PUT", f"{BASE}/w", created)
    assert status == 422
    assert body["details"]["causes"] == [
        {"reason": "FieldValueInvalid", "field": "spec.image",
         "message": 'Invalid value: "string": image is immutable'}
    ]
    status, body, _ = await api.call(
        "PATCH", f"{BASE}/w", {"spec": {"replicas": 2}},
        content_type="application/merge-patch+json",
    )
    assert status == 200, body
    assert body["spec"]["replicas"] == 2


async def test_duplicate_map_list_keys_are_rejected(api: Api) -> None:
    await _register(api, CRD)
    status, body, _ = await api.call(
        "POST", BASE, _widget("w", {"image": "i", "ports": [{"name": "a"}, {"name": "a"}]})
    )
    assert status == 422
    assert body["details"]["causes"] == [
        {"reason": "FieldValueDuplicate", "field": "spec.ports[1]",
         "message": 'Duplicate value: map[string]interface {}{"name":"a"}'}
    ]


async def test_non_structural_crd_is_rejected(api: Api) -> None:
    bad = json.loads(json.dumps(CRD))
    bad["metadata"]["name"] = f"gadgets.{GROUP}"
    bad["spec"]["names"] = {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"}
    schema = bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"]["spec"]["properties"]["loose"] = {"properties": {"a": {"type": "string"}}}
    status, body, _ = await api.call(
        "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", bad
    )
    assert status == 422, body
    assert "must not be empty for specified object fields" in body["message"]


async def test_server_side_apply_conflicts_and_force(api: Api) -> None:
    await _register(api, CRD)
    applied = _widget("w", {"image": "img", "replicas": 1})
    status, body, _ = await api.call(
        "PATCH", f"{BASE}/w", applied, content_type="application/apply-patch+yaml",
        params={"fieldManager": "alice"},
    )
    assert status == 201, body
    managers = [m["manager"] for m in body["metadata"]["managedFields"]]
    assert managers == ["alice"]
    other = _widget("w", {"image": "img", "replicas": 3})
    status, body, _ = await api.call(
        "PATCH", f"{BASE}/w", other, content_type="application/apply-patch+yaml",
        params={"fieldManager": "bob"},
    )
    assert status == 409
    assert body["reason"] == "Conflict"
    assert 'conflict with "alice"' in body["message"]
    assert ".spec.replicas" in body["message"]
    status, body, _ = await api.call(
        "PATCH", f"{BASE}/w", other, content_type="application/apply-patch+yaml",
        params={"fieldManager": "bob", "force": "true"},
    )
    assert status == 200, body
    assert body["spec"]["replicas"] == 3


async def test_strategic_merge_patch_on_a_deployment(api: Api) -> None:
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "main", "image": "a:1"},
                                        {"name": "side", "image": "s:1"}]},
            },
        },
    }
    path = "/apis/apps/v1/namespaces/default/deployments"
    status, body, _ = await api.call("POST", path, deployment)
    assert status == 201, body
    patch = {"spec": {"template": {"spec": {"containers": [
        {"name": "main", "image": "a:2"}, {"name": "side", "$patch": "delete"}]}}}}
    status, body, _ = await api.call(
        "PATCH", f"{path}/d", patch, content_type="application/strategic-merge-patch+json"
    )
    assert status == 200, body
    containers = body["spec"]["template"]["spec"]["containers"]
    # merged by name: "main" updated in place, "side" deleted (the server also
    # fills in its container defaults such as imagePullPolicy)
    assert [(c["name"], c["image"]) for c in containers] == [("main", "a:2")]
    assert containers[0]["imagePullPolicy"] == "IfNotPresent"


async def test_json_patch_failures(api: Api) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    status, _, _ = await api.call("POST", path, {"apiVersion": "v1", "kind": "ConfigMap",
                                                 "metadata": {"name": "c"}, "data": {"a": "1"}})
    assert status == 201
    status, body, _ = await api.call(
        "PATCH", f"{path}/c", [{"op": "test", "path": "/data/a", "value": "2"}],
        content_type="application/json-patch+json",
    )
    assert status == 422
    assert "testing value /data/a failed" in body["message"]
    status, body, _ = await api.call(
        "PATCH", f"{path}/c", [{"op": "frob", "path": "/data/a"}],
        content_type="application/json-patch+json",
    )
    assert status == 400
    status, body, _ = await api.call(
        "PATCH", f"{path}/c", [{"op": "replace", "path": "/data/a", "value": "3"}],
        content_type="application/json-patch+json",
    )
    assert status == 200
    assert body["data"] == {"a": "3"}
