"""Talking to an API server: kubeconfig and in-cluster config, discovery-backed
REST mapping, an async Client over plain dicts, typed errors, retries and QPS limits.
"""

from nimctl_runtime.client.client import (
    PATCH_CONTENT_TYPES,
    Client,
    PatchType,
    WatchEvent,
    decode_json,
    gc_paused,
    selector_text,
    unfenced,
)
from nimctl_runtime.client.config import (
    ConfigError,
    RestConfig,
    in_cluster_config,
    kubeconfig_config,
    load_config,
)
from nimctl_runtime.client.errors import (
    AlreadyExists,
    ApiConnectionError,
    ApiError,
    BadRequest,
    Conflict,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    NotFound,
    NotLeaderError,
    ServerTimeout,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
)
from nimctl_runtime.client.mapper import NoKindMatchError, RESTMapper, RESTMapping
from nimctl_runtime.client.ratelimit import Backoff, TokenBucket

__all__ = [
    "PATCH_CONTENT_TYPES",
    "AlreadyExists",
    "ApiConnectionError",
    "ApiError",
    "Backoff",
    "BadRequest",
    "Client",
    "ConfigError",
    "Conflict",
    "Forbidden",
    "Gone",
    "InternalError",
    "Invalid",
    "NoKindMatchError",
    "NotFound",
    "NotLeaderError",
    "PatchType",
    "RESTMapper",
    "RESTMapping",
    "RestConfig",
    "ServerTimeout",
    "ServiceUnavailable",
    "TokenBucket",
    "TooManyRequests",
    "Unauthorized",
    "WatchEvent",
    "decode_json",
    "gc_paused",
    "in_cluster_config",
    "kubeconfig_config",
    "load_config",
    "selector_text",
    "unfenced",
]
