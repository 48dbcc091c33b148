"""A minimal OpenAPI v3 (``/openapi/v3``) built from the Registry.

kubectl needs it for two things: to learn that the server validates fields
itself (a PATCH operation per kind carrying the ``fieldValidation`` query
parameter and ``x-kubernetes-group-version-kind``), so ``kubectl apply`` does
not try client-side validation; and ``kubectl explain`` on custom resources,
served from their CRD schemas. Built-in kinds get paths but no schemas, so
``kubectl explain`` on them reports that the schema is not available.
PATCH operations carry no request-body list, so kubectl computes strategic
merge patches for built-ins from its compiled-in types and JSON merge patches
for custom resources, exactly as against a real server.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .registry import Registry, ResourceInfo

_QUERY_PARAMS = ("dryRun", "fieldManager", "fieldValidation", "force")


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _reverse_domain(group: str) -> str:
    return ".".join(reversed(group.split("."))) if group else "io.k8s.api.core"


def schema_name(info: ResourceInfo) -> str:
    return f"{_reverse_domain(info.group)}.{info.version}.{info.kind}"


def _gvk(info: ResourceInfo) -> dict[str, str]:
    return {"group": info.group, "version": info.version, "kind": info.kind}


def group_version_doc(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    infos = registry.resources(group, version)
    if not infos:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    params = [
        {"name": p, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
        for p in _QUERY_PARAMS
    ]
    for info in infos:
        prefix = "/" + _gv_path(group, version)
        if info.namespaced:
            item = f"{prefix}/namespaces/{{namespace}}/{info.resource}/{{name}}"
        else:
            item = f"{prefix}/{info.resource}/{{name}}"
        ref = {"$ref": f"#/components/schemas/{schema_name(info)}"}
        ok = {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}
        paths[item] = {
            "get": {
                "operationId": f"read{info.kind}",
                "x-kubernetes-action": "get",
                "x-kubernetes-group-version-kind": _gvk(info),
                "responses": ok,
            },
            "patch": {
                "operationId": f"patch{info.kind}",
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": _gvk(info),
                "parameters": params,
                "responses": ok,
            },
        }
        if info.crd and isinstance(info.schema, Mapping):
            s = copy.deepcopy(dict(info.schema))
            s["x-kubernetes-group-version-kind"] = [_gvk(info)]
            schemas[schema_name(info)] = s
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.32.0-nimctl"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def doc_hash(doc: Mapping[str, Any]) -> str:
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()


def root_doc(registry: Registry) -> dict[str, Any]:
    """``/openapi/v3``: one entry per group/version with a content hash."""
    out: dict[str, Any] = {}
    for group, versions in registry.groups():
        for version in versions:
            doc = group_version_doc(registry, group, version)
            if doc is None:
                continue
            path = _gv_path(group, version)
            out[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={doc_hash(doc)}"}
    return {"paths": out}
