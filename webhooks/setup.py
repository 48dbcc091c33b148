"""Wiring the validators into a webhook server and describing them to the API server.

:func:`register` adds the NIMService and NIMCache validators at NVIDIA's paths;
:func:`validating_webhook_configuration` builds the matching
ValidatingWebhookConfiguration (``failurePolicy: Fail``, ``sideEffects: None``,
CREATE and UPDATE, ``admissionReviewVersions: [v1]``, NVIDIA's webhook names)
for either a URL (``nimctl local``) or an in-cluster Service (the Helm chart).
"""

from __future__ import annotations

import base64
from typing import Any

from nimctl_runtime.webhook import ValidatingHandler, WebhookServer, validate_path
from webhooks.facts import ClusterFacts
from webhooks.nimcache import NIMCacheValidator
from webhooks.nimpipeline import NIMPipelineValidator
from webhooks.nimservice import NIMServiceValidator

GROUP, VERSION = "apps.nvidia.com", "v1alpha1"
CONFIGURATION_NAME = "nimctl-validating-webhook-configuration"
# (webhook name, kind, plural)
WEBHOOKS = (
    ("vnimservice-v1alpha1.kb.io", "NIMService", "nimservices"),
    ("vnimcache-v1alpha1.kb.io", "NIMCache", "nimcaches"),
    ("vnimpipeline-v1alpha1.kb.io", "NIMPipeline", "nimpipelines"),
)


def register(server: WebhookServer, facts: ClusterFacts) -> None:
    """Serve the NIMService and NIMCache validators on *server*."""
    server.register(
        validate_path(GROUP, VERSION, "NIMService"), ValidatingHandler(NIMServiceValidator(facts))
    )
    server.register(
        validate_path(GROUP, VERSION, "NIMCache"), ValidatingHandler(NIMCacheValidator())
    )
    server.register(
        validate_path(GROUP, VERSION, "NIMPipeline"), ValidatingHandler(NIMPipelineValidator())
    )


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
    if (url is None) == (service is None):
        raise ValueError("give exactly one of url or service")
    webhooks = []
    for name, kind, plural in WEBHOOKS:
        path = validate_path(GROUP, VERSION, kind)
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
