"""The KServe platform: a NIMService becomes a KServe InferenceService (nim-operator.md §2.12).

Public API: ``render(nimservice, ctx) -> list[dict]`` (pure) and
``resolve_deployment_mode(...)`` for the reconciler's lookup order.
"""

from platforms.kserve.nimservice import (
    DEPLOYMENT_MODE_ANNOTATION,
    DEPLOYMENT_MODES,
    KNATIVE_MODES,
    render,
    resolve_deployment_mode,
)

__all__ = [
    "DEPLOYMENT_MODES",
    "DEPLOYMENT_MODE_ANNOTATION",
    "KNATIVE_MODES",
    "render",
    "resolve_deployment_mode",
]
