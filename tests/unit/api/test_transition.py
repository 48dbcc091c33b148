"""Update-time CEL rules (``oldSelf``): immutable fields keep NVIDIA's messages."""

from __future__ import annotations

from typing import Any

from api.apps.v1alpha1 import NIMBuild, NIMCache, NIMService
from api.base import validate_transition
from tests.unit.api.negative_cases import BASES, set_path


def _edit(kind: str, **edits: Any) -> dict[str, Any]:
    import copy

    obj = copy.deepcopy(BASES[kind])
    for path, value in edits.items():
        set_path(obj, path.replace("__", "."), value)
    return obj


def test_nimservice_dra_resources_are_immutable() -> None:
    old = NIMService.model_validate(
        _edit("NIMService", spec__draResources=[{"resourceClaimName": "a"}])
    )
    changed = NIMService.model_validate(
        _edit("NIMService", spec__draResources=[{"resourceClaimName": "b"}])
    )
    removed = NIMService.model_validate(_edit("NIMService"))
    assert validate_transition(old, changed) == ["spec.draResources is immutable"]
    assert validate_transition(old, removed) == ["spec.draResources is immutable"]
    assert validate_transition(removed, old) == ["spec.draResources is immutable"]
    assert validate_transition(old, old) == []
    # Other spec edits are fine.
    scaled = NIMService.model_validate(
        _edit("NIMService", spec__draResources=[{"resourceClaimName": "a"}], spec__replicas=3)
    )
    assert validate_transition(old, scaled) == []


def test_nimcache_model_puller_is_immutable() -> None:
    old = NIMCache.model_validate(_edit("NIMCache"))
    new = NIMCache.model_validate(_edit("NIMCache", spec__source__ngc__modelPuller="other:2"))
    assert validate_transition(old, new) == [
        "modelPuller is an immutable field. Please create a new NIMCache resource instead "
        "when you want to change this container."
    ]
    assert validate_transition(old, old) == []


def test_nimbuild_spec_is_immutable() -> None:
    old = NIMBuild.model_validate(_edit("NIMBuild"))
    new = NIMBuild.model_validate(_edit("NIMBuild", spec__modelName="other"))
    assert validate_transition(old, new) == ["spec is immutable"]
    assert validate_transition(old, old) == []
