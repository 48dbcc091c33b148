"""Job builder (batch/v1)."""

from __future__ import annotations

from typing import Any


def build(
    meta: dict[str, Any],
    *,
    template: dict[str, Any],
    backoff_limit: int | None = None,
    ttl_seconds_after_finished: int | None = None,
) -> dict[str, Any]:
    """A Job running ``template`` (whose restartPolicy must be Never or OnFailure)."""
    spec: dict[str, Any] = {"template": template}
    if backoff_limit is not None:
        spec["backoffLimit"] = backoff_limit
    if ttl_seconds_after_finished is not None:
        spec["ttlSecondsAfterFinished"] = ttl_seconds_after_finished
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec}
