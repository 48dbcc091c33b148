"""Admission rules for NIMPipeline (NVIDIA ships no NIMPipeline webhook; nimctl adds one).

- A service whose ``enabled`` is omitted is not deployed (NVIDIA's operator
  treats unset as false): allowed, with a warning naming the service, because
  the manifest reads as if it would be deployed.
- An enabled service needs a name, and two enabled services cannot share one
  (they would be the same NIMService): denied, with the field path.

Paths start with ``nimpipeline.spec``. Each NIMService the pipeline creates
still goes through the NIMService webhook.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nimctl_runtime import field
from nimctl_runtime.field import FieldError, ValidationFailed

P = "nimpipeline.spec.services"

__all__ = ["NIMPipelineValidator", "check"]


def _entries(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    services = (obj.get("spec") or {}).get("services") or []
    return [s if isinstance(s, Mapping) else {} for s in services]


def enabled_omitted_warning(index: int, name: str) -> str:
    who = f" ({name})" if name else ""
    return (
        f"{P}[{index}].enabled{who}: not set, so this service is not deployed "
        "(as in NVIDIA's operator); set enabled: true to deploy it"
    )


def check(obj: Mapping[str, Any]) -> tuple[list[FieldError], list[str]]:
    """Errors and warnings for a NIMPipeline."""
    errs: list[FieldError] = []
    warnings: list[str] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(_entries(obj)):
        name = str(entry.get("name") or "")
        if entry.get("enabled") is None:
            warnings.append(enabled_omitted_warning(i, name))
        if entry.get("enabled") is not True:
            continue
        if not name:
            errs.append(field.required(f"{P}[{i}].name", "an enabled service needs a name"))
        elif name in seen:
            errs.append(field.duplicate(f"{P}[{i}].name", name))
        else:
            seen[name] = i
    return errs, warnings


class NIMPipelineValidator:
    """The NIMPipeline admission Validator."""

    async def validate_create(self, obj: dict[str, Any]) -> list[str]:
        errs, warnings = check(obj)
        if errs:
            raise ValidationFailed(errs, warnings=warnings)
        return warnings

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        return await self.validate_create(new)

    async def validate_delete(self, obj: dict[str, Any]) -> list[str]:
        return []
