"""Discovery documents built from the Registry: /version, /api, /apis, APIResourceLists
and the aggregated discovery (apidiscovery.k8s.io/v2) that kubectl asks for first.

The reported Kubernetes version is per cluster (``--kubernetes-version``); it
defaults to the newest minor whose published schemas kubernetes-validate ships,
and is at least 1.34 (DRA's resource.k8s.io/v1).

Everything is recomputed from the registry on request, so CRDs appear and
disappear as soon as the registry changes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import re
from pathlib import Path
from typing import Any

from .registry import Registry, ResourceInfo

OLDEST_MINOR = 26  # the oldest Kubernetes minor NVIDIA's operators still support
_VERSION = re.compile(r"^v?1\.(\d+)(?:\.(\d+))?$")


@functools.cache
def newest_schema_minor() -> int:
    """The newest Kubernetes minor whose schemas kubernetes-validate ships (at least 34)."""
    minors = [34]
    with contextlib.suppress(ImportError, OSError):
        import kubernetes_validate

        base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
        for entry in base.iterdir():
            match = re.match(r"^v1\.(\d+)\.0-local$", entry.name)
            if match:
                minors.append(int(match.group(1)))
    return max(minors)


def default_kubernetes_version() -> str:
    """What localcluster reports unless told otherwise: the newest minor we have schemas for."""
    return f"1.{newest_schema_minor()}.0"


def parse_kubernetes_version(text: str) -> str:
    """``1.34``, ``v1.35.2`` -> ``1.34.0``, ``1.35.2``; a clear ValueError otherwise."""
    match = _VERSION.match(text.strip())
    newest = newest_schema_minor()
    if match is None or not OLDEST_MINOR <= int(match.group(1)) <= newest:
        raise ValueError(
            f"{text!r} is not a Kubernetes version localcluster can report: give one such as "
            f"1.34 or v1.35.2, from 1.{OLDEST_MINOR} to 1.{newest}"
        )
    return f"1.{int(match.group(1))}.{int(match.group(2) or 0)}"


def version_info(version: str | None = None) -> dict[str, str]:
    """The ``/version`` document of a kube-apiserver at *version* (default: the newest)."""
    full = parse_kubernetes_version(version) if version else default_kubernetes_version()
    minor = full.split(".")[1]
    return {
        "major": "1",
        "minor": minor,
        "emulationMajor": "1",
        "emulationMinor": minor,
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": str(int(minor) - 1),
        "gitVersion": f"v{full}-nimctl",
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24.4",
        "compiler": "gc",
        "platform": "linux/amd64",
    }


AGGREGATED_V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
AGGREGATED_V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"

_SUBRESOURCE_VERBS = {
    "status": ["get", "patch", "update"],
    "scale": ["get", "patch", "update"],
    "log": ["get"],
    "binding": ["create"],
    "eviction": ["create"],
    "token": ["create"],
    "proxy": ["create", "delete", "get", "patch", "update"],
}


def _storage_hash(info: ResourceInfo) -> str:
    digest = hashlib.sha256(f"{info.group}/{info.storage_version}/{info.kind}".encode()).digest()
    import base64

    return base64.b64encode(digest[:8]).decode()


def _subresource_kind(info: ResourceInfo, sub: str) -> tuple[str, str, str]:
    if sub == "scale":
        return ("autoscaling", "v1", "Scale")
    if sub == "binding":
        return ("", "v1", "Binding")
    if sub == "eviction":
        return ("policy", "v1", "Eviction")
    if sub == "token":
        return ("authentication.k8s.io", "v1", "TokenRequest")
    return (info.group, info.version, info.kind)


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
        ],
    }


def _group_versions(group: str, versions: list[str]) -> dict[str, Any]:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group_versions(g, vs) for g, vs in registry.groups() if g],
    }


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    for g, vs in registry.groups():
        if g == group and g:
            return {"kind": "APIGroup", "apiVersion": "v1", **_group_versions(g, vs)}
    return None


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    infos = registry.resources(group, version)
    if not infos:
        return None
    resources: list[dict[str, Any]] = []
    for info in infos:
        entry: dict[str, Any] = {
            "name": info.resource,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": list(info.verbs),
            "storageVersionHash": _storage_hash(info),
        }
        if info.short_names:
            entry["shortNames"] = list(info.short_names)
        if info.categories:
            entry["categories"] = list(info.categories)
        resources.append(entry)
        for sub in sorted(info.subresources):
            g, v, k = _subresource_kind(info, sub)
            sub_entry: dict[str, Any] = {
                "name": f"{info.resource}/{sub}",
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": k,
                "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
            }
            if (g, v) != (info.group, info.version):
                sub_entry["group"] = g
                sub_entry["version"] = v
            resources.append(sub_entry)
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def _discovery_resource(info: ResourceInfo) -> dict[str, Any]:
    out: dict[str, Any] = {
        "resource": info.resource,
        "responseKind": {"group": info.group, "version": info.version, "kind": info.kind},
        "scope": "Namespaced" if info.namespaced else "Cluster",
        "singularResource": info.singular,
        "verbs": list(info.verbs),
    }
    if info.short_names:
        out["shortNames"] = list(info.short_names)
    if info.categories:
        out["categories"] = list(info.categories)
    subs = []
    for sub in sorted(info.subresources):
        g, v, k = _subresource_kind(info, sub)
        subs.append(
            {
                "subresource": sub,
                "responseKind": {"group": g, "version": v, "kind": k},
                "verbs": _SUBRESOURCE_VERBS.get(sub, ["get"]),
            }
        )
    if subs:
        out["subresources"] = subs
    return out


def aggregated_discovery(registry: Registry, *, legacy: bool, api_version: str) -> dict[str, Any]:
    """APIGroupDiscoveryList for /api (*legacy*) or /apis."""
    items: list[dict[str, Any]] = []
    for group, versions in registry.groups():
        if bool(group) == legacy:
            continue
        items.append(
            {
                "metadata": {"name": group, "creationTimestamp": None},
                "versions": [
                    {
                        "version": v,
                        "resources": [_discovery_resource(i) for i in registry.resources(group, v)],
                        "freshness": "Current",
                    }
                    for v in versions
                ],
            }
        )
    return {
        "kind": "APIGroupDiscoveryList",
        "apiVersion": api_version,
        "metadata": {},
        "items": items,
    }
