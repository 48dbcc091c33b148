"""Shared by localcluster's counting tests: an empty Storage with ``default``, and a
Service admitted by the built-in admission (cluster IP and ports allocated) as a
create through the API would be."""

from __future__ import annotations

import asyncio
from typing import Any

from localcluster.admission import BuiltinAdmission
from localcluster.hooks import AdmissionAttributes
from localcluster.registry import Registry
from localcluster.storage import Storage


def empty_storage() -> Storage:
    s = Storage(Registry())
    s.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    return s


def service(name: str, *, svc_type: str = "ClusterIP", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": svc_type, "ports": [{"port": 80}], **spec},
    }


def admit(builtin: BuiltinAdmission, obj: dict[str, Any]) -> dict[str, Any]:
    """*obj* as the built-in admission mutates a CREATE of it by an admin."""
    attrs = AdmissionAttributes(
        operation="CREATE",
        group="",
        version="v1",
        resource="services",
        subresource="",
        kind="Service",
        namespace="default",
        name=obj["metadata"]["name"],
        user="admin",
        groups=("system:masters",),
    )
    mutated, _ = asyncio.run(builtin.mutate(attrs, obj, None))
    assert mutated is not None
    return mutated
