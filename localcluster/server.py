"""The HTTP layer of localcluster: routing, authentication, request hooks, errors.

One catch-all aiohttp route parses the Kubernetes URL layout
(``/api/v1/namespaces/{ns}/{resource}/{name}/{subresource}``,
``/apis/{group}/{version}/...``, discovery and health paths) into a
``RequestInfo``, authenticates the bearer token, runs the cluster's
``request_hooks`` around the handler, and renders every ``StatusError`` (and any
unexpected exception, as a 500) as a ``Status`` body. Nothing a client sends
can take the server down.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import traceback
from collections.abc import Awaitable, Callable

from aiohttp import web

from nimctl_runtime.logsetup import get_logger

from . import conversion, discovery, errors, eviction, openapi, podexec, portforward, proxy, tokens
from .codec import json_response, status_response
from .errors import StatusError
from .handlers import RequestContext, ResourceHandlers
from .hooks import INFO_KEY, Handler, RequestHook, RequestInfo
from .host import APIServerHost
from .protobuf_http import protobuf_responses
from .store import encode
from .watch import WatchServer

log = get_logger(__name__)

PUBLIC_PATHS = ("/version", "/healthz", "/livez", "/readyz")
_STREAMING = ("exec", "attach", "portforward")
_VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def _not_found_path() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource", {})


def parse_request(request: web.Request, user: str, groups: tuple[str, ...]) -> RequestInfo:
    """Resolve the URL and method into a RequestInfo (as kube-apiserver's RequestInfoFactory)."""
    path = request.path
    parts = [p for p in path.strip("/").split("/") if p]
    method = request.method.upper()
    q = request.query
    base = {"user": user, "groups": groups, "path": path}
    if not parts or parts[0] not in ("api", "apis"):
        return RequestInfo(
            verb=method.lower(),
            api_group="",
            api_version="",
            resource="",
            is_resource_request=False,
            **base,  # type: ignore[arg-type]
        )
    if parts[0] == "api":
        group, rest = "", parts[1:]
    elif len(parts) < 2:
        group, rest = "", []
    else:
        group, rest = parts[1], parts[2:]
    if not rest or (parts[0] == "apis" and len(parts) < 3):
        return RequestInfo(
            verb=method.lower(),
            api_group=group,
            api_version=rest[0] if rest else "",
            resource="",
            is_resource_request=False,
            **base,  # type: ignore[arg-type]
        )
    version, rest = rest[0], rest[1:]
    if not rest:
        return RequestInfo(
            verb=method.lower(),
            api_group=group,
            api_version=version,
            resource="",
            is_resource_request=False,
            **base,  # type: ignore[arg-type]
        )
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
        namespace, rest = rest[1], rest[2:]
    elif rest[0] == "namespaces" and len(rest) >= 2:
        namespace = rest[1]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if len(rest) > 3:
        subresource = "/".join(rest[2:])
    verb = _VERBS.get(method, method.lower())
    if subresource in _STREAMING:
        # A WebSocket upgrade is a GET, yet it starts something: kube-apiserver
        # authorizes it as create (AuthorizePodWebsocketUpgradeCreatePermission).
        verb = "create"
    if method == "GET" and not name:
        verb = "watch" if q.get("watch", "").lower() in ("true", "1") else "list"
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    return RequestInfo(
        user=user,
        groups=groups,
        verb=verb,
        api_group=group,
        api_version=version,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
        path=path,
        is_resource_request=True,
    )


class ApiServer:
    """The aiohttp application serving one cluster (a LocalCluster)."""

    def __init__(self, cluster: APIServerHost) -> None:
        self.cluster = cluster
        self.resources = ResourceHandlers(cluster)
        self.watches = WatchServer(cluster)
        self.builtin_schemas = openapi.BuiltinSchemas()
        self._openapi_cache: dict[tuple[str, str], bytes | None] = {}
        self._openapi_generation = -1
        self._hooks_chain: tuple[tuple[RequestHook, ...], Handler] | None = None

    def make_app(self, client_max_size: int) -> web.Application:
        app = web.Application(
            client_max_size=client_max_size, middlewares=[protobuf_responses, self._errors]
        )
        app.router.add_route("*", "/{tail:.*}", self.dispatch)
        return app

    @web.middleware
    async def _errors(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        try:
            return await handler(request)
        except StatusError as exc:
            return status_response(exc)
        except web.HTTPRequestEntityTooLarge:
            return status_response(errors.request_entity_too_large())
        except web.HTTPException:
            raise
        except (ConnectionResetError, ConnectionError):
            raise
        except Exception as exc:
            log.error(
                "request failed",
                method=request.method,
                path=request.path,
                error=repr(exc),
                traceback=traceback.format_exc(),
            )
            return status_response(errors.internal(f"{type(exc).__name__}: {exc}"))

    def _authenticate(self, request: web.Request) -> tuple[str, tuple[str, ...]]:
        header = request.headers.get("Authorization", "")
        if header.lower().startswith("bearer "):
            token = header[7:].strip()
            user = self.cluster.user_for_token(token)
            if user is not None:
                return user
        if request.path in PUBLIC_PATHS:
            return ("system:anonymous", ("system:unauthenticated",))
        raise errors.unauthorized()

    async def dispatch(self, request: web.Request) -> web.StreamResponse:
        user, groups = self._authenticate(request)
        request[INFO_KEY] = parse_request(request, user, groups)
        return await self._chain()(request)

    async def _routed(self, request: web.Request) -> web.StreamResponse:
        return await self._route(request, request[INFO_KEY])

    def _chain(self) -> Handler:
        """The request hooks around the router, built again only when the hooks change
        (extensions and authorizers add theirs at start-up), not on every request."""
        hooks = tuple(self.cluster.request_hooks)
        if self._hooks_chain is None or self._hooks_chain[0] != hooks:
            handler: Handler = self._routed
            for hook in reversed(hooks):
                handler = _wrap(hook, handler)
            self._hooks_chain = (hooks, handler)
        return self._hooks_chain[1]

    async def _route(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        if not info.is_resource_request:
            return await self._non_resource(request, info)
        registry = self.cluster.registry
        res = registry.get(info.api_group, info.api_version, info.resource)
        if res is None:
            raise _not_found_path()
        if (
            info.namespace
            and not res.namespaced
            and not (info.resource == "namespaces" and not info.api_group)
        ):
            raise _not_found_path()
        if res.resource == "namespaces" and not res.group:
            # /api/v1/namespaces/{name}[/status|/finalize]
            parts = [p for p in info.path.strip("/").split("/") if p]
            tail = parts[3:]
            info = dataclasses.replace(
                info,
                api_group="",
                resource="namespaces",
                subresource=tail[1] if len(tail) > 1 else "",
                namespace="",
                name=tail[0] if tail else "",
            )
            if info.subresource == "finalize":
                info = dataclasses.replace(info, subresource="")
        elif res.namespaced and info.name and not info.namespace:
            raise _not_found_path()
        if info.subresource and info.subresource.split("/", 1)[0] not in res.subresources:
            raise _not_found_path()
        convert = conversion.is_converted(res.group, res.resource)
        if convert:
            core = registry.get(*conversion.CORE_EVENTS)
            if core is None:
                raise _not_found_path()
            res = core
        ctx = RequestContext(info=info, resource=res, request=request, convert=convert)
        resp = await self._verb(request, info, ctx)
        if convert and isinstance(resp, web.Response) and resp.body is not None:
            body = resp.body if isinstance(resp.body, bytes) else b""
            try:
                doc = json.loads(body)
            except ValueError:
                return resp
            out = json_response(conversion.response_from_core(doc), resp.status)
            for value in resp.headers.getall("Warning", []):
                out.headers.add("Warning", value)
            return out
        return resp

    async def _verb(
        self, request: web.Request, info: RequestInfo, ctx: RequestContext
    ) -> web.StreamResponse:
        method = request.method.upper()
        h = self.resources
        if info.resource == "pods" and info.subresource == "portforward":
            return await portforward.serve(self.cluster, request, info.namespace, info.name)
        if info.resource == "pods" and info.subresource in ("exec", "attach"):
            return await podexec.serve(self.cluster, request, info)
        if method == "GET":
            if info.subresource == "log":
                return await h.pod_log(ctx)
            if info.subresource.split("/", 1)[0] == "proxy":
                path = info.subresource.partition("/")[2]
                return await proxy.serve(
                    self.cluster, info.resource, info.namespace, info.name, path
                )
            if info.name:
                return await h.get(ctx)
            if info.verb == "watch":
                return await self.watches.serve(ctx, h._selectors(ctx))
            return await h.list(ctx)
        if method == "POST" and not info.name:
            return await h.create(ctx)
        if method == "POST" and info.subresource == "eviction":
            return await eviction.evict(h, ctx)
        if method == "POST" and info.subresource == "token" and info.resource == "serviceaccounts":
            answer = tokens.token_request(
                h.storage, self.cluster.token_issuer, info.namespace, info.name, await h._body(ctx)
            )
            return json_response(answer, 201, ctx.warnings)
        if method == "PUT" and info.name:
            return await h.update(ctx)
        if method == "PATCH" and info.name:
            return await h.patch(ctx)
        if method == "DELETE":
            return await (h.delete(ctx) if info.name else h.delete_collection(ctx))
        raise errors.method_not_allowed()

    async def _openapi_gv(self, group: str, version: str) -> bytes | None:
        """The encoded OpenAPI v3 document of one group/version, cached per registry state."""
        registry = self.cluster.registry
        if self._openapi_generation != registry.generation:
            self._openapi_cache.clear()
            self._openapi_generation = registry.generation
        key = (group, version)
        if key not in self._openapi_cache:
            if not self.builtin_schemas.loaded:
                await asyncio.to_thread(self.builtin_schemas.load)
            doc = openapi.group_version_doc(registry, group, version, self.builtin_schemas)
            self._openapi_cache[key] = encode(doc) if doc is not None else None
        return self._openapi_cache[key]

    async def _non_resource(self, request: web.Request, info: RequestInfo) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        registry = self.cluster.registry
        if request.method.upper() != "GET":
            raise errors.method_not_allowed()
        if path == "/version":
            return json_response(discovery.version_info(self.cluster.kubernetes_version))
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if path == "/api":
            agg = _aggregated_version(request)
            if agg:
                return _aggregated(
                    discovery.aggregated_discovery(registry, legacy=True, api_version=agg[0]),
                    agg[1],
                )
            return json_response(discovery.api_versions(f"{self.cluster.host}:{self.cluster.port}"))
        if path == "/apis":
            agg = _aggregated_version(request)
            if agg:
                return _aggregated(
                    discovery.aggregated_discovery(registry, legacy=False, api_version=agg[0]),
                    agg[1],
                )
            return json_response(discovery.api_group_list(registry))
        if path == "/api/v1":
            doc = discovery.api_resource_list(registry, "", "v1")
            if doc is not None:
                return json_response(doc)
        if info.api_group and path.startswith("/apis/"):
            if info.api_version:
                doc = discovery.api_resource_list(registry, info.api_group, info.api_version)
            else:
                doc = discovery.api_group(registry, info.api_group)
            if doc is not None:
                return json_response(doc)
        if path == "/openapi/v3":
            return json_response(openapi.root_doc(registry))
        if path.startswith("/openapi/v3/"):
            rest = path[len("/openapi/v3/") :].split("/")
            gv: tuple[str, str] | None = None
            if rest[0] == "api" and len(rest) == 2:
                gv = ("", rest[1])
            elif rest[0] == "apis" and len(rest) == 3:
                gv = (rest[1], rest[2])
            if gv is not None:
                body = await self._openapi_gv(*gv)
                if body is not None:
                    return web.Response(body=body, content_type="application/json")
        if path == "/openapi/v2":
            version = f"v{self.cluster.kubernetes_version}"
            if "protobuf" in request.headers.get("Accept", ""):
                return web.Response(
                    body=openapi.empty_v2_protobuf(version), content_type=openapi.V2_PROTOBUF
                )
            return json_response(openapi.empty_v2(version))
        if path.startswith("/openapi/"):
            raise StatusError(
                404,
                "NotFound",
                "the server could not find the requested resource: localcluster serves "
                "OpenAPI v3 (/openapi/v3) and an empty OpenAPI v2 document",
                {},
            )
        if path == "/":
            return json_response({"paths": ["/api", "/api/v1", "/apis", "/healthz", "/version"]})
        raise _not_found_path()


def _aggregated_version(request: web.Request) -> tuple[str, str] | None:
    accept = request.headers.get("Accept", "")
    for part in accept.split(","):
        params = {
            p.split("=", 1)[0].strip(): p.split("=", 1)[1].strip()
            for p in part.split(";")[1:]
            if "=" in p
        }
        if params.get("g") == "apidiscovery.k8s.io" and params.get("as") == "APIGroupDiscoveryList":
            v = params.get("v")
            if v == "v2":
                return ("apidiscovery.k8s.io/v2", discovery.AGGREGATED_V2)
            if v == "v2beta1":
                return ("apidiscovery.k8s.io/v2beta1", discovery.AGGREGATED_V2BETA1)
        if part.split(";", 1)[0].strip() in ("application/json", "*/*"):
            return None
    return None


def _aggregated(doc: object, content_type: str) -> web.Response:
    resp = web.Response(body=encode(doc), status=200)
    resp.headers["Content-Type"] = content_type
    return resp


def _wrap(hook: Callable[..., Awaitable[web.StreamResponse]], inner: Handler) -> Handler:
    async def wrapped(request: web.Request) -> web.StreamResponse:
        # the RequestInfo as the hooks further out left it (impersonation changes the user)
        return await hook(request, request[INFO_KEY], inner)

    return wrapped
