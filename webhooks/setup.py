"""Wiring the validators into a webhook server and describing them to the API server.

:func:`register` adds the NIMService and NIMCache validators at NVIDIA's paths;
:func:`validating_webhook_configuration` builds the matching
ValidatingWebhookConfiguration (``failurePolicy: Fail``, ``sideEffects: None``,
CREATE and UPDATE, ``admissionReviewVersions: [v1]``, NVIDIA's webhook names)
for either a URL (``nimctl local``) or an in-cluster Service (the Helm chart).

With ``defaulting`` (the operator passes it unless ``--disable-defaulting``) it
also serves the NIMService and NIMCache defaulters (``webhooks.defaulting``)
at ``/mutate-apps-nvidia-com-v1alpha1-<kind>``, described by
:func:`mutating_webhook_configuration`.
"""

from __future__ import annotations

import base64
from typing import Any

from nimctl_runtime.webhook import ValidatingHandler, WebhookServer, validate_path
from nimctl_runtime.webhook.paths import mutate_path
from webhooks.defaulting import NIMCACHE_DEFAULTS, NIMSERVICE_DEFAULTS, DefaultingWebhook
from webhooks.facts import ClusterFacts
from webhooks.nimcache import NIMCacheValidator
from webhooks.nimpipeline import NIMPipelineValidator
from webhooks.nimservice import NIMServiceValidator

GROUP, VERSION = "apps.nvidia.com", "v1alpha1"
CONFIGURATION_NAME = "nimctl-validating-webhook-configuration"
MUTATING_CONFIGURATION_NAME = "nimctl-mutating-webhook-configuration"
# (webhook name, kind, plural)
WEBHOOKS = (
    ("vnimservice-v1alpha1.kb.io", "NIMService", "nimservices"),
    ("vnimcache-v1alpha1.kb.io", "NIMCache", "nimcaches"),
    ("vnimpipeline-v1alpha1.kb.io", "NIMPipeline", "nimpipelines"),
)
MUTATING_WEBHOOKS = (
    ("mnimservice-v1alpha1.kb.io", "NIMService", "nimservices"),
    ("mnimcache-v1alpha1.kb.io", "NIMCache", "nimcaches"),
)


def register(server: WebhookServer, facts: ClusterFacts, *, defaulting: bool = False) -> None:
    """Serve the validators (and, with ``defaulting``, the defaulters) on *server*."""
    if defaulting:
        server.register(
            mutate_path(GROUP, VERSION, "NIMService"), DefaultingWebhook(NIMSERVICE_DEFAULTS)
        )
        server.register(
            mutate_path(GROUP, VERSION, "NIMCache"), DefaultingWebhook(NIMCACHE_DEFAULTS)
        )
    server.register(
        validate_path(GROUP, VERSION, "NIMService"), ValidatingHandler(NIMServiceValidator(facts))
    )
    server.register(
        validate_path(GROUP, VERSION, "NIMCache"), ValidatingHandler(NIMCacheValidator())
    )
    server.register(
        validate_path(GROUP, VERSION, "NIMPipeline"), ValidatingHandler(NIMPipelineValidator())
    )


def mutating_webhook_configuration(
    ca_pem: bytes,
    *,
    url: str | None = None,
    service: tuple[str, str, int] | None = None,
    timeout_seconds: int = 10,
) -> dict[str, Any]:
    """The MutatingWebhookConfiguration for the defaulters (same client forms as validating)."""
    config = _configuration(
        MUTATING_WEBHOOKS, mutate_path, ca_pem, url, service, timeout_seconds
    )
    for webhook in config["webhooks"]:
        webhook["reinvocationPolicy"] = "Never"
    config["kind"] = "MutatingWebhookConfiguration"
    config["metadata"]["name"] = MUTATING_CONFIGURATION_NAME
    return config


def validating_webhook_configuration(
    ca_pem: bytes,
    *,
    url: str | None = None,
    service: tuple[str, str, int] | None = None,
    timeout_seconds: int = 10,
) -> dict[str, Any]:
    """The ValidatingWebhookConfiguration for our validators.

    Pass ``url="https://127.0.0.1:9443"`` (the paths are appended) or
    ``service=(namespace, name, port)``.
    """
    return _configuration(WEBHOOKS, validate_path, ca_pem, url, service, timeout_seconds)


def _configuration(  # noqa: PLR0917 - the two public builders pass everything through
    entries: tuple[tuple[str, str, str], ...],
    path_of: Any,
    ca_pem: bytes,
    url: str | None,
    service: tuple[str, str, int] | None,
    timeout_seconds: int,
) -> dict[str, Any]:
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url or service")
    webhooks = []
    for name, kind, plural in entries:
        path = path_of(GROUP, VERSION, kind)
        client: dict[str, Any] = {"caBundle": base64.b64encode(ca_pem).decode()}
        if url is not None:
            client["url"] = url.rstrip("/") + path
        else:
            assert service is not None
            ns, svc, port = service
            client["service"] = {"namespace": ns, "name": svc, "port": port, "path": path}
        webhooks.append(
            {
                "name": name,
                "admissionReviewVersions": ["v1"],
                "clientConfig": client,
                "failurePolicy": "Fail",
                "matchPolicy": "Equivalent",
                "sideEffects": "None",
                "timeoutSeconds": timeout_seconds,
                "rules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": [VERSION],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [plural],
                        "scope": "*",
                    }
                ],
            }
        )
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {
            "name": CONFIGURATION_NAME,
            "labels": {"app.kubernetes.io/managed-by": "nimctl"},
        },
        "webhooks": webhooks,
    }
