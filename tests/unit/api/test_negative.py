"""Every CEL rule, bound, enum and pattern rejects a manifest that breaks it, at the
model level, with NVIDIA's message for the CEL rules and at the right field path."""

from __future__ import annotations

import pytest

from api.serialize import LoadError, load
from tests.unit.api.negative_cases import BASES, CASES, Case


@pytest.mark.parametrize("kind", sorted(BASES))
def test_base_manifests_are_valid(kind: str) -> None:
    load(BASES[kind])


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_invalid_manifest_is_rejected(case: Case) -> None:
    with pytest.raises(LoadError) as info:
        load(case.manifest())
    errors = info.value.errors
    at_path = [e for e in errors if e.path == case.path]
    assert at_path, f"no error at {case.path}: {errors}"
    if case.cel:
        assert any(e.message == case.message for e in at_path), errors
