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
from platforms.standalone.errors import RenderError
from platforms.standalone.inputs import NIMServiceInputs, quantity, resolve_nimcache

__all__ = ["model_store", "resolve_nimcache"]


def model_store(inp: NIMServiceInputs) -> tuple[dict[str, Any], str | None, dict[str, Any] | None]:
    """The ``model-store`` volume, its mount subPath, and a PVC to create (if any)."""
    storage = inp.spec.storage
    read_only = bool(storage.read_only)
    cache_name = storage.nim_cache.name
    if cache_name:
        cache = inp.resolved_nimcache(cache_name)
        claim = (cache.status.pvc if cache.status is not None else None) or ""
        if not claim:
            raise RenderError(f"missing PVC for the nimcache instance {cache_name}")
        volume = pod.pvc_volume("model-store", claim, read_only=read_only)
        return volume, cache.spec.storage.pvc.sub_path, None
    claim_spec = storage.pvc
    if claim_spec.create:
        claim = claim_spec.name or f"{inp.name}-pvc"
        size = claim_spec.size
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
                annotations=claim_spec.annotations,
                owner_references=inp.owner_refs,
            ),
            # NVIDIA renders [""] when volumeAccessMode is unset, which the
            # API server rejects; default to ReadWriteOnce instead.
            access_modes=[claim_spec.volume_access_mode or "ReadWriteOnce"],
            size=str(size),
            storage_class=claim_spec.storage_class or None,
        )
        volume = pod.pvc_volume("model-store", claim, read_only=read_only)
        return volume, claim_spec.sub_path, created
    if claim_spec.name:
        volume = pod.pvc_volume("model-store", claim_spec.name, read_only=read_only)
        return volume, claim_spec.sub_path, None
    if storage.empty_dir is not None:
        size_limit = storage.empty_dir.size_limit
        return pod.empty_dir_volume("model-store", size_limit=quantity(size_limit)), None, None
    if storage.host_path:
        return pod.host_path_volume("model-store", storage.host_path), None, None
    raise RenderError(
        "neither external PVC name, NIMCache volume, empty dir or local host path "
        "should be provided"
    )
