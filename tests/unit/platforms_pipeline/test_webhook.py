"""The NIMPipeline webhook: omitted ``enabled`` warns, unnamed or duplicate services are denied."""

from __future__ import annotations

from typing import Any

import pytest

from nimctl_runtime.field import ValidationFailed
from webhooks.nimpipeline import NIMPipelineValidator


def _pipeline(*services: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"services": list(services)}}


async def test_omitted_enabled_is_allowed_with_a_warning_naming_the_service() -> None:
    warnings = await NIMPipelineValidator().validate_create(
        _pipeline(
            {"name": "llm", "enabled": True}, {"name": "emb"}, {"name": "rr", "enabled": False}
        )
    )
    assert len(warnings) == 1
    assert warnings[0].startswith("nimpipeline.spec.services[1].enabled (emb): not set")
    assert "not deployed" in warnings[0] and "enabled: true" in warnings[0]


async def test_enabled_services_need_distinct_names() -> None:
    v = NIMPipelineValidator()
    with pytest.raises(ValidationFailed) as exc:
        await v.validate_create(_pipeline({"enabled": True}))
    assert "nimpipeline.spec.services[0].name: Required value" in str(exc.value)
    with pytest.raises(ValidationFailed) as exc:
        await v.validate_update(
            _pipeline(), _pipeline({"name": "a", "enabled": True}, {"name": "a", "enabled": True})
        )
    assert 'nimpipeline.spec.services[1].name: Duplicate value: "a"' in str(exc.value)
    # Disabled entries may share a name with an enabled one: only one NIMService exists.
    assert (
        await v.validate_create(
            _pipeline({"name": "a", "enabled": True}, {"name": "a", "enabled": False})
        )
        == []
    )
