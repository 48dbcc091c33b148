"""Kubernetes core types used inside our specs (EnvVar, ResourceRequirements,
Toleration, Affinity, Probe, IngressSpec, HPA metrics, ...), derived from the
OpenAPI definitions Kubernetes publishes, as shipped in the ``kubernetes-validate``
package, resolved against a chosen Kubernetes version.

Each API group embeds the core types of the Kubernetes version NVIDIA's CRDs for
it embed (:mod:`api.apps.v1alpha1.core_types`, :mod:`api.nvidia.core_types`):
:func:`core_type` names a definition at a version, and the same version serves
Python validation and the generated CRD.

Nothing here is hand-copied: each type is a plain ``dict`` (the shape the
runtime passes around) annotated with the name of its Kubernetes definition.
In Python the dict is validated with ``jsonschema`` against that definition
(unknown fields, wrong types and missing required fields are rejected, with the
path inside the object); in a generated CRD the same definition appears inlined
as a structural schema: ``$ref`` resolved, ``null`` dropped from types, and
Kubernetes' ``x-kubernetes-list-type``/``-list-map-keys``/``-map-type`` and
int-or-string markers kept, and the ``+default`` and ``+kubebuilder:validation``
markers of the Go types that the published JSON omits restored (as controller-gen
writes them).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from types import MappingProxyType
from typing import Any, Final

import jsonschema  # type: ignore[import-untyped]
import referencing
import referencing.jsonschema
from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from api.base import QUANTITY_PATTERN

__all__ = [
    "CORE_TYPES",
    "KUBERNETES_VERSIONS",
    "CoreType",
    "core_type",
    "definition",
    "structural_schema",
]

_V1: Final = "io.k8s.api.core.v1."
_META: Final = "io.k8s.apimachinery.pkg.apis.meta.v1."
_HPA: Final = "io.k8s.api.autoscaling.v2."
CORE_TYPES: Final = MappingProxyType(
    {
        "Affinity": _V1 + "Affinity",
        "Condition": _META + "Condition",
        "ConfigMapKeySelector": _V1 + "ConfigMapKeySelector",
        "Container": _V1 + "Container",
        "ContainerPort": _V1 + "ContainerPort",
        "EnvFromSource": _V1 + "EnvFromSource",
        "EnvVar": _V1 + "EnvVar",
        "HorizontalPodAutoscalerBehavior": _HPA + "HorizontalPodAutoscalerBehavior",
        "IngressSpec": "io.k8s.api.networking.v1.IngressSpec",
        "LabelSelector": _META + "LabelSelector",
        "LocalObjectReference": _V1 + "LocalObjectReference",
        "MetricSpec": _HPA + "MetricSpec",
        "NodeAffinity": _V1 + "NodeAffinity",
        "NodeSelector": _V1 + "NodeSelector",
        "ObjectMeta": _META + "ObjectMeta",
        "ObjectReference": _V1 + "ObjectReference",
        "PersistentVolumeClaimSpec": _V1 + "PersistentVolumeClaimSpec",
        "PodAffinity": _V1 + "PodAffinity",
        "PodSecurityContext": _V1 + "PodSecurityContext",
        "PodSpec": _V1 + "PodSpec",
        "Probe": _V1 + "Probe",
        "ResourceClaim": _V1 + "ResourceClaim",
        "ResourceRequirements": _V1 + "ResourceRequirements",
        "SecretKeySelector": _V1 + "SecretKeySelector",
        "SecurityContext": _V1 + "SecurityContext",
        "ServicePort": _V1 + "ServicePort",
        "Toleration": _V1 + "Toleration",
        "TopologySpreadConstraint": _V1 + "TopologySpreadConstraint",
        "Volume": _V1 + "Volume",
        "VolumeMount": _V1 + "VolumeMount",
    }
)
"""Short name -> Kubernetes definition name of every core type our APIs embed."""

_SCHEMA_ROOT: Final = "kubernetes-json-schema"
_INT_OR_STRING: Final = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_QUANTITY: Final = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_GO_DEFAULTS: Final = MappingProxyType(
    {
        # The published JSON definitions omit the ``+default`` markers of the Go
        # types; controller-gen writes them into a CRD (and a list-map key must be
        # required or defaulted there).
        ("io.k8s.api.core.v1.ContainerPort", "protocol"): "TCP",
        ("io.k8s.api.core.v1.ServicePort", "protocol"): "TCP",
        ("io.k8s.api.core.v1.FileKeySelector", "optional"): False,
        ("io.k8s.api.core.v1.GRPCAction", "service"): "",
    }
)
_META_CONDITION: Final = _META + "Condition"
_GO_MARKERS: Final = MappingProxyType(
    {
        # The ``+kubebuilder:validation`` markers of metav1.Condition, which the
        # published JSON omits and controller-gen writes into every CRD that
        # embeds it (NVIDIA's ``status.conditions[]``).
        (_META_CONDITION, "message"): {"maxLength": 32768},
        (_META_CONDITION, "observedGeneration"): {"minimum": 0},
        (_META_CONDITION, "reason"): {
            "maxLength": 1024,
            "minLength": 1,
            "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        },
        (_META_CONDITION, "status"): {"enum": ["True", "False", "Unknown"]},
        (_META_CONDITION, "type"): {
            "maxLength": 316,
            "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
            r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        },
    }
)
_EMPTY_NAME_DEFAULT: Final = "This field is effectively required, but due to backwards"
"""The description of ``LocalObjectReference.name`` (``+default=""`` in the Go
type), wherever that struct is embedded: ConfigMapKeySelector, SecretKeySelector,
ConfigMapEnvSource, the volume projections, ... controller-gen writes the default
into each; the published JSON drops it."""
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


def _shipped_versions() -> tuple[str, ...]:
    root = resources.files("kubernetes_validate").joinpath(_SCHEMA_ROOT)
    found = [
        entry.name.removesuffix("-local-strict")
        for entry in root.iterdir()
        if entry.name.endswith("-local-strict")
    ]
    return tuple(sorted(found, key=lambda v: tuple(int(p) for p in v[1:].split("."))))


KUBERNETES_VERSIONS: Final = _shipped_versions()
"""Every Kubernetes version whose definitions ``kubernetes-validate`` ships, oldest first."""


def _checked_version(version: str) -> str:
    if version not in KUBERNETES_VERSIONS:
        shipped = ", ".join(KUBERNETES_VERSIONS)
        raise ValueError(
            f"no Kubernetes definitions for {version!r}; the installed kubernetes-validate "
            f"ships {shipped}"
        )
    return version


@functools.cache
def _definitions(version: str) -> Mapping[str, Any]:
    """Read-only: every definition of one Kubernetes version (loaded once)."""
    text = (
        resources.files("kubernetes_validate")
        .joinpath(_SCHEMA_ROOT, f"{_checked_version(version)}-local-strict", "_definitions.json")
        .read_text(encoding="utf-8")
    )
    defs: dict[str, Any] = json.loads(text)["$defs"]
    # Kubernetes validates these two by pattern, not by JSON type alone.
    defs[_INT_OR_STRING] = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
    defs[_QUANTITY] = {
        "anyOf": [{"type": "integer"}, {"type": "string", "pattern": QUANTITY_PATTERN}]
    }
    return MappingProxyType(defs)


@functools.cache
def _registry(version: str) -> referencing.Registry[Any]:
    resource = referencing.jsonschema.DRAFT202012.create_resource(
        {"$defs": dict(_definitions(version))}
    )
    registry: referencing.Registry[Any] = referencing.Registry().with_resource("urn:k8s", resource)
    return registry


def definition(name: str, version: str) -> Mapping[str, Any]:
    """The raw published definition ``name`` (e.g. ``io.k8s.api.core.v1.EnvVar``) of
    Kubernetes ``version`` (e.g. ``v1.34.0``)."""
    defs = _definitions(version)
    if name not in defs:
        raise ValueError(f"Kubernetes {version} has no definition {name!r}")
    found: Mapping[str, Any] = defs[name]
    return found


def structural_schema(name: str, version: str) -> dict[str, Any]:
    """Definition ``name`` of Kubernetes ``version`` as a CRD structural schema
    (refs inlined, markers and the Go types' defaults kept)."""
    definition(name, version)
    out: dict[str, Any] = _structural({"$ref": f"#/$defs/{name}"}, (), _definitions(version))
    return out


def _structural(node: Any, stack: tuple[str, ...], defs: Mapping[str, Any]) -> Any:
    if isinstance(node, list):
        return [_structural(v, stack, defs) for v in node]
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
            out = _structural(defs[name], (*stack, name), defs)
            props = out.get("properties", {})
            for (owner, prop), default in _GO_DEFAULTS.items():
                if owner == name and prop in props:
                    props[prop]["default"] = default
            for (owner, prop), extra in _GO_MARKERS.items():
                if owner == name and prop in props:
                    props[prop].update(copy.deepcopy(extra))
            if _EMPTY_NAME_DEFAULT in str(props.get("name", {}).get("description", "")):
                props["name"].setdefault("default", "")
        for key, value in node.items():
            if key != "$ref" and key not in _DROPPED_KEYS:
                out[key] = _structural(value, stack, defs)
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
            out["properties"] = {k: _structural(v, stack, defs) for k, v in value.items()}
            continue
        out[key] = _structural(value, stack, defs)
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


_PY_TYPES: Final[Mapping[str, type | tuple[type, ...]]] = MappingProxyType(
    {"object": dict, "array": list, "string": str, "integer": int, "boolean": bool}
)
"""A definition's top-level JSON type as the Python type(s) a decoded value has."""


def _python_types(json_type: Any) -> tuple[type, ...] | None:
    """The Python types of a definition's ``type`` (a name or a list of names; None: any)."""
    names = [json_type] if isinstance(json_type, str) else json_type
    if not isinstance(names, list) or not names:
        return None
    out: list[type] = []
    for name in names:
        if name == "null":
            out.append(type(None))
            continue
        found = _PY_TYPES.get(name)
        if found is None:
            return None  # "number" and friends: walk the schema
        out.extend(found if isinstance(found, tuple) else (found,))
    return tuple(out)


@dataclass(frozen=True)
class CoreType:
    """Annotation marking a ``dict`` as the Kubernetes definition ``name`` of
    Kubernetes ``version``."""

    name: str
    version: str

    def __post_init__(self) -> None:
        definition(self.name, self.version)

    def _validator(self) -> jsonschema.protocols.Validator:
        schema = {"$ref": f"urn:k8s#/$defs/{self.name}"}
        cls = jsonschema.Draft202012Validator
        return cls(schema, registry=_registry(self.version))

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        validator = self._validator()
        short = self.name.rsplit(".", 1)[-1]
        top_type = _python_types(definition(self.name, self.version).get("type"))

        def check(value: Any, info: core_schema.ValidationInfo) -> Any:
            stored = info.context is not None and info.context.get("stored")
            if stored and top_type is not None and isinstance(value, top_type):
                # Read from the API server: the CRD's structural schema (this same
                # definition, inlined) was enforced when it was written, as its CEL
                # rules were (``api.base.STORED``). The walk is most of a NIMService's
                # parse; a value of the wrong JSON type still goes through it.
                return copy.deepcopy(value)
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

        return core_schema.with_info_plain_validator_function(
            check,
            serialization=core_schema.plain_serializer_function_ser_schema(lambda v: v),
        )

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = structural_schema(self.name, self.version)
        out["x-nimctl-core-type"] = self.name
        return out


def core_type(short: str, version: str) -> CoreType:
    """The annotation of core type ``short`` (a key of :data:`CORE_TYPES`, e.g.
    ``EnvVar``) at Kubernetes ``version``: ``Annotated[dict[str, Any], core_type(...)]``."""
    if short not in CORE_TYPES:
        raise ValueError(f"unknown core type {short!r}; known: {', '.join(CORE_TYPES)}")
    return CoreType(CORE_TYPES[short], version)
