"""Kubernetes' published type schemas of the built-in kinds, as localcluster reads them.

kubernetes-validate ships the v1.32 OpenAPI definitions (loaded once, lazily:
about 1.3 MB of JSON). They carry the ``x-kubernetes-patch-merge-key`` /
``x-kubernetes-patch-strategy`` annotations that drive strategic merge patch
(``patch``) and the list types server-side apply needs (``patch_apply``), and
the field sets unknown-field pruning of built-in kinds checks against
(``builtin_fields``). :func:`strategic_schema` gives one kind's schema with its
``$ref`` resolved at the top; :func:`resolve` follows the ``$ref`` of a nested
node.
"""

from __future__ import annotations

import functools
import json
from importlib import resources
from pathlib import Path
from typing import Any

KUBERNETES_SCHEMA_VERSION = "v1.32.0"


def _schema_file() -> Path:
    base = resources.files("kubernetes_validate") / "kubernetes-json-schema"
    return Path(str(base / f"{KUBERNETES_SCHEMA_VERSION}-local" / "_definitions.json"))


@functools.lru_cache(maxsize=1)
def _definitions() -> tuple[dict[str, Any], dict[tuple[str, str], str]]:
    """Kubernetes' definitions and an (apiVersion, kind) -> definition-name index."""
    with _schema_file().open(encoding="utf-8") as fh:
        data = json.load(fh)
    defs: dict[str, Any] = data.get("$defs") or data.get("definitions") or {}
    index: dict[tuple[str, str], str] = {}
    for name, definition in defs.items():
        for gvk in definition.get("x-kubernetes-group-version-kind") or []:
            group, version = gvk.get("group", ""), gvk.get("version", "")
            api_version = f"{group}/{version}" if group else version
            index.setdefault((api_version, gvk.get("kind", "")), name)
    return defs, index


def resolve(node: Any) -> dict[str, Any]:
    """Follow ``$ref`` (keeping the referring node's own annotations)."""
    if not isinstance(node, dict):
        return {}
    out = dict(node)
    if "$ref" not in out and "allOf" not in out:
        return out
    defs, _ = _definitions()
    seen = 0
    while isinstance(out.get("$ref"), str) and seen < 32:
        ref = out.pop("$ref")
        target = defs.get(ref.rsplit("/", 1)[-1], {})
        merged = dict(target)
        merged.update(out)
        out = merged
        seen += 1
    for junctor in ("allOf",):
        subs = out.get(junctor)
        if isinstance(subs, list) and len(subs) == 1 and isinstance(subs[0], dict):
            merged = resolve(subs[0])
            merged.update({k: v for k, v in out.items() if k != junctor})
            out = merged
    return out


def _kind_key(kind_key: Any) -> tuple[str, str] | None:
    if isinstance(kind_key, tuple) and len(kind_key) == 2:
        return str(kind_key[0]), str(kind_key[1])
    if isinstance(kind_key, tuple) and len(kind_key) == 3:
        group, version, kind = (str(x) for x in kind_key)
        return (f"{group}/{version}" if group else version), kind
    if isinstance(kind_key, str):
        if ", Kind=" in kind_key:
            api_version, kind = kind_key.split(", Kind=", 1)
            return api_version, kind
        if "/" in kind_key:
            api_version, kind = kind_key.rsplit("/", 1)
            return api_version, kind
    return None


def strategic_schema(kind_key: Any) -> dict[str, Any] | None:
    """The resolved v1.32 schema of a built-in kind, or None.

    ``kind_key`` is ``(apiVersion, kind)``, ``(group, version, kind)``,
    ``"apps/v1/Deployment"``, ``"apps/v1, Kind=Deployment"`` or a definition
    name such as ``"io.k8s.api.apps.v1.Deployment"``.
    """
    defs, index = _definitions()
    if isinstance(kind_key, str) and kind_key in defs:
        return resolve(defs[kind_key])
    key = _kind_key(kind_key)
    if key is None or key not in index:
        return None
    return resolve(defs[index[key]])


def warm_up() -> None:
    """Load Kubernetes' schemas now (about 1.3 MB of JSON); call it off the event
    loop at start-up, e.g. ``await asyncio.to_thread(patch.warm_up)``."""
    _definitions()


def has_strategic_schema(api_version: str, kind: str) -> bool:
    """True for built-in kinds (strategic merge patch is not allowed on CRs)."""
    return strategic_schema((api_version, kind)) is not None
