"""Resource request handlers of localcluster: get, list, create, update, patch,
delete, deletecollection, status/scale subresources and pod logs.

Each handler is thin: decode and check the request, run the admission chain
(mutating plugins, then for custom resources pruning/defaulting and structural
+ CEL validation, then validating plugins), and call the storage engine.
Watches are served by ``watch.py``; routing, authentication and error
rendering live in ``server.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from aiohttp import web

from nimctl_runtime import field
from nimctl_runtime.labels import FieldSelector, Selector, SelectorParseError

from . import (
    builtin_fields,
    conversion,
    defaults,
    errors,
    reviews,
    tables,
    validation_builtin,
    validation_field,
)
from . import patch as patch_ops
from .codec import (
    APPLY_PATCH,
    JSON_PATCH,
    MAX_BODY,
    MERGE_PATCH,
    STRATEGIC_PATCH,
    bytes_response,
    decode_body,
    decode_continue,
    encode_continue,
    json_response,
    media_type,
    partial_metadata,
    wants_metadata_only,
    wants_table,
)
from .errors import StatusError
from .hooks import CREATED_NAME_KEY, AdmissionAttributes, Operation, RequestInfo
from .host import APIServerHost
from .registry import ResourceInfo
from .schema import apply_defaults, prune, validate_custom_resource
from .storage import Storage
from .store import Entry, encode
from .watchcache import StoredEvent

# decode_body and json_response are re-exported for authz, which imports them from here.
__all__ = [
    "RequestContext",
    "ResourceHandlers",
    "check_namespace_and_name",
    "check_type_meta",
    "decode_body",
    "json_response",
]

from nimctl_runtime.meta import Obj

_Warnings = list[str]  # (a method named ``list`` hides the builtin in the class body)


@dataclass
class RequestContext:
    """Per-request state: who asks, what they asked for, warnings to send back."""

    info: RequestInfo
    resource: ResourceInfo
    request: web.Request
    warnings: list[str] = dataclass_field(default_factory=list)
    convert: bool = False  # served as events.k8s.io/v1, stored as core/v1

    @property
    def field_selector_text(self) -> str | None:
        text = self.request.query.get("fieldSelector")
        return conversion.field_selector_to_core(text) if self.convert and text else text

    @property
    def query(self) -> Mapping[str, str]:
        return self.request.query

    @property
    def dry_run(self) -> bool:
        return "All" in self.request.query.getall("dryRun", [])

    @property
    def field_manager(self) -> str:
        return self.request.query.get("fieldManager", "")


def check_type_meta(ctx: RequestContext, obj: Any) -> Obj:
    """The body must be an object of the URL's kind and apiVersion (defaults filled in)."""
    info = ctx.resource
    if not isinstance(obj, dict):
        raise errors.bad_request(
            f"the body of the request must be a {info.kind} object, not {type(obj).__name__}"
        )
    av = obj.get("apiVersion")
    kind = obj.get("kind")
    if av is None:
        obj["apiVersion"] = info.api_version
    elif av != info.api_version:
        raise errors.bad_request(
            f"the API version in the data ({av}) does not match the expected API version "
            f"({info.api_version})"
        )
    if kind is None:
        obj["kind"] = info.kind
    elif kind != info.kind:
        raise errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind ({info.kind})"
        )
    meta = obj.get("metadata")
    if meta is None:
        obj["metadata"] = {}
    elif not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    else:
        _check_meta_strings(info.kind, info.version, meta)
    return obj


_META_STRINGS = ("name", "generateName", "namespace", "uid", "resourceVersion")


def _check_meta_strings(kind: str, version: str, meta: Obj) -> None:
    """ObjectMeta's string fields must be strings (Go's decoder refuses anything else: 400)."""
    for key in _META_STRINGS:
        value = meta.get(key)
        if value is None or isinstance(value, str):
            continue
        go_type = "object"
        if isinstance(value, bool):
            go_type = "bool"
        elif isinstance(value, int | float):
            go_type = "number"
        elif isinstance(value, list):
            go_type = "array"
        raise errors.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: json: cannot '
            f"unmarshal {go_type} into Go struct field ObjectMeta.metadata.{key} of type string"
        )


def check_namespace_and_name(ctx: RequestContext, obj: Obj) -> None:
    meta = obj["metadata"]
    ns = ctx.info.namespace
    if ctx.resource.namespaced:
        body_ns = meta.get("namespace")
        if body_ns and ns and body_ns != ns:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on "
                "the request"
            )
        if ns:
            meta["namespace"] = ns
    if ctx.info.name and meta.get("name") and meta["name"] != ctx.info.name:
        raise errors.bad_request(
            f"the name of the object ({meta['name']}) does not match the name on the URL "
            f"({ctx.info.name})"
        )
    if ctx.info.name and not meta.get("name"):
        meta["name"] = ctx.info.name


class ResourceHandlers:
    """The verbs on resources, bound to the cluster that serves them."""

    def __init__(self, cluster: APIServerHost) -> None:
        self.cluster = cluster
        self.pruner = builtin_fields.BuiltinPruner()

    @property
    def storage(self) -> Storage:
        return self.cluster.storage

    # ------------------------------------------------------------------ helpers

    def _versioned(self, info: ResourceInfo, obj: Obj) -> Obj:
        if info.group and obj.get("apiVersion") != info.api_version:
            obj["apiVersion"] = info.api_version
        return obj

    def _selectors(self, ctx: RequestContext) -> tuple[Selector, FieldSelector]:
        try:
            lsel = Selector.parse(ctx.query.get("labelSelector"))
            fsel = FieldSelector.parse(ctx.field_selector_text)
        except SelectorParseError as exc:
            raise errors.bad_request(f"unable to parse requirement: {exc}") from exc
        allowed = {"metadata.name", "metadata.namespace", *ctx.resource.field_labels}
        for f in fsel.fields():
            if f not in allowed:
                raise errors.bad_request(
                    f"field label not supported: {f}"
                    if not ctx.resource.crd
                    else f'"{f}" is not a known field selector: only "metadata.name", '
                    '"metadata.namespace"'
                )
        return lsel, fsel

    async def _admit(
        self,
        ctx: RequestContext,
        operation: Operation,
        obj: Obj | None,
        old: Obj | None,
        subresource: str = "",
    ) -> Obj | None:
        """Mutating plugins, CR schema handling, validating plugins; returns the object."""
        info = ctx.resource
        meta = (obj or old or {}).get("metadata") or {}
        attrs = AdmissionAttributes(
            operation=operation,
            group=info.group,
            version=info.version,
            resource=info.resource,
            subresource=subresource,
            kind=info.kind,
            namespace=str(meta.get("namespace", "") or ctx.info.namespace),
            name=str(meta.get("name", "") or ctx.info.name),
            user=ctx.info.user,
            groups=ctx.info.groups,
            dry_run=ctx.dry_run,
        )
        plugins = list(self.cluster.admission_plugins)
        if obj is not None and info.crd and operation != "DELETE":
            self._prune_and_default(ctx, obj, report=True)
        elif obj is not None and operation != "DELETE":
            self._prune_builtin(ctx, obj, report=True)
        mutated = False
        decode_again = False  # a mutation not known to keep the object's Go types
        for plugin in plugins:
            new, warnings = await plugin.mutate(attrs, obj, old)
            ctx.warnings.extend(warnings)
            if new is not None and obj is not None:
                obj = new
                mutated = True
                decode_again = decode_again or not getattr(plugin, "typed_mutations", False)
        if obj is not None and operation != "DELETE":
            if info.crd:
                if mutated:
                    self._prune_and_default(ctx, obj, report=False)
                self._validate_custom(ctx, obj, old)
            else:
                if decode_again:
                    self._prune_builtin(ctx, obj, report=False)
                elif mutated:
                    defaults.apply_builtin_defaults(info.group, info.resource, obj)
                if info.group == "apiextensions.k8s.io" and subresource == "":
                    self.cluster.crds.validate(obj, old)
                if subresource == "":
                    validation_builtin.check(info.group, info.kind, obj, old)
        for plugin in plugins:
            ctx.warnings.extend(await plugin.validate(attrs, obj, old))
        if subresource == "" and operation != "DELETE":
            ctx.warnings.extend(validation_field.finalizer_warnings(obj, old))
        return obj

    def _prune_builtin(self, ctx: RequestContext, obj: Obj, *, report: bool) -> None:
        info = ctx.resource
        if info.group_resource in reviews.REVIEW_RESOURCES:
            return
        pruned = self.pruner.prune((info.api_version, info.kind), obj)
        if pruned and report:
            self._report_unknown(ctx, pruned)
        defaults.apply_builtin_defaults(info.group, info.resource, obj)

    def _report_unknown(self, ctx: RequestContext, pruned: list[str]) -> None:
        info = ctx.resource
        mode = ctx.query.get("fieldValidation", "Warn")
        names = [p.lstrip(".") for p in pruned]
        if mode == "Strict":
            detail = ", ".join(f'unknown field "{n}"' for n in names)
            raise errors.bad_request(
                f'{info.kind} in version "{info.version}" cannot be handled as a '
                f"{info.kind}: strict decoding error: {detail}"
            )
        if mode != "Ignore":
            ctx.warnings.extend(f'unknown field "{n}"' for n in names)

    def _prune_and_default(self, ctx: RequestContext, obj: Obj, *, report: bool) -> None:
        """Decoding of a custom resource: drop undeclared fields, fill defaults.

        Unknown fields are reported (``fieldValidation`` Strict: 400, Warn: a
        warning, Ignore: silently) only for what the client sent (*report*).
        """
        info = ctx.resource
        schema = info.schema
        if not schema:
            return
        if not info.preserve_unknown_fields:
            pruned = prune(schema, obj)
            if pruned and report:
                self._report_unknown(ctx, pruned)
        apply_defaults(schema, obj)

    def _validate_custom(self, ctx: RequestContext, obj: Obj, old: Obj | None) -> None:
        info = ctx.resource
        schema = info.schema
        if not schema:
            return
        causes = validate_custom_resource(schema, obj, old)
        if causes:
            name = str(obj.get("metadata", {}).get("name", ""))
            raise errors.invalid(info.group, info.kind, name, causes)

    def _schema_hint(self, info: ResourceInfo) -> Any:
        return info.schema if info.crd else (info.api_version, info.kind)

    def _track(self, ctx: RequestContext, old: Obj | None, new: Obj, subresource: str = "") -> Obj:
        manager = ctx.field_manager
        if not manager:
            return new
        return patch_ops.track_update(
            old,
            new,
            field_manager=manager,
            schema_hint=self._schema_hint(ctx.resource),
            subresource=subresource,
        )

    async def _body(self, ctx: RequestContext) -> Any:
        req = ctx.request
        if req.content_length is not None and req.content_length > MAX_BODY:
            raise errors.request_entity_too_large()
        raw = await req.content.read(MAX_BODY + 1)
        while len(raw) <= MAX_BODY and not req.content.at_eof():
            chunk = await req.content.read(MAX_BODY + 1 - len(raw))
            if not chunk:
                break
            raw += chunk
        if len(raw) > MAX_BODY:
            raise errors.request_entity_too_large()
        body = decode_body(raw, req.headers.get("Content-Type", ""))
        if ctx.convert and isinstance(body, dict) and body.get("kind") == "Event":
            if body.get("apiVersion") not in (None, "events.k8s.io/v1"):
                raise errors.bad_request(
                    f"the API version in the data ({body.get('apiVersion')}) does not match "
                    "the expected API version (events.k8s.io/v1)"
                )
            body = conversion.to_core(body)
        return body

    # ------------------------------------------------------------------ reads

    async def get(self, ctx: RequestContext) -> web.StreamResponse:
        info = ctx.resource
        obj = self._versioned(
            info, self.storage.read_object(info, ctx.info.namespace, ctx.info.name)
        )
        if ctx.info.subresource == "scale":
            return json_response(self._scale_of(info, obj))
        if wants_metadata_only(ctx.request):
            return json_response(partial_metadata(obj))
        if wants_table(ctx.request):
            cols = tables.columns_for(info.group, info.resource, info.printer_columns, info.crd)
            return json_response(
                tables.build_table(
                    [obj],
                    cols,
                    include_object=ctx.query.get("includeObject", "Metadata"),
                    resource_version=obj["metadata"].get("resourceVersion", ""),
                )
            )
        return json_response(obj)

    def _list_rv_check(self, ctx: RequestContext) -> None:
        rv = ctx.query.get("resourceVersion", "")
        match = ctx.query.get("resourceVersionMatch", "")
        if match and match not in ("Exact", "NotOlderThan"):
            raise errors.bad_request(
                f'resourceVersionMatch: Unsupported value: "{match}": supported values: '
                '"Exact", "NotOlderThan"'
            )
        if match and not rv:
            raise errors.bad_request(
                "resourceVersionMatch is forbidden unless resourceVersion is provided"
            )
        if not rv or rv == "0":
            return
        try:
            want = int(rv)
        except ValueError as exc:
            raise errors.bad_request(f'invalid resource version "{rv}"') from exc
        current = self.storage.resource_version
        if want > current:
            raise StatusError(
                504,
                "Timeout",
                f"Too large resource version: {want}, current: {current}",
                {
                    "causes": [
                        {
                            "reason": "ResourceVersionTooLarge",
                            "message": "Too large resource version",
                        }
                    ]
                },
                retry_after=1,
            )
        if match == "Exact" and want != current:
            raise errors.gone(f"too old resource version: {want} ({current})")

    async def list(self, ctx: RequestContext) -> web.StreamResponse:
        info = ctx.resource
        lsel, fsel = self._selectors(ctx)
        self._list_rv_check(ctx)
        try:
            limit = int(ctx.query.get("limit", "0") or 0)
        except ValueError as exc:
            raise errors.bad_request("limit must be an integer") from exc
        start_after: tuple[str, str] | None = None
        rv = self.storage.resource_version
        token = ctx.query.get("continue")
        if token:
            rv, start_after = decode_continue(token)
        entries, last, remaining = self.storage.list_entries(
            info,
            ctx.info.namespace or None,
            lsel,
            fsel,
            start_after=start_after,
            limit=max(limit, 0),
        )
        cont = encode_continue(rv, last) if last is not None else ""
        if wants_table(ctx.request):
            objs = [self._versioned(info, e.decode()) for e in entries]
            cols = tables.columns_for(info.group, info.resource, info.printer_columns, info.crd)
            return json_response(
                tables.build_table(
                    objs,
                    cols,
                    include_object=ctx.query.get("includeObject", "Metadata"),
                    resource_version=str(rv),
                    continue_token=cont,
                    remaining=remaining if not (lsel.requirements or fsel.requirements) else None,
                )
            )
        meta: Obj = {"resourceVersion": str(rv)}
        if cont:
            meta["continue"] = cont
            if not lsel.requirements and not fsel.requirements:
                meta["remainingItemCount"] = remaining
        if wants_metadata_only(ctx.request):
            return json_response(
                {
                    "kind": "PartialObjectMetadataList",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": meta,
                    "items": [partial_metadata(e.decode()) for e in entries],
                }
            )
        head = (
            b'{"kind":"'
            + info.list_kind.encode()
            + b'","apiVersion":"'
            + info.api_version.encode()
            + b'","metadata":'
            + encode(meta)
            + b',"items":['
        )
        body = head + b",".join(self._item_bytes(info, e) for e in entries) + b"]}"
        return bytes_response(body)

    def _written(
        self, info: ResourceInfo, obj: Obj, status: int, warnings: _Warnings
    ) -> web.Response:
        """The response to a write: the bytes just stored when *obj* is what was stored
        (encoded once, not twice), else *obj* encoded as served."""
        if not (info.crd and info.version != info.storage_version):
            data = self.storage.stored_bytes(obj)
            if data is not None:
                return bytes_response(data, status, warnings)
        return json_response(self._versioned(info, obj), status, warnings)

    def _item_bytes(self, info: ResourceInfo, entry: Entry) -> bytes:
        if info.crd and info.version != info.storage_version:
            return encode(self._versioned(info, entry.decode()))
        return entry.data

    # ------------------------------------------------------------------ writes

    async def create(self, ctx: RequestContext) -> web.StreamResponse:
        info = ctx.resource
        if ctx.info.subresource:
            raise errors.method_not_allowed()
        obj = check_type_meta(ctx, await self._body(ctx))
        if info.group_resource in reviews.REVIEW_RESOURCES:
            return json_response(reviews.answer(ctx.info, info.resource, obj), 201)
        check_namespace_and_name(ctx, obj)
        if obj["metadata"].get("resourceVersion"):
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        if info.namespaced and not obj["metadata"].get("namespace"):
            raise errors.bad_request("the namespace of the object must be set")
        obj = self._track(ctx, None, obj)
        admitted = await self._admit(ctx, "CREATE", obj, None)
        assert admitted is not None
        created = self.storage.create_object(info, admitted, dry_run=ctx.dry_run)
        ctx.request[CREATED_NAME_KEY] = str(created["metadata"].get("name", ""))
        return self._written(info, created, 201, ctx.warnings)

    async def update(self, ctx: RequestContext) -> web.StreamResponse:
        info = ctx.resource
        sub = ctx.info.subresource
        body = await self._body(ctx)
        if sub == "scale":
            return await self._update_scale(ctx, body)
        if sub not in ("", "status") or (sub == "status" and not info.has_status):
            raise errors.not_found(info.group, f"{info.resource}/{sub}", ctx.info.name)
        obj = check_type_meta(ctx, body)
        check_namespace_and_name(ctx, obj)
        old = self.storage.read_object(info, ctx.info.namespace, ctx.info.name)
        if info.crd and not obj["metadata"].get("resourceVersion"):
            raise errors.invalid(
                info.group,
                info.kind,
                ctx.info.name,
                [
                    {  # Go prints the uint64 0 it checked as %#v: 0x0
                        "reason": field.REASON_INVALID,
                        "message": "Invalid value: 0x0: must be specified for an update",
                        "field": "metadata.resourceVersion",
                    }
                ],
            )
        obj = self._track(ctx, old, obj, sub)
        admitted = await self._admit(ctx, "UPDATE", obj, old, sub)
        assert admitted is not None
        updated = self.storage.update_object(info, admitted, subresource=sub, dry_run=ctx.dry_run)
        return self._written(info, updated, 200, ctx.warnings)

    async def patch(self, ctx: RequestContext) -> web.StreamResponse:
        info = ctx.resource
        sub = ctx.info.subresource
        if sub not in ("", "status", "scale") or (sub == "status" and not info.has_status):
            raise errors.not_found(info.group, f"{info.resource}/{sub}", ctx.info.name)
        ctype = media_type(ctx.request.headers.get("Content-Type"))
        allowed = [JSON_PATCH, MERGE_PATCH, APPLY_PATCH]
        if not info.crd:
            allowed.insert(2, STRATEGIC_PATCH)
        if ctype not in allowed:
            raise errors.unsupported_media_type(allowed)
        body = await self._body(ctx)
        if ctype == APPLY_PATCH:
            return await self._apply(ctx, body)
        for _attempt in range(8):
            current = self._versioned(
                info, self.storage.read_object(info, ctx.info.namespace, ctx.info.name)
            )
            base = self._scale_of(info, current) if sub == "scale" else current
            if ctx.convert:
                base = conversion.from_core(current)
            try:
                if ctype == JSON_PATCH:
                    patched = patch_ops.json_patch(base, body)
                elif ctype == MERGE_PATCH:
                    if not isinstance(body, dict):
                        raise errors.bad_request("a merge patch must be a JSON object")
                    patched = patch_ops.merge_patch(base, body)
                else:
                    kind_key = (
                        ("autoscaling/v1", "Scale")
                        if sub == "scale"
                        else (
                            info.api_version,
                            info.kind,
                        )
                    )
                    patched = patch_ops.strategic_merge_patch(base, body, kind_key)
            except patch_ops.PatchError as exc:
                if exc.status == 400:
                    raise errors.bad_request(str(exc)) from exc
                raise StatusError(422, "Invalid", str(exc)) from exc
            if not isinstance(patched, dict):
                raise errors.bad_request("the patch did not produce an object")
            if ctx.convert:
                patched = conversion.to_core(patched)
            if sub == "scale":
                return await self._write_scale(ctx, current, patched)
            patched_meta = patched.get("metadata")
            if not isinstance(patched_meta, dict):
                raise errors.bad_request("metadata must be an object")
            rv_given = _patch_sets_rv(body, ctype)
            if not rv_given:
                patched_meta["resourceVersion"] = current["metadata"].get("resourceVersion")
            patched_meta["name"] = current["metadata"]["name"]
            if info.namespaced:
                patched_meta["namespace"] = current["metadata"].get("namespace")
            patched = check_type_meta(ctx, patched)
            patched = self._track(ctx, current, patched, sub)
            try:
                admitted = await self._admit(ctx, "UPDATE", patched, current, sub)
                assert admitted is not None
                updated = self.storage.update_object(
                    info, admitted, subresource=sub, dry_run=ctx.dry_run
                )
            except StatusError as exc:
                if exc.reason == "Conflict" and not rv_given:
                    continue
                raise
            return self._written(info, updated, 200, ctx.warnings)
        raise errors.conflict(
            info.group, info.resource, ctx.info.name, "too many concurrent modifications"
        )

    async def _apply(self, ctx: RequestContext, body: Any) -> web.StreamResponse:
        info = ctx.resource
        sub = ctx.info.subresource
        if sub == "scale":
            raise errors.unsupported_media_type([JSON_PATCH, MERGE_PATCH])
        manager = ctx.field_manager
        if not manager:
            raise errors.bad_request(
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is '
                "required for apply patch"
            )
        applied = check_type_meta(ctx, body)
        check_namespace_and_name(ctx, applied)
        force = ctx.query.get("force", "false").lower() == "true"
        for _attempt in range(8):
            entry = self.storage.get_entry(info, ctx.info.namespace, ctx.info.name)
            current = self._versioned(info, entry.decode()) if entry is not None else None
            try:
                result = patch_ops.apply(
                    current,
                    applied,
                    field_manager=manager,
                    force=force,
                    schema_hint=self._schema_hint(info),
                    subresource=sub,
                )
            except patch_ops.ApplyConflict as exc:
                raise StatusError(409, "Conflict", exc.message, {"causes": exc.causes}) from exc
            except ValueError as exc:
                raise errors.bad_request(str(exc)) from exc
            result = check_type_meta(ctx, result)
            if current is None:
                if sub:
                    raise errors.not_found(info.group, info.resource, ctx.info.name)
                admitted = await self._admit(ctx, "CREATE", result, None)
                assert admitted is not None
                created = self.storage.create_object(info, admitted, dry_run=ctx.dry_run)
                return self._written(info, created, 201, ctx.warnings)
            result["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            try:
                admitted = await self._admit(ctx, "UPDATE", result, current, sub)
                assert admitted is not None
                updated = self.storage.update_object(
                    info, admitted, subresource=sub, dry_run=ctx.dry_run
                )
            except StatusError as exc:
                if exc.reason == "Conflict":
                    continue
                raise
            return self._written(info, updated, 200, ctx.warnings)
        raise errors.conflict(
            info.group, info.resource, ctx.info.name, "too many concurrent modifications"
        )

    # ------------------------------------------------------------------ scale

    def _scale_of(self, info: ResourceInfo, obj: Obj) -> Obj:
        if info.scale is None:
            raise errors.not_found(info.group, f"{info.resource}/scale", obj["metadata"]["name"])
        meta = obj["metadata"]
        spec_replicas = tables.jsonpath(obj, info.scale.spec_replicas_path)
        status_replicas = tables.jsonpath(obj, info.scale.status_replicas_path)
        selector = ""
        if info.scale.label_selector_path:
            sel = tables.jsonpath(obj, info.scale.label_selector_path)
            if isinstance(sel, str):
                selector = sel
        if not selector and not info.crd:
            spec_sel = (obj.get("spec") or {}).get("selector")
            if isinstance(spec_sel, dict):
                try:
                    selector = str(Selector.from_label_selector(spec_sel))
                except SelectorParseError:
                    selector = ""
        scale: Obj = {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {
                k: meta[k]
                for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                if k in meta
            },
            "spec": {"replicas": int(spec_replicas or 0)},
            "status": {"replicas": int(status_replicas or 0)},
        }
        if selector:
            scale["status"]["selector"] = selector
        return scale

    async def _update_scale(self, ctx: RequestContext, body: Any) -> web.StreamResponse:
        info = ctx.resource
        if not isinstance(body, dict) or body.get("kind") not in (None, "Scale"):
            raise errors.bad_request("the body of a scale request must be a Scale object")
        current = self._versioned(
            info, self.storage.read_object(info, ctx.info.namespace, ctx.info.name)
        )
        return await self._write_scale(ctx, current, body)

    async def _write_scale(
        self, ctx: RequestContext, current: Obj, scale: Obj
    ) -> web.StreamResponse:
        info = ctx.resource
        assert info.scale is not None
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise errors.invalid(
                "autoscaling",
                "Scale",
                ctx.info.name,
                [
                    field.invalid(
                        "spec.replicas", replicas, "must be greater than or equal to 0"
                    ).cause()
                ],
            )
        rv = (scale.get("metadata") or {}).get("resourceVersion")
        new = copy.deepcopy(current)
        if rv:
            new["metadata"]["resourceVersion"] = rv
        _set_path(new, info.scale.spec_replicas_path, replicas)
        admitted = await self._admit(ctx, "UPDATE", new, current, "scale")
        assert admitted is not None
        updated = self.storage.update_object(info, admitted, dry_run=ctx.dry_run)
        return json_response(
            self._scale_of(info, self._versioned(info, updated)), 200, ctx.warnings
        )

    # ------------------------------------------------------------------ delete

    async def _delete_options(self, ctx: RequestContext) -> Obj:
        opts: Obj = {}
        req = ctx.request
        if req.can_read_body:
            raw = await req.content.read(MAX_BODY + 1)
            if len(raw) > MAX_BODY:
                raise errors.request_entity_too_large()
            if raw.strip():
                body = decode_body(raw, req.headers.get("Content-Type", ""))
                if not isinstance(body, dict):
                    raise errors.bad_request("DeleteOptions must be an object")
                opts.update(body)
        q = ctx.query
        if "propagationPolicy" in q:
            opts["propagationPolicy"] = q["propagationPolicy"]
        if "gracePeriodSeconds" in q:
            opts["gracePeriodSeconds"] = q["gracePeriodSeconds"]
        if "orphanDependents" in q:
            opts["orphanDependents"] = q["orphanDependents"] == "true"
        if opts.get("orphanDependents") is True and not opts.get("propagationPolicy"):
            opts["propagationPolicy"] = "Orphan"
        if "All" in (opts.get("dryRun") or []):
            opts["_dry_run"] = True
        return opts

    async def delete(self, ctx: RequestContext) -> web.StreamResponse:
        if ctx.info.subresource:
            raise errors.method_not_allowed()
        opts = await self._delete_options(ctx)
        obj = await self._delete_one(ctx, ctx.info.namespace, ctx.info.name, opts)
        return json_response(obj, 200, ctx.warnings)

    async def _delete_one(self, ctx: RequestContext, namespace: str, name: str, opts: Obj) -> Obj:
        info = ctx.resource
        current = self.storage.read_object(info, namespace, name)
        await self._admit(ctx, "DELETE", None, current)
        deleted = self.storage.delete_object(
            info,
            namespace,
            name,
            propagation_policy=opts.get("propagationPolicy"),
            preconditions=opts.get("preconditions"),
            dry_run=ctx.dry_run or bool(opts.get("_dry_run")),
            grace_period_seconds=opts.get("gracePeriodSeconds"),
        )
        return self._versioned(info, deleted)

    async def delete_collection(self, ctx: RequestContext) -> web.StreamResponse:
        info = ctx.resource
        lsel, fsel = self._selectors(ctx)
        opts = await self._delete_options(ctx)
        entries, _, _ = self.storage.list_entries(info, ctx.info.namespace or None, lsel, fsel)
        items = []
        for e in entries:
            try:
                items.append(await self._delete_one(ctx, e.namespace, e.name, opts))
            except StatusError as exc:
                if exc.code != 404:
                    raise
        return json_response(
            {
                "kind": info.list_kind,
                "apiVersion": info.api_version,
                "metadata": {"resourceVersion": str(self.storage.resource_version)},
                "items": items,
            },
            200,
            ctx.warnings,
        )

    # ------------------------------------------------------------------ logs

    async def pod_log(self, ctx: RequestContext) -> web.StreamResponse:
        pod = self.storage.read_object(ctx.resource, ctx.info.namespace, ctx.info.name)
        containers = [
            str(c.get("name", ""))
            for c in ((pod.get("spec") or {}).get("containers") or [])
            + ((pod.get("spec") or {}).get("initContainers") or [])
        ]
        main = [str(c.get("name", "")) for c in (pod.get("spec") or {}).get("containers") or []]
        container = ctx.query.get("container", "")
        if not container:
            if len(main) != 1:
                raise errors.bad_request(
                    f"a container name must be specified for pod {ctx.info.name}, choose one "
                    f"of: [{' '.join(main)}]"
                )
            container = main[0]
        elif container not in containers:
            raise errors.bad_request(f"container {container} is not valid for pod {ctx.info.name}")
        text = await self._log_text(ctx.info.namespace, ctx.info.name, container)
        tail = ctx.query.get("tailLines")
        if tail:
            try:
                n = int(tail)
            except ValueError as exc:
                raise errors.bad_request("tailLines must be an integer") from exc
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-n:]) if n > 0 else ""
        if ctx.query.get("follow", "").lower() in ("true", "1"):
            return await follow_log(self, ctx, container, text)
        return web.Response(text=text, content_type="text/plain")

    async def _log_text(self, namespace: str, name: str, container: str) -> str:
        provider: Callable[[str, str, str], str | Awaitable[str]] | None = (
            self.cluster.pod_log_provider
        )
        if provider is None:
            return ""
        out = provider(namespace, name, container)
        return await out if inspect.isawaitable(out) else out


LOG_REFRESH_SECONDS = 1.0


def _container_done(pod: Mapping[str, Any], container: str) -> bool:
    phase = str((pod.get("status") or {}).get("phase") or "")
    if phase not in ("Succeeded", "Failed"):
        return False
    status = pod.get("status") or {}
    statuses = [
        *(status.get("containerStatuses") or []),
        *(status.get("initContainerStatuses") or []),
    ]
    for st in statuses:
        if st.get("name") == container:
            return "terminated" in (st.get("state") or {})
    return True


async def follow_log(
    h: ResourceHandlers, ctx: RequestContext, container: str, first: str
) -> web.StreamResponse:
    """``kubectl logs -f``: what was printed so far, then each new line as the simulated
    container prints it, until the container ends, the pod goes or the client hangs up.

    Woken by every change to the pod (the simulated output follows the pod's state),
    and re-read at least every second for output that follows simulated time.
    """
    namespace, name = ctx.info.namespace, ctx.info.name
    response = web.StreamResponse(headers={"Content-Type": "text/plain"})
    await response.prepare(ctx.request)
    sent = await h._log_text(namespace, name, container)
    await response.write(first.encode())
    changed = asyncio.Event()

    def on_event(ev: StoredEvent) -> None:
        if ev.resource == "pods" and not ev.group and ev.namespace == namespace and ev.name == name:
            changed.set()

    unsubscribe = h.storage.subscribe(on_event)
    try:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), LOG_REFRESH_SECONDS)
            changed.clear()
            try:
                pod: Obj | None = h.storage.get("v1", "Pod", name, namespace)
            except StatusError:
                pod = None
            text = await h._log_text(namespace, name, container) if pod is not None else sent
            if text.startswith(sent) and len(text) > len(sent):
                await response.write(text[len(sent) :].encode())
            sent = text
            if pod is None or _container_done(pod, container):
                break
    except (ConnectionResetError, ConnectionError):
        pass
    finally:
        unsubscribe()
    with contextlib.suppress(ConnectionResetError, ConnectionError):
        await response.write_eof()
    return response


def _patch_sets_rv(body: Any, ctype: str) -> bool:
    if ctype == JSON_PATCH:
        return isinstance(body, list) and any(
            isinstance(op, dict) and str(op.get("path", "")) == "/metadata/resourceVersion"
            for op in body
        )
    if isinstance(body, dict):
        meta = body.get("metadata")
        return isinstance(meta, dict) and bool(meta.get("resourceVersion"))
    return False


def _set_path(obj: Obj, path: str, value: Any) -> None:
    parts = [p for p in path.strip(".").split(".") if p]
    cur = obj
    for p in parts[:-1]:
        nxt = cur.get(p)
        if not isinstance(nxt, dict):
            nxt = cur[p] = {}
        cur = nxt
    cur[parts[-1]] = value
