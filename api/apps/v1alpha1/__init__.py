"""apps.nvidia.com/v1alpha1: NIMService, NIMCache, NIMPipeline, NIMBuild and the NeMo
kinds, as typed models. Import kinds and shared shapes from here."""

from api.apps.v1alpha1.common import *  # noqa: F403
from api.apps.v1alpha1.nimcache import (
    NIMCache,
    NIMCacheSpec,
    NIMCacheStatus,
)
from api.apps.v1alpha1.nimservice import (
    NIMService,
    NIMServiceSpec,
    NIMServiceStatus,
)

__all__ = [
    "NIMCache",
    "NIMCacheSpec",
    "NIMCacheStatus",
    "NIMService",
    "NIMServiceSpec",
    "NIMServiceStatus",
]
