"""Admission handlers: the raw handler protocol and validator/defaulter adapters.

Like controller-runtime's ``CustomValidator``/``CustomDefaulter``: a
:class:`Validator` answers create/update/delete with warnings or raises
:class:`~nimctl_runtime.field.ValidationFailed`; a :class:`Defaulter`
mutates a copy of the object and the server answers with the JSONPatch from the
original. Both are wrapped into :class:`Handler`, which the server calls.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

from nimctl_runtime.field import ValidationFailed
from nimctl_runtime.webhook.admission import (
    AdmissionRequest,
    AdmissionResponse,
    allowed,
    denied,
    errored,
    patched,
)


class Handler(Protocol):
    """Anything that answers an AdmissionRequest."""

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse: ...


class Validator(Protocol):
    """Validation per operation; return warnings, raise ValidationFailed to deny."""

    async def validate_create(self, obj: dict[str, Any]) -> list[str]: ...

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]: ...

    async def validate_delete(self, obj: dict[str, Any]) -> list[str]: ...


class Defaulter(Protocol):
    """Mutates *obj* in place to fill defaults."""

    async def default(self, obj: dict[str, Any]) -> None: ...


class ValidatingHandler:
    """Adapts a :class:`Validator` to :class:`Handler`."""

    def __init__(self, validator: Validator) -> None:
        self.validator = validator

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        try:
            if request.operation == "CREATE":
                if request.object is None:
                    return errored(400, "CREATE request carries no object")
                warnings = await self.validator.validate_create(request.object)
            elif request.operation == "UPDATE":
                if request.object is None or request.old_object is None:
                    return errored(400, "UPDATE request needs both object and oldObject")
                warnings = await self.validator.validate_update(request.old_object, request.object)
            elif request.operation == "DELETE":
                target = request.old_object or request.object
                if target is None:
                    return allowed()
                warnings = await self.validator.validate_delete(target)
            else:
                return allowed()
        except ValidationFailed as e:
            return denied(str(e)).with_warnings(e.warnings)
        return allowed().with_warnings(warnings)


class DefaultingHandler:
    """Adapts a :class:`Defaulter` to :class:`Handler` (CREATE and UPDATE only)."""

    def __init__(self, defaulter: Defaulter) -> None:
        self.defaulter = defaulter

    async def handle(self, request: AdmissionRequest) -> AdmissionResponse:
        if request.operation not in ("CREATE", "UPDATE"):
            return allowed()
        if request.object is None:
            return errored(400, f"{request.operation} request carries no object")
        mutated = copy.deepcopy(request.object)
        await self.defaulter.default(mutated)
        return patched(request.object, mutated)
