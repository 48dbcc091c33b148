"""CustomResourceDefinitions: validate them, serve their resources, report status.

``CRDController`` listens to storage events for customresourcedefinitions. A
created or updated CRD is turned into one ``ResourceInfo`` per served version
in the registry at once (so discovery and routing see it within the same loop
turn) and its status gets ``NamesAccepted``/``Established`` conditions. A
deleted CRD is removed from the registry and its objects are dropped.
Conversion between versions is ``None`` strategy: only ``apiVersion`` changes.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

from nimctl_runtime import field
from nimctl_runtime.logsetup import get_logger

from . import cel, errors
from .registry import Registry, ResourceInfo, ScaleSpec
from .schema_structural import check_structural
from .storage import Storage
from .strategy import now_rfc3339
from .watchcache import ADDED, DELETED, MODIFIED, StoredEvent

CRD_GROUP = "apiextensions.k8s.io"
CRD_RESOURCE = "customresourcedefinitions"
_DNS_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")

log = get_logger(__name__)


def validate_crd(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[dict[str, str]]:
    """The checks kube-apiserver makes on a CRD that clients most often trip over."""
    causes: list[dict[str, str]] = []
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return [field.required("spec").cause()]
    group = str(spec.get("group", ""))
    names = spec.get("names") if isinstance(spec.get("names"), Mapping) else {}
    assert isinstance(names, Mapping)
    plural = str(names.get("plural", ""))
    kind = str(names.get("kind", ""))
    if not group:
        causes.append(field.required("spec.group").cause())
    elif "." not in group:
        causes.append(
            field.invalid("spec.group", group, "should be a domain with at least one dot").cause()
        )
    if not plural:
        causes.append(field.required("spec.names.plural").cause())
    elif not _DNS_LABEL.match(plural):
        causes.append(
            field.invalid(
                "spec.names.plural",
                plural,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                "or '-'",
            ).cause()
        )
    if not kind:
        causes.append(field.required("spec.names.kind").cause())
    name = str((obj.get("metadata") or {}).get("name", ""))
    if plural and group and name != f"{plural}.{group}":
        causes.append(
            field.invalid("metadata.name", name, 'must be spec.names.plural+"."+spec.group').cause()
        )
    scope = spec.get("scope")
    if scope not in ("Namespaced", "Cluster"):
        causes.append(field.not_supported("spec.scope", scope, ["Cluster", "Namespaced"]).cause())
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        causes.append(
            field.invalid(
                "spec.versions",
                field.OMIT,
                "must have exactly one version marked as storage version",
            ).cause()
        )
        return causes
    storage_count = sum(1 for v in versions if isinstance(v, Mapping) and v.get("storage"))
    if storage_count != 1:
        causes.append(
            field.invalid(
                "spec.versions",
                field.OMIT,
                "must have exactly one version marked as storage version",
            ).cause()
        )
    for i, v in enumerate(versions):
        if not isinstance(v, Mapping):
            continue
        path = f"spec.versions[{i}]"
        schema = (
            (v.get("schema") or {}).get("openAPIV3Schema")
            if isinstance(v.get("schema"), Mapping)
            else None
        )
        if not isinstance(schema, Mapping):
            causes.append(
                field.required(f"{path}.schema.openAPIV3Schema", "schemas are required").cause()
            )
            continue
        root = f"{path}.schema.openAPIV3Schema"
        for problem in [*check_structural(schema, root=root), *cel.check_rules(schema, root=root)]:
            causes.append({"reason": field.REASON_INVALID, "message": problem, "field": root})
    return causes


def infos_from_crd(crd: Mapping[str, Any]) -> list[ResourceInfo]:
    """One ResourceInfo per served version of *crd*."""
    spec = crd["spec"]
    names = spec["names"]
    group = spec["group"]
    versions = [v for v in spec.get("versions") or [] if isinstance(v, Mapping)]
    storage_version = next((v["name"] for v in versions if v.get("storage")), versions[0]["name"])
    out: list[ResourceInfo] = []
    for v in versions:
        if not v.get("served", True):
            continue
        subs = v.get("subresources") or {}
        subresources = frozenset(k for k in ("status", "scale") if k in subs)
        scale = None
        if "scale" in subs:
            sc = subs["scale"] or {}
            scale = ScaleSpec(
                spec_replicas_path=sc.get("specReplicasPath", ".spec.replicas"),
                status_replicas_path=sc.get("statusReplicasPath", ".status.replicas"),
                label_selector_path=sc.get("labelSelectorPath"),
            )
        schema = (v.get("schema") or {}).get("openAPIV3Schema")
        preserve = bool(spec.get("preserveUnknownFields")) or bool(
            isinstance(schema, Mapping) and schema.get("x-kubernetes-preserve-unknown-fields")
        )
        selectable = tuple(
            str(f.get("jsonPath", "")).lstrip(".")
            for f in v.get("selectableFields") or []
            if isinstance(f, Mapping)
        )
        out.append(
            ResourceInfo(
                group=group,
                version=v["name"],
                resource=names["plural"],
                kind=names["kind"],
                namespaced=spec.get("scope") == "Namespaced",
                singular=names.get("singular") or names["kind"].lower(),
                short_names=tuple(names.get("shortNames") or ()),
                categories=tuple(names.get("categories") or ()),
                subresources=subresources,
                field_labels=selectable,
                scale=scale,
                crd=True,
                storage_version=storage_version,
                schema=schema if isinstance(schema, Mapping) else None,
                printer_columns=tuple(v.get("additionalPrinterColumns") or ()),
                preserve_unknown_fields=preserve,
                selectable_fields=selectable,
            )
        )
    return out


class CRDController:
    """Keeps the registry in step with stored CRDs and writes their status."""

    def __init__(self, storage: Storage, registry: Registry) -> None:
        self.storage = storage
        self.registry = registry
        self._unsubscribe = storage.subscribe(self._on_event)
        self._served: dict[str, tuple[str, str]] = {}

    def close(self) -> None:
        self._unsubscribe()

    def validate(self, obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> None:
        causes = validate_crd(obj, old)
        if causes:
            name = str((obj.get("metadata") or {}).get("name", ""))
            raise errors.invalid(CRD_GROUP, "CustomResourceDefinition", name, causes)

    def _on_event(self, ev: StoredEvent) -> None:
        if ev.group != CRD_GROUP or ev.resource != CRD_RESOURCE:
            return
        crd = ev.object
        name = ev.name
        if ev.type == DELETED:
            gr = self._served.pop(name, None)
            if gr is not None:
                self.registry.remove_group_resource(*gr)
                asyncio.get_running_loop().call_soon(self._drop, gr)
            return
        if ev.type not in (ADDED, MODIFIED):
            return
        try:
            infos = infos_from_crd(crd)
        except (KeyError, TypeError, IndexError, StopIteration) as exc:
            log.warning("crd not servable", name=name, error=str(exc))
            return
        gr_new = (crd["spec"]["group"], crd["spec"]["names"]["plural"])
        old = self._served.get(name)
        if old is not None:
            self.registry.remove_group_resource(*old)
        for info in infos:
            self.registry.add(info)
        self._served[name] = gr_new
        if not _is_established(crd):
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                self._establish(name)
                return
            loop.call_soon(self._establish, name)

    def _drop(self, gr: tuple[str, str]) -> None:
        if gr not in self._served.values():
            self.storage.drop_resource(*gr)

    def _establish(self, name: str) -> None:
        info = self.storage.info_for(CRD_GROUP, CRD_RESOURCE)
        if info is None:
            return
        try:
            crd = self.storage.read_object(info, "", name)
        except errors.StatusError:
            return
        if _is_established(crd):
            return
        spec = crd.get("spec") or {}
        names = dict(spec.get("names") or {})
        names.setdefault("singular", str(names.get("kind", "")).lower())
        names.setdefault("listKind", f"{names.get('kind', '')}List")
        now = now_rfc3339()
        status = dict(crd.get("status") or {})
        status["acceptedNames"] = names
        status["conditions"] = [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "NoConflicts",
                "message": "no conflicts found",
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted",
            },
        ]
        stored = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
        status["storedVersions"] = sorted(set(status.get("storedVersions") or []) | set(stored))
        crd["status"] = status
        try:
            self.storage.update_object(info, crd, subresource="status")
        except errors.StatusError as exc:
            log.warning("crd status update failed", name=name, error=exc.message)


def _is_established(crd: Mapping[str, Any]) -> bool:
    status = crd.get("status") or {}
    accepted = status.get("acceptedNames") or {}
    names = (crd.get("spec") or {}).get("names") or {}
    if accepted.get("plural") != names.get("plural") or accepted.get("kind") != names.get("kind"):
        return False
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
