"""Builders of NIMService/NIMCache dicts and lookups over rendered objects, for tests."""

from __future__ import annotations

import copy
import functools
import re
from typing import Any

import jsonschema
import pytest
from kubernetes_validate.utils import schema_contents
from referencing import Registry, Resource

NS = "nim-service"
NAME = "llama"


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def nimservice(spec: dict[str, Any] | None = None, *, name: str = NAME) -> dict[str, Any]:
    """A NIMService on an existing PVC, with ``spec`` merged over it."""
    base: dict[str, Any] = {
        "image": {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.8.4"},
        "authSecret": "ngc-api-secret",
        "storage": {"pvc": {"name": "model-pvc"}},
        "replicas": 1,
        "expose": {"service": {"port": 8000}},
    }
    spec = spec or {}
    if "storage" in spec:
        base.pop("storage")
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": name, "namespace": NS, "uid": "1234-uid"},
        "spec": deep_merge(base, spec),
    }


def nimcache(
    source: dict[str, Any] | None = None,
    *,
    name: str = "cache",
    state: str = "Ready",
    status: dict[str, Any] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A NIMCache (NGC optimized by default) with a status."""
    full_spec: dict[str, Any] = {
        "source": source
        or {
            "ngc": {
                "modelPuller": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4",
                "pullSecret": "ngc-secret",
                "authSecret": "ngc-api-secret",
                "model": {"engine": "tensorrt_llm"},
            }
        },
        "storage": {"pvc": {"create": True, "size": "50Gi", "volumeAccessMode": "ReadWriteOnce"}},
    }
    full_spec = deep_merge(full_spec, spec or {})
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMCache",
        "metadata": {"name": name, "namespace": NS, "uid": "cache-uid"},
        "spec": full_spec,
        "status": {"state": state, "pvc": f"{name}-pvc", **(status or {})},
    }


def by_kind(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objs if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, got {[o['kind'] for o in objs]}"
    return found[0]


def kinds(objs: list[dict[str, Any]]) -> list[str]:
    return [o["kind"] for o in objs]


def main_container(objs: list[dict[str, Any]]) -> dict[str, Any]:
    return by_kind(objs, "Deployment")["spec"]["template"]["spec"]["containers"][0]


def pod_spec(objs: list[dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = by_kind(objs, "Deployment")["spec"]["template"]["spec"]
    return spec


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    """name -> value (or valueFrom) of a container's env; asserts names are unique."""
    names = [e["name"] for e in container.get("env", [])]
    assert len(names) == len(set(names)), f"duplicate env names: {names}"
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


K8S_VERSION = "1.32.0"
SCHEMA_DIR = "kubernetes-json-schema/v1.32.0-local-strict"


@functools.cache
def _validator(api_version: str, kind: str) -> jsonschema.protocols.Validator | None:
    """kubernetes-validate's strict v1.32 schema for a kind, loaded once per test run."""
    group_version = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    try:
        schema = schema_contents(f"{SCHEMA_DIR}/{kind.lower()}-{group_version}.json", K8S_VERSION)
    except FileNotFoundError:
        return None  # a CRD kind (Gateway API, Prometheus Operator, ...)
    definitions = schema_contents(f"{SCHEMA_DIR}/_definitions.json", K8S_VERSION)
    registry: Registry[Any] = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(definitions) @ registry
    validator: jsonschema.protocols.Validator = jsonschema.validators.Draft202012Validator(
        schema, registry=registry
    )
    return validator


def assert_valid_k8s(objs: list[dict[str, Any]]) -> None:
    """Each built-in object validates against Kubernetes v1.32's schema (strict)."""
    for obj in objs:
        validator = _validator(obj["apiVersion"], obj["kind"])
        if validator is None:
            continue
        errors = sorted(validator.iter_errors(obj), key=lambda e: list(e.path))
        if errors:
            where = ".".join(str(p) for p in errors[0].path)
            pytest.fail(
                f"{obj['kind']} {obj['metadata']['name']} invalid at {where}: {errors[0].message}"
            )
