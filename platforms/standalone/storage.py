"""Where the standalone NIM's model lives: a NIMCache's PVC, a PVC, emptyDir or hostPath.

``model_store`` returns the ``model-store`` volume, its mount subPath and a
PVC to create when ``spec.storage.pvc.create`` asks for one (nim-operator.md
§2.6). The NIMCache itself is resolved once, in ``NIMServiceInputs.of``
(``inputs.resolve_nimcache``).
"""

from __future__ import annotations

from typing import Any

from manifests import pod, pvc
from manifests.labels import (
    APP_LABEL,
    APP_LABEL_OPERATOR_VALUE,
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    NAME_LABEL,
)
from manifests.meta import object_meta
from nimctl_runtime.meta import dig
from platforms.standalone.errors import RenderError
from platforms.standalone.inputs import NIMServiceInputs, resolve_nimcache

__all__ = ["model_store", "resolve_nimcache"]


def model_store(inp: NIMServiceInputs) -> tuple[dict[str, Any], str | None, dict[str, Any] | None]:
    """The ``model-store`` volume, its mount subPath, and a PVC to create (if any)."""
    storage = inp.spec.get("storage") or {}
    cache_ref = storage.get("nimCache") or {}
    read_only = bool(storage.get("readOnly", False))
    if cache_ref.get("name"):
        cache = inp.resolved_nimcache(cache_ref["name"])
        pvc_spec = dig(cache, "spec", "storage", "pvc", default={})
        claim = dig(cache, "status", "pvc", default="")
        if not claim:
            raise RenderError(f"missing PVC for the nimcache instance {cache_ref['name']}")
        volume = pod.pvc_volume("model-store", claim, read_only=read_only)
        return volume, pvc_spec.get("subPath"), None
    pvc_spec = storage.get("pvc") or {}
    if pvc_spec.get("create"):
        claim = pvc_spec.get("name") or f"{inp.name}-pvc"
        size = pvc_spec.get("size")
        if not size:
            raise RenderError(
                f"failed to parse size for pvc creation {claim}, err quantities must match "
                "the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
            )
        created = pvc.build(
            object_meta(
                claim,
                inp.namespace,
                labels={
                    APP_LABEL: APP_LABEL_OPERATOR_VALUE,
                    NAME_LABEL: inp.name,
                    MANAGED_BY_LABEL: MANAGED_BY_VALUE,
                },
                annotations=pvc_spec.get("annotations"),
                owner_references=inp.owner_refs,
            ),
            # NVIDIA renders [""] when volumeAccessMode is unset, which the
            # API server rejects; default to ReadWriteOnce instead.
            access_modes=[pvc_spec.get("volumeAccessMode") or "ReadWriteOnce"],
            size=str(size),
            storage_class=pvc_spec.get("storageClass") or None,
        )
        volume = pod.pvc_volume("model-store", claim, read_only=read_only)
        return volume, pvc_spec.get("subPath"), created
    if pvc_spec.get("name"):
        volume = pod.pvc_volume("model-store", pvc_spec["name"], read_only=read_only)
        return volume, pvc_spec.get("subPath"), None
    if "emptyDir" in storage:
        size_limit = dig(storage, "emptyDir", "sizeLimit")
        return pod.empty_dir_volume("model-store", size_limit=size_limit), None, None
    if storage.get("hostPath"):
        return pod.host_path_volume("model-store", storage["hostPath"]), None, None
    raise RenderError(
        "neither external PVC name, NIMCache volume, empty dir or local host path "
        "should be provided"
    )
