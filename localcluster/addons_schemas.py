"""The parts of the Gateway API's published CRD schemas that NIMService's routes exercise.

``addons.py`` installs the ecosystem CRDs with schemas that accept any content; the
HTTPRoute and GRPCRoute CRDs get these instead, so a route the real CRD refuses is
refused here in the same words: hostnames (1-253 characters, lowercase DNS names,
an optional ``*.`` label, at most 16), parent references (a name), rules (at most
16), HTTP path matches (the ``Exact``/``PathPrefix``/``RegularExpression`` type and
the CEL rules on the value: absolute, no ``//``, ``/./``, ``/../``, ``%2f``,
``%2F`` or ``#``, no trailing ``/..`` or ``/.``) and backend references (a name,
ports 1-65535 and a port for a Service, weights 0-1000000). Every other field is
kept as sent. The markers are those of ``gateway.networking.k8s.io/v1``.
"""

from __future__ import annotations

from typing import Any

from nimctl_runtime.meta import Obj

HOSTNAME_PATTERN = r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_PATH_TYPES = ["Exact", "PathPrefix", "RegularExpression"]
_WHEN = "when type one of ['Exact', 'PathPrefix']"
_IF_PREFIX = "(self.type in ['Exact','PathPrefix']) ? "


def _open(properties: Obj, **more: Any) -> Obj:
    """An object schema with *properties* that keeps whatever else it is sent."""
    return {
        "type": "object",
        "properties": properties,
        "x-kubernetes-preserve-unknown-fields": True,
        **more,
    }


def _path_rules() -> list[Obj]:
    rules: list[Obj] = [
        {
            "message": f"value must be an absolute path and start with '/' {_WHEN}",
            "rule": f"{_IF_PREFIX}self.value.startsWith('/') : true",
        }
    ]
    for text in ("//", "/./", "/../", "%2f", "%2F", "#"):
        rules.append(
            {
                "message": f"must not contain '{text}' {_WHEN}",
                "rule": f"{_IF_PREFIX}!self.value.contains('{text}') : true",
            }
        )
    for text in ("/..", "/."):
        rules.append(
            {
                "message": f"must not end with '{text}' {_WHEN}",
                "rule": f"{_IF_PREFIX}!self.value.endsWith('{text}') : true",
            }
        )
    rules.append(
        {
            "message": "type must be one of ['Exact', 'PathPrefix', 'RegularExpression']",
            "rule": "self.type in ['Exact','PathPrefix'] || self.type == 'RegularExpression'",
        }
    )
    return rules


def _name() -> Obj:
    return {"type": "string", "minLength": 1, "maxLength": 253}


def _port() -> Obj:
    return {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535}


def _backend_ref() -> Obj:
    return _open(
        {
            "group": {"type": "string", "default": "", "maxLength": 253},
            "kind": {"type": "string", "default": "Service", "minLength": 1, "maxLength": 63},
            "name": _name(),
            "port": _port(),
            "weight": {
                "type": "integer",
                "format": "int32",
                "default": 1,
                "minimum": 0,
                "maximum": 1000000,
            },
        },
        required=["name"],
        **{
            "x-kubernetes-validations": [
                {
                    "message": "Must have port for Service reference",
                    "rule": (
                        "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true"
                    ),
                }
            ]
        },
    )


def route_schema(*, http: bool) -> Obj:
    """The openAPIV3Schema of an HTTPRoute (*http*) or a GRPCRoute."""
    rule: Obj = {
        "backendRefs": {"type": "array", "maxItems": 16, "items": _backend_ref()},
    }
    if http:
        path = _open(
            {
                "type": {"type": "string", "default": "PathPrefix", "enum": _PATH_TYPES},
                "value": {"type": "string", "default": "/", "maxLength": 1024},
            },
            **{"x-kubernetes-validations": _path_rules()},
        )
        rule["matches"] = {
            "type": "array",
            "maxItems": 64,
            "items": _open({"path": path}),
        }
    spec = _open(
        {
            "parentRefs": {
                "type": "array",
                "maxItems": 32,
                "items": _open({"name": _name(), "port": _port()}, required=["name"]),
            },
            "hostnames": {
                "type": "array",
                "maxItems": 16,
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 253,
                    "pattern": HOSTNAME_PATTERN,
                },
            },
            "rules": {"type": "array", "maxItems": 16, "items": _open(rule)},
        }
    )
    return _open({"spec": spec})
