"""Structural-schema handling for custom resources in localcluster.

The functions the request handlers call on the decoded body of a custom
resource, in the order kube-apiserver's apiextensions handler uses them:

1. :func:`prune` (``schema_prune``) drops fields the schema does not declare.
2. :func:`apply_defaults` (``schema_defaults``) fills ``default`` values.
3. :func:`validate_custom_resource` = :func:`validate` (``schema_validate``,
   OpenAPI v3 value validation) + the ``x-kubernetes-validations`` CEL rules
   (``cel``), with validation ratcheting on update (``schema_ratchet``).

:func:`crd_schema_causes` is used when a CRD is registered: the structural
check (``schema_structural``) and the CEL rule check together, as the causes
of a 422.

Errors come back as *causes*, the dicts Kubernetes puts into
``Status.details.causes`` (``reason``/``message``/``field``), built with the
shared :mod:`nimctl_runtime.field` helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from nimctl_runtime import field
from nimctl_runtime.field import (
    REASON_FORBIDDEN,
    REASON_INVALID,
    REASON_NOT_SUPPORTED,
    REASON_REQUIRED,
    REASON_TYPE_INVALID,
    Cause,
    cause_error_text,
    invalid_message,
)

from . import cel
from .schema_defaults import apply_defaults
from .schema_prune import prune
from .schema_ratchet import ratchet
from .schema_structural import check_structural
from .schema_validate import validate, validate_metadata

__all__ = [
    "Cause",
    "apply_defaults",
    "cause_error_text",
    "check_structural",
    "crd_schema_causes",
    "invalid_message",
    "prune",
    "ratchet",
    "unchanged_fields",
    "validate",
    "validate_custom_resource",
]


def validate_custom_resource(
    version_schema: Mapping[str, Any], obj: Mapping[str, Any], old: Mapping[str, Any] | None
) -> list[Cause]:
    """Structural validation + CEL rules for a whole custom resource.

    ``version_schema`` is the version's ``schema.openAPIV3Schema`` (a dict with
    an ``openAPIV3Schema`` key is accepted too). ``old`` is the stored object on
    update (enables ``oldSelf`` transition rules), None on create.
    """
    schema = version_schema.get("openAPIV3Schema", version_schema)
    if not isinstance(schema, dict):
        return []
    unchanged = unchanged_fields(obj, old)
    causes = validate(schema, obj, skip=unchanged)
    causes.extend(validate_metadata(schema, obj))
    if old is not None:
        causes = ratchet(schema, obj, old, causes)
    if any(c["reason"] in (REASON_TYPE_INVALID, REASON_NOT_SUPPORTED) for c in causes):
        # As kube-apiserver: CEL rules assume well-typed input, so they are
        # skipped (and the user told so) while type or enum errors remain.
        causes.append(
            field.invalid(
                "",
                None,
                "some validation rules were not checked because the object was invalid; "
                "correct the existing errors to complete validation",
            ).cause()
        )
        return causes
    rule_causes = cel.validate_rules(schema, obj, old, skip=unchanged)
    if old is not None:
        rule_causes = ratchet(schema, obj, old, rule_causes)
    causes.extend(rule_causes)
    return causes


def unchanged_fields(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> frozenset[str]:
    """The top-level fields but metadata that an update leaves exactly as stored.

    A status write leaves ``spec`` as it is. Ratcheting drops every cause about
    an unchanged value (schema errors and CEL rules alike), so validating those
    fields again only to drop what it finds is skipped. Exactly: the same JSON
    bytes (types included, 1 is not 1.0); what orjson cannot write is compared
    the long way, by validating it.
    """
    if old is None or not isinstance(obj, Mapping) or not isinstance(old, Mapping):
        return frozenset()
    same: set[str] = set()
    for key, value in obj.items():
        if key == "metadata" or key not in old or not isinstance(value, dict | list):
            continue
        try:
            if value == old[key] and orjson.dumps(value) == orjson.dumps(old[key]):
                same.add(key)
        except TypeError:
            continue
    return frozenset(same)


_REASON_BY_BODY = (
    ("Required value", REASON_REQUIRED),
    ("Forbidden", REASON_FORBIDDEN),
    ("Unsupported value", REASON_NOT_SUPPORTED),
    ("Invalid value", REASON_INVALID),
)


def crd_schema_causes(
    schema: Mapping[str, Any], *, root: str = "spec.validation.openAPIV3Schema"
) -> list[Cause]:
    """Structural and CEL problems of a CRD version's schema as 422 causes.

    ``root`` is the schema's path in the CRD, e.g.
    ``spec.versions[0].schema.openAPIV3Schema``; each cause's ``field`` is the
    offending node's path below it.
    """
    problems = check_structural(schema, root=root)
    if isinstance(schema, dict):
        problems.extend(cel.check_rules(schema, root=root))
    causes: list[Cause] = []
    for problem in problems:
        path, sep, body = problem.partition(": ")
        if not sep:
            path, body = root, problem
        reason = next((r for prefix, r in _REASON_BY_BODY if body.startswith(prefix)), "")
        causes.append({"reason": reason or REASON_INVALID, "message": body, "field": path})
    return causes
