"""Request bodies and responses of localcluster's API: media types in, JSON out.

What every part of the HTTP layer shares (handlers, watches, the router,
admission and authorization hooks): decoding a request body as JSON, YAML or
protobuf (400 when malformed, 415 for an unknown media type, 413 for YAML that
expands without bound), JSON responses with ``Warning: 299`` headers, ``Status``
error responses, ``Accept`` negotiation (``as=Table``,
``as=PartialObjectMetadata``) and list ``continue`` tokens.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import gc
import json
from collections.abc import Iterator, Mapping
from typing import Any

from aiohttp import web
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from nimctl_runtime.meta import Obj

from . import errors, protobuf
from .errors import StatusError
from .store import encode, loads

MAX_BODY = 3 * 1024 * 1024

JSON = "application/json"
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml")
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
APPLY_PATCH_CBOR = "application/apply-patch+cbor"
PROTOBUF = "application/vnd.kubernetes.protobuf"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def media_type(header: str | None) -> str:
    return (header or "").split(";", 1)[0].strip().lower()


def _yaml_load(text: str) -> Any:
    yaml = YAML(typ="safe", pure=True)
    return yaml.load(text)


LARGE_BODY = 256 * 1024


@contextlib.contextmanager
def _gc_paused(size: int) -> Iterator[None]:
    """Pause the cyclic GC while a body of *size* bytes is decoded and checked.

    A 3 MiB body of small objects allocates about a million containers; with the GC
    on, each generation-2 pass walks every object the server holds, and one decode
    stalled the event loop for 9 s in the fuzz bench (0.1 s with the GC paused).
    """
    if size < LARGE_BODY or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def decode_body(raw: bytes, content_type: str) -> Any:
    """Decode a JSON or YAML request body (400 BadRequest when malformed)."""
    mt = media_type(content_type)
    if not raw.strip():
        raise errors.bad_request("the request body is empty: an object was expected")
    if mt in YAML_TYPES or mt == APPLY_PATCH:
        try:
            doc = _yaml_load(raw.decode("utf-8"))
        except (YAMLError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise errors.bad_request(f"error decoding YAML: {exc}") from exc
        _check_expanded_size(doc)
        check_nesting_depth(doc)
        return doc
    if mt in ("", JSON, MERGE_PATCH, JSON_PATCH, STRATEGIC_PATCH, "*/*", "text/plain"):
        if len(raw) < LARGE_BODY:  # (a generator context manager per request costs)
            return _decode_json(raw)
        with _gc_paused(len(raw)):
            return _decode_json(raw)
    if mt == PROTOBUF:
        try:
            return protobuf.decode(raw)
        except protobuf.UnsupportedKind as exc:
            raise StatusError(415, "UnsupportedMediaType", str(exc)) from exc
        except (protobuf.ProtobufError, IndexError, UnicodeDecodeError) as exc:
            raise errors.bad_request(f"error decoding protobuf body: {exc}") from exc
    raise errors.unsupported_media_type(("application/json", "application/yaml"))


# What Go's JSON scanner says of the constants Python's json reads but JSON has not
# (kube-apiserver refuses them with a 400; they could not be stored or served back).
_GO_CONSTANT_ERRORS = {
    "NaN": "invalid character 'N' looking for beginning of value",
    "Infinity": "invalid character 'I' looking for beginning of value",
    "-Infinity": "invalid character 'I' in numeric literal",
}


def _refuse_constant(name: str) -> Any:
    raise ValueError(_GO_CONSTANT_ERRORS.get(name, f"invalid character {name[:1]!r}"))


def _decode_json(raw: bytes) -> Any:
    try:
        doc = loads(raw, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {exc}") from exc
    if raw.count(b"{") + raw.count(b"[") > MAX_NESTING_DEPTH:
        # fewer containers than the limit cannot nest deeper than it
        check_nesting_depth(doc)
    return doc


MAX_DECODED_NODES = 1_000_000
# Deeper bodies are refused (400) before anything recursive (validation, pruning,
# CEL, copies) walks them: no Kubernetes object comes near it, and a nesting bomb
# would otherwise end in a RecursionError (a 500).
MAX_NESTING_DEPTH = 200


def check_nesting_depth(doc: Any) -> None:
    """400 BadRequest when *doc* nests objects/arrays deeper than MAX_NESTING_DEPTH."""
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_NESTING_DEPTH:
            raise errors.bad_request(
                f"the request body nests objects and arrays more than {MAX_NESTING_DEPTH} "
                "levels deep"
            )
        stack.extend((child, depth + 1) for child in children)


def _check_expanded_size(doc: Any) -> None:
    """Refuse YAML whose aliases expand into an enormous document ("billion laughs")."""
    budget = MAX_DECODED_NODES
    stack = [doc]
    while stack:
        node = stack.pop()
        budget -= 1
        if budget < 0:
            raise errors.request_entity_too_large(
                "Request entity too large: the YAML document expands to too many values"
            )
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)


def json_response(obj: Any, status: int = 200, warnings: list[str] | None = None) -> web.Response:
    resp = web.Response(body=encode(obj), status=status, content_type=JSON)
    add_warnings(resp, warnings)
    return resp


def bytes_response(
    body: bytes, status: int = 200, warnings: list[str] | None = None
) -> web.Response:
    resp = web.Response(body=body, status=status, content_type=JSON)
    add_warnings(resp, warnings)
    return resp


def add_warnings(resp: web.StreamResponse, warnings: list[str] | None) -> None:
    for w in warnings or []:
        text = w.replace('"', '\\"').replace("\n", " ")
        resp.headers.add("Warning", f'299 - "{text}"')


def accept_as(request: web.Request) -> str:
    """The ``as=`` form asked for in Accept (``Table``, ``PartialObjectMetadata[List]``) or ""."""
    accept = request.headers.get("Accept", "")
    for part in accept.split(","):
        params = {
            p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip()
            for p in part.split(";")[1:]
            if "=" in p
        }
        if params.get("g") == "meta.k8s.io" and params.get("as") in (
            "Table",
            "PartialObjectMetadata",
            "PartialObjectMetadataList",
        ):
            return params["as"]
        if media_type(part) in ("application/json", "*/*", "application/*"):
            return ""
    return ""


def wants_table(request: web.Request) -> bool:
    return accept_as(request) == "Table"


def wants_metadata_only(request: web.Request) -> bool:
    return accept_as(request).startswith("PartialObjectMetadata")


def partial_metadata(obj: Mapping[str, Any]) -> Obj:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata") or {},
    }


def encode_continue(rv: int, last: tuple[str, str]) -> str:
    token = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(last)})
    return base64.urlsafe_b64encode(token.encode()).decode()


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        ns, name = data["start"]
        return int(data["rv"]), (str(ns), str(name))
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise errors.bad_request(f"continue key is not valid: {exc}") from exc


def status_response(exc: StatusError) -> web.Response:
    resp = json_response(exc.to_status(), exc.code)
    if exc.retry_after is not None:
        resp.headers["Retry-After"] = str(exc.retry_after)
    return resp
