"""kube-apiserver's validation of an Ingress (networking.k8s.io/v1), in its words.

Rules or a default backend; rule and TLS hosts (DNS subdomains, ``*.`` wildcards,
never IP addresses); paths per ``pathType`` (absolute, no ``//``, ``/./``,
``/../`` or encoded slashes, no trailing ``/.`` or ``/..``); backends (a service
or a resource, a service port by name or number); TLS secret names and
``ingressClassName``. The Ingress NIMService renders is refused as on a real cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nimctl_runtime.meta import ObjView

from .validation_field import DNS1123_SUBDOMAIN, Errors, as_dict, as_list

PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")


def _spec(obj: ObjView | None) -> Mapping[str, Any]:
    return as_dict((obj or {}).get("spec"))


def ingress(obj: ObjView, old: ObjView | None, errs: Errors) -> None:
    spec = _spec(obj)
    rules = as_list(spec.get("rules"))
    default = spec.get("defaultBackend")
    if not rules and default is None:
        errs.invalid("spec", dict(spec), "either `defaultBackend` or `rules` must be specified")
    if default is not None:
        _ingress_backend(as_dict(default), "spec.defaultBackend", errs)
    for i, raw in enumerate(rules):
        rule, where = as_dict(raw), f"spec.rules[{i}]"
        host = rule.get("host")
        if isinstance(host, str) and host:
            if _is_ip(host):
                errs.invalid(f"{where}.host", host, "must be a DNS name, not an IP address")
            _ingress_host(errs, f"{where}.host", host)
        http = rule.get("http")
        if http is None:
            continue
        paths = as_list(as_dict(http).get("paths"))
        if not paths:
            errs.required(f"{where}.http.paths")
        for j, raw_path in enumerate(paths):
            entry, at = as_dict(raw_path), f"{where}.http.paths[{j}]"
            path_type = entry.get("pathType")
            if path_type is None:
                errs.required(f"{at}.pathType", "pathType must be specified")
            elif path_type not in PATH_TYPES:
                errs.not_supported(f"{at}.pathType", path_type, PATH_TYPES)
            _ingress_path(errs, f"{at}.path", path_type, str(entry.get("path") or ""))
            _ingress_backend(as_dict(entry.get("backend")), f"{at}.backend", errs)
    for i, raw in enumerate(as_list(spec.get("tls"))):
        tls = as_dict(raw)
        for j, host in enumerate(as_list(tls.get("hosts"))):
            _ingress_host(errs, f"spec.tls[{i}].hosts[{j}]", str(host))
        if tls.get("secretName"):
            errs.dns_subdomain(f"spec.tls[{i}].secretName", str(tls["secretName"]))
    class_name = spec.get("ingressClassName")
    if isinstance(class_name, str):
        errs.dns_subdomain("spec.ingressClassName", class_name)


_WILDCARD_FMT = "\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_WILDCARD_MESSAGE = (
    "a wildcard DNS-1123 subdomain must start with '*.', followed by a valid DNS subdomain, "
    "which must consist of lower case alphanumeric characters, '-' or '.' and end with an "
    f"alphanumeric character (e.g. '*.example.com', regex used for validation is '{_WILDCARD_FMT}')"
)


def _is_ip(text: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _ingress_host(errs: Errors, path: str, host: str) -> None:
    """A host of a rule or TLS entry: a DNS subdomain, or ``*.`` and one."""
    if "*" not in host:
        errs.dns_subdomain(path, host)
        return
    if len(host) > 253:
        errs.invalid(path, host, "must be no more than 253 characters")
    if not (host.startswith("*.") and DNS1123_SUBDOMAIN.match(host[2:])):
        errs.invalid(path, host, _WILDCARD_MESSAGE)


def _ingress_path(errs: Errors, path: str, path_type: Any, value: str) -> None:
    if path_type in ("Exact", "Prefix"):
        if not value.startswith("/"):
            errs.invalid(path, value, "must be an absolute path")
        for sequence in ("//", "/./", "/../", "%2f", "%2F"):
            if value and sequence in value:
                errs.invalid(path, value, f"must not contain '{sequence}'")
        for suffix in ("/..", "/."):
            if value.endswith(suffix):
                errs.invalid(path, value, f"cannot end with '{suffix}'")
    elif path_type == "ImplementationSpecific" and value and not value.startswith("/"):
        errs.invalid(path, value, "must be an absolute path")


def _ingress_backend(backend: Mapping[str, Any], path: str, errs: Errors) -> None:
    service_ref, resource = backend.get("service"), backend.get("resource")
    if service_ref is not None and resource is not None:
        errs.invalid(path, "", "cannot set both resource and service backends")
        return
    if service_ref is None and resource is None:
        errs.invalid(path, "", "resource or service backend is required")
        return
    if service_ref is None:
        return
    svc = as_dict(service_ref)
    name = svc.get("name")
    if not name:
        errs.required(f"{path}.service.name")
    else:
        errs.dns_label(f"{path}.service.name", str(name))
    port = as_dict(svc.get("port"))
    if port.get("name") and port.get("number"):
        errs.invalid(path, "", "cannot set both port name & port number")
    elif port.get("name"):
        errs.port_name(f"{path}.service.port.name", str(port["name"]))
    elif port.get("number"):
        errs.port_number(f"{path}.service.port.number", port["number"])
    else:
        errs.required(path, "port name or number is required")
