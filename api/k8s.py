"""Kubernetes core types used inside our specs (EnvVar, ResourceRequirements,
Toleration, Affinity, Probe, IngressSpec, HPA metrics, ...), derived from the
OpenAPI definitions Kubernetes publishes, as shipped in the ``kubernetes-validate``
package and pinned to one Kubernetes version (:data:`KUBERNETES_VERSION`).

Nothing here is hand-copied: each type is a plain ``dict`` (the shape the
runtime passes around) annotated with the name of its Kubernetes definition.
In Python the dict is validated with ``jsonschema`` against that definition
(unknown fields, wrong types and missing required fields are rejected, with the
path inside the object); in a generated CRD the same definition appears inlined
as a structural schema: ``$ref`` resolved, ``null`` dropped from types, and
Kubernetes' ``x-kubernetes-list-type``/``-list-map-keys``/``-map-type`` and
int-or-string markers kept.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Annotated, Any, Final

import jsonschema  # type: ignore[import-untyped]
import referencing
import referencing.jsonschema
from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from api.base import QUANTITY_PATTERN

__all__ = [
    "CORE_TYPES",
    "KUBERNETES_VERSION",
    "Affinity",
    "Condition",
    "ConfigMapKeySelector",
    "Container",
    "ContainerPort",
    "CoreType",
    "DeviceRequest",
    "EnvFromSource",
    "EnvVar",
    "HorizontalPodAutoscalerBehavior",
    "IngressSpec",
    "LabelSelector",
    "LocalObjectReference",
    "MetricSpec",
    "NodeSelector",
    "ObjectMetaDict",
    "ObjectReference",
    "PersistentVolumeClaimSpec",
    "PodAffinity",
    "PodSecurityContext",
    "PodSpec",
    "Probe",
    "ResourceClaim",
    "ResourceClaimTemplateSpec",
    "ResourceRequirements",
    "SecretKeySelector",
    "SecurityContext",
    "ServicePort",
    "Toleration",
    "TopologySpreadConstraint",
    "Volume",
    "VolumeMount",
    "definition",
    "structural_schema",
]

KUBERNETES_VERSION: Final = "v1.32.0"
_SCHEMA_DIR: Final = f"kubernetes-json-schema/{KUBERNETES_VERSION}-local-strict"
_INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_LIST_MAP_KEY_DEFAULTS: Final = MappingProxyType(
    {
        # The published JSON definitions omit defaults. A list-map key must be required
        # or defaulted in a CRD (apiextensions validation), and these keys are
        # defaulted by Kubernetes' ``+default`` markers; nothing else is added.
        ("io.k8s.api.core.v1.ContainerPort", "protocol"): "TCP",
        ("io.k8s.api.core.v1.ServicePort", "protocol"): "TCP",
        ("io.k8s.api.core.v1.LocalObjectReference", "name"): "",
    }
)
_DROPPED_KEYS: Final = frozenset(
    {
        "x-kubernetes-patch-strategy",
        "x-kubernetes-patch-merge-key",
        "x-kubernetes-unions",
        "x-kubernetes-group-version-kind",
        "additionalProperties",
        "$schema",
        "$id",
    }
)


def _load_definitions() -> Mapping[str, Any]:
    text = (
        resources.files("kubernetes_validate")
        .joinpath(_SCHEMA_DIR, "_definitions.json")
        .read_text(encoding="utf-8")
    )
    defs: dict[str, Any] = json.loads(text)["$defs"]
    # Kubernetes validates these two by pattern, not by JSON type alone.
    defs[_INT_OR_STRING] = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    defs[_QUANTITY] = {
        "anyOf": [{"type": "integer"}, {"type": "string", "pattern": QUANTITY_PATTERN}]
    }
    return MappingProxyType(defs)


_DEFINITIONS: Final = _load_definitions()
"""Read-only: every definition of the pinned Kubernetes version."""

_REGISTRY: Final = referencing.Registry().with_resource(
    "urn:k8s", referencing.jsonschema.DRAFT202012.create_resource({"$defs": dict(_DEFINITIONS)})
)


def definition(name: str) -> Mapping[str, Any]:
    """The raw published definition ``name`` (e.g. ``io.k8s.api.core.v1.EnvVar``)."""
    found: Mapping[str, Any] = _DEFINITIONS[name]
    return found


def structural_schema(name: str) -> dict[str, Any]:
    """Definition ``name`` as a CRD structural schema (refs inlined, markers kept)."""
    out: dict[str, Any] = _structural({"$ref": f"#/$defs/{name}"}, ())
    return out


def _structural(node: Any, stack: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_structural(v, stack) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        if name in stack:
            raise ValueError(f"recursive Kubernetes type {name} cannot be inlined in a CRD")
        if name == _INT_OR_STRING:
            out: dict[str, Any] = {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "x-kubernetes-int-or-string": True,
            }
        elif name == _QUANTITY:
            out = {
                "anyOf": [{"type": "integer"}, {"type": "string"}],
                "pattern": QUANTITY_PATTERN,
                "x-kubernetes-int-or-string": True,
            }
        else:
            out = _structural(_DEFINITIONS[name], (*stack, name))
            for (owner, prop), default in _LIST_MAP_KEY_DEFAULTS.items():
                if owner == name and prop in out.get("properties", {}):
                    out["properties"][prop]["default"] = default
        for key, value in node.items():
            if key != "$ref" and key not in _DROPPED_KEYS:
                out[key] = _structural(value, stack)
        return out
    out = {}
    for key, value in node.items():
        if key in _DROPPED_KEYS and not (key == "additionalProperties" and isinstance(value, dict)):
            continue
        if key == "type":
            types = [t for t in (value if isinstance(value, list) else [value]) if t != "null"]
            if len(types) == 1:
                out["type"] = types[0]
            continue
        if key == "enum":
            out["enum"] = [v for v in value if v is not None]
            continue
        if key == "properties":
            out["properties"] = {k: _structural(v, stack) for k, v in value.items()}
            continue
        out[key] = _structural(value, stack)
    free_form = "properties" not in out and "additionalProperties" not in out
    if out.get("type") == "object" and free_form:
        # A free-form object (RawExtension, FieldsV1): keep what the user wrote.
        out["x-kubernetes-preserve-unknown-fields"] = True
    return out


def _format_path(parts: Any) -> str:
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _describe(error: Any) -> tuple[str, str]:
    """(path inside the object, Kubernetes-style message) of a jsonschema error."""
    parts = list(error.absolute_path)
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return _format_path([*parts, missing] if missing else parts), "Required value"
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = error.schema.get("properties", {})
        unknown = sorted(k for k in error.instance if k not in allowed)
        if unknown:
            return _format_path([*parts, unknown[0]]), "unknown field"
    if error.validator == "enum":
        supported = ", ".join(json.dumps(v) for v in error.validator_value if v is not None)
        bad = json.dumps(error.instance)
        return _format_path(parts), f"Unsupported value: {bad}: supported values: {supported}"
    if error.validator == "type":
        wanted = error.validator_value
        names = [t for t in (wanted if isinstance(wanted, list) else [wanted]) if t != "null"]
        return _format_path(parts), f"must be of type {' or '.join(names)}"
    if error.validator == "pattern":
        bad = json.dumps(error.instance)
        if error.validator_value == QUANTITY_PATTERN:
            return _format_path(parts), f"Invalid value: {bad}: not a quantity (e.g. 500m, 2, 10Gi)"
        return _format_path(parts), f"Invalid value: {bad}: should match '{error.validator_value}'"
    return _format_path(parts), str(error.message)


@dataclass(frozen=True)
class CoreType:
    """Annotation marking a ``dict`` as the Kubernetes definition ``name``."""

    name: str

    def _validator(self) -> jsonschema.protocols.Validator:
        schema = {"$ref": f"urn:k8s#/$defs/{self.name}"}
        cls = jsonschema.Draft202012Validator
        return cls(schema, registry=_REGISTRY)

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        validator = self._validator()
        short = self.name.rsplit(".", 1)[-1]

        def check(value: Any) -> Any:
            errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
            if errors:
                best = jsonschema.exceptions.best_match(errors)
                assert best is not None
                where, detail = _describe(best)
                prefix = f"{where}: " if where else ""
                raise PydanticCustomError(
                    "kubernetes_schema",
                    "{prefix}{detail}",
                    {"type": short, "where": where, "detail": detail, "prefix": prefix},
                )
            return copy.deepcopy(value)

        return core_schema.no_info_plain_validator_function(
            check,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda v: v),
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = structural_schema(self.name)
        out["x-nimctl-core-type"] = self.name
        return out


_V1 = "io.k8s.api.core.v1."
_META = "io.k8s.apimachinery.pkg.apis.meta.v1."
_HPA = "io.k8s.api.autoscaling.v2."
EnvVar = Annotated[dict[str, Any], CoreType(_V1 + "EnvVar")]
EnvFromSource = Annotated[dict[str, Any], CoreType(_V1 + "EnvFromSource")]
ResourceRequirements = Annotated[dict[str, Any], CoreType(_V1 + "ResourceRequirements")]
ResourceClaim = Annotated[dict[str, Any], CoreType(_V1 + "ResourceClaim")]
Toleration = Annotated[dict[str, Any], CoreType(_V1 + "Toleration")]
Affinity = Annotated[dict[str, Any], CoreType(_V1 + "Affinity")]
PodAffinity = Annotated[dict[str, Any], CoreType(_V1 + "PodAffinity")]
Probe = Annotated[dict[str, Any], CoreType(_V1 + "Probe")]
PodSecurityContext = Annotated[dict[str, Any], CoreType(_V1 + "PodSecurityContext")]
SecurityContext = Annotated[dict[str, Any], CoreType(_V1 + "SecurityContext")]
Volume = Annotated[dict[str, Any], CoreType(_V1 + "Volume")]
VolumeMount = Annotated[dict[str, Any], CoreType(_V1 + "VolumeMount")]
Container = Annotated[dict[str, Any], CoreType(_V1 + "Container")]
ContainerPort = Annotated[dict[str, Any], CoreType(_V1 + "ContainerPort")]
ServicePort = Annotated[dict[str, Any], CoreType(_V1 + "ServicePort")]
ConfigMapKeySelector = Annotated[dict[str, Any], CoreType(_V1 + "ConfigMapKeySelector")]
SecretKeySelector = Annotated[dict[str, Any], CoreType(_V1 + "SecretKeySelector")]
LocalObjectReference = Annotated[dict[str, Any], CoreType(_V1 + "LocalObjectReference")]
IngressSpec = Annotated[dict[str, Any], CoreType("io.k8s.api.networking.v1.IngressSpec")]
MetricSpec = Annotated[dict[str, Any], CoreType(_HPA + "MetricSpec")]
HorizontalPodAutoscalerBehavior = Annotated[
    dict[str, Any], CoreType(_HPA + "HorizontalPodAutoscalerBehavior")
]
LabelSelector = Annotated[dict[str, Any], CoreType(_META + "LabelSelector")]
Condition = Annotated[dict[str, Any], CoreType(_META + "Condition")]
ObjectMetaDict = Annotated[dict[str, Any], CoreType(_META + "ObjectMeta")]
ObjectReference = Annotated[dict[str, Any], CoreType(_V1 + "ObjectReference")]
NodeSelector = Annotated[dict[str, Any], CoreType(_V1 + "NodeSelector")]
TopologySpreadConstraint = Annotated[dict[str, Any], CoreType(_V1 + "TopologySpreadConstraint")]
PersistentVolumeClaimSpec = Annotated[dict[str, Any], CoreType(_V1 + "PersistentVolumeClaimSpec")]
PodSpec = Annotated[dict[str, Any], CoreType(_V1 + "PodSpec")]
ResourceClaimTemplateSpec = Annotated[
    dict[str, Any], CoreType("io.k8s.api.resource.v1beta1.ResourceClaimTemplateSpec")
]
DeviceRequest = Annotated[dict[str, Any], CoreType("io.k8s.api.resource.v1beta1.DeviceRequest")]

CORE_TYPES: Final = MappingProxyType(
    {
        name: value.__metadata__[0].name
        for name, value in dict(globals()).items()
        if getattr(value, "__metadata__", None) and isinstance(value.__metadata__[0], CoreType)
    }
)
"""Python alias -> Kubernetes definition name of every core type above."""
