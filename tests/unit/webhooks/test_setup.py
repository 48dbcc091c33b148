"""The ValidatingWebhookConfiguration we register matches NVIDIA's webhook settings."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from nimctl_runtime.webhook import WebhookServer
from webhooks.facts import StaticClusterFacts
from webhooks.setup import register, validating_webhook_configuration


def test_configuration_for_a_url() -> None:
    cfg = validating_webhook_configuration(b"CA", url="https://127.0.0.1:9443/")
    hooks = {h["name"]: h for h in cfg["webhooks"]}
    assert set(hooks) == {
        "vnimservice-v1alpha1.kb.io",
        "vnimcache-v1alpha1.kb.io",
        "vnimpipeline-v1alpha1.kb.io",
    }
    svc = hooks["vnimservice-v1alpha1.kb.io"]
    assert svc["clientConfig"]["url"] == (
        "https://127.0.0.1:9443/validate-apps-nvidia-com-v1alpha1-nimservice"
    )
    assert base64.b64decode(svc["clientConfig"]["caBundle"]) == b"CA"
    assert svc["failurePolicy"] == "Fail"
    assert svc["sideEffects"] == "None"
    assert svc["admissionReviewVersions"] == ["v1"]
    assert svc["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert svc["rules"][0]["resources"] == ["nimservices"]


def test_configuration_for_a_service() -> None:
    cfg = validating_webhook_configuration(b"CA", service=("nimctl", "nimctl-webhook", 443))
    ref = cfg["webhooks"][1]["clientConfig"]["service"]
    assert ref == {
        "namespace": "nimctl",
        "name": "nimctl-webhook",
        "port": 443,
        "path": "/validate-apps-nvidia-com-v1alpha1-nimcache",
    }


def test_exactly_one_target() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        validating_webhook_configuration(b"CA")


def test_register_serves_nvidias_paths(tmp_path: Path) -> None:
    server = WebhookServer(cert_dir=tmp_path, port=0)
    register(server, StaticClusterFacts())
    assert server.paths == [
        "/validate-apps-nvidia-com-v1alpha1-nimcache",
        "/validate-apps-nvidia-com-v1alpha1-nimpipeline",
        "/validate-apps-nvidia-com-v1alpha1-nimservice",
    ]
