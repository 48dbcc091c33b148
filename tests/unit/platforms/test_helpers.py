"""The schema check the render tests rely on rejects what kubernetes-validate rejects."""

from __future__ import annotations

import kubernetes_validate
import pytest

from tests.unit.platforms.helpers import K8S_VERSION, assert_valid_k8s


def test_helper_rejects_what_kubernetes_validate_rejects() -> None:
    bad = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "x"},
        "spec": {"ports": "no"},
    }
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    with pytest.raises(pytest.fail.Exception):
        assert_valid_k8s([bad])
