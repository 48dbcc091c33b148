"""A minimal OpenAPI v3 (``/openapi/v3``) built from the Registry.

kubectl needs it for two things: to learn that the server validates fields
itself (a PATCH operation per kind carrying the ``fieldValidation`` query
parameter and ``x-kubernetes-group-version-kind``), so ``kubectl apply`` does
not try client-side validation; and ``kubectl explain`` on custom resources,
served from their CRD schemas, and on built-in kinds, served from the
Kubernetes v1.32 type definitions kubernetes-validate ships (see
``BuiltinSchemas``).
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


_DEFS_REF = "#/$defs/"
_COMPONENTS_REF = "#/components/schemas/"


class BuiltinSchemas:
    """Kubernetes' own type schemas (kubernetes-validate's v1.32 definitions),
    rewritten as OpenAPI v3 components so ``kubectl explain`` works on built-ins.
    Loaded on first use; one instance per server."""

    def __init__(self) -> None:
        self._defs: dict[str, Any] | None = None
        self._by_gvk: dict[tuple[str, str, str], str] = {}

    def load(self) -> None:
        if self._defs is not None:
            return
        from importlib import resources

        base = resources.files("kubernetes_validate") / "kubernetes-json-schema"
        path = base / "v1.32.0-local" / "_definitions.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        defs: dict[str, Any] = data.get("$defs") or data.get("definitions") or {}
        for name, definition in defs.items():
            for gvk in definition.get("x-kubernetes-group-version-kind") or []:
                key = (str(gvk.get("group", "")), str(gvk.get("version", "")), str(gvk["kind"]))
                self._by_gvk.setdefault(key, name)
        self._defs = defs

    @property
    def loaded(self) -> bool:
        return self._defs is not None

    def name_for(self, info: ResourceInfo) -> str | None:
        return self._by_gvk.get((info.group, info.version, info.kind))

    def closure(self, roots: list[str]) -> dict[str, Any]:
        """The named definitions and everything they reference, as OpenAPI v3 schemas."""
        defs = self._defs or {}
        out: dict[str, Any] = {}
        todo = [r for r in roots if r in defs]
        while todo:
            name = todo.pop()
            if name in out:
                continue
            converted = _to_openapi(defs[name], todo)
            out[name] = converted
        return out


def _to_openapi(node: Any, refs: list[str]) -> Any:
    """JSON-schema flavoured definition -> OpenAPI v3 (refs rewritten, nullable types)."""
    if isinstance(node, list):
        return [_to_openapi(n, refs) for n in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "$ref" and isinstance(value, str) and value.startswith(_DEFS_REF):
            target = value[len(_DEFS_REF) :]
            refs.append(target)
            out[key] = _COMPONENTS_REF + target
        elif key == "type" and isinstance(value, list):
            types = [t for t in value if t != "null"]
            if types:
                out["type"] = types[0]
            if "null" in value:
                out["nullable"] = True
        elif key in ("properties", "patternProperties", "$defs") and isinstance(value, dict):
            out[key] = {k: _to_openapi(v, refs) for k, v in value.items()}
        else:
            out[key] = _to_openapi(value, refs)
    return out


def group_version_doc(
    registry: Registry, group: str, version: str, builtins: BuiltinSchemas | None = None
) -> dict[str, Any] | None:
    infos = registry.resources(group, version)
    if not infos:
        return None
    paths: dict[str, Any] = {}
    schemas: dict[str, Any] = {}
    builtin_roots: list[str] = []
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
        builtin_name = builtins.name_for(info) if builtins is not None and not info.crd else None
        if builtin_name is not None:
            builtin_roots.append(builtin_name)
        ref = {"$ref": _COMPONENTS_REF + (builtin_name or schema_name(info))}
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
    if builtins is not None and builtin_roots:
        schemas.update(builtins.closure(builtin_roots))
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


# -- OpenAPI v2 -------------------------------------------------------------------

V2_PROTOBUF = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


def empty_v2(version: str) -> dict[str, Any]:
    """``/openapi/v2`` as JSON: a Swagger 2.0 document without definitions.

    kubectl validates a ``kind: List`` against OpenAPI v2 and skips the kinds it
    finds no definition for; the server's own validation still runs.
    """
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": version},
        "paths": {},
        "definitions": {},
    }


def empty_v2_protobuf(version: str) -> bytes:
    """The same document in gnostic's ``openapi_v2.Document`` protobuf, as kubectl asks."""

    def field(number: int, data: bytes) -> bytes:
        return bytes([number << 3 | 2, len(data)]) + data

    info = field(1, b"Kubernetes") + field(2, version.encode())  # Info: title, version
    return field(1, b"2.0") + field(2, info)  # Document: swagger, info
