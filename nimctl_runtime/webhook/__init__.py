"""The aiohttp TLS admission server: AdmissionReview v1 decoding, validating and
mutating handlers registered by path, JSONPatch responses, certificate reload.

Public API: :class:`WebhookServer`, the handler adapters (:class:`ValidatingHandler`,
:class:`DefaultingHandler`), response helpers and Kubernetes-worded field errors.
"""

from nimctl_runtime.field import FieldError, ValidationFailed
from nimctl_runtime.webhook.admission import (
    AdmissionRequest,
    AdmissionResponse,
    allowed,
    denied,
    errored,
    patched,
)
from nimctl_runtime.webhook.handlers import (
    Defaulter,
    DefaultingHandler,
    Handler,
    ValidatingHandler,
    Validator,
)
from nimctl_runtime.webhook.paths import mutate_path, validate_path
from nimctl_runtime.webhook.server import WebhookServer

__all__ = [
    "AdmissionRequest",
    "AdmissionResponse",
    "Defaulter",
    "DefaultingHandler",
    "FieldError",
    "Handler",
    "ValidatingHandler",
    "ValidationFailed",
    "Validator",
    "WebhookServer",
    "allowed",
    "denied",
    "errored",
    "mutate_path",
    "patched",
    "validate_path",
]
