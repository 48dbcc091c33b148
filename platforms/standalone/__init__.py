"""The standalone platform: a NIMService becomes a Deployment, Service and friends.

Public API:
  ``render(nimservice, ctx) -> list[dict]`` (pure), ``spec_hash(nimservice)``,
  ``RenderContext``, ``Capabilities``, the ``RenderError`` family, and in
  ``platforms.standalone.nimcache`` the builders of a NIMCache's objects.
"""

from platforms.standalone.context import Capabilities, RenderContext
from platforms.standalone.errors import (
    NIMCacheFailed,
    NIMCacheNotFound,
    NIMCacheNotReady,
    RenderError,
    UnsupportedSpec,
)
from platforms.standalone.nimservice import render, render_before_storage, spec_hash

__all__ = [
    "Capabilities",
    "NIMCacheFailed",
    "NIMCacheNotFound",
    "NIMCacheNotReady",
    "RenderContext",
    "RenderError",
    "UnsupportedSpec",
    "render",
    "render_before_storage",
    "spec_hash",
]
