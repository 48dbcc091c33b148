"""Extension points of localcluster, shared with the simulator, audit, fault
injection and webhook-admission code (LC-sim) that plugs into the server.

* ``RequestInfo`` describes a resolved API request (who, which verb, which
  resource); every ``RequestHook`` sees it before the handler runs.
* ``RequestHook`` is an aiohttp-middleware-shaped coroutine
  ``(request, info, handler) -> response``: call ``await handler(request)`` to
  continue, or return (or raise ``StatusError``) to answer yourself. Hooks run in
  the order of ``cluster.request_hooks``, the first one outermost.
* ``AdmissionAttributes`` + ``AdmissionPlugin`` mirror kube-apiserver's admission
  chain: every plugin's ``mutate`` runs (in list order) after decoding and
  defaulting and before schema validation; every ``validate`` runs after schema
  and CEL validation. Returned strings are warnings, sent to the client as
  ``Warning: 299 - "..."`` headers; a denial raises ``StatusError``.
* ``PodLogProvider`` answers ``GET pods/{name}/log``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from aiohttp import web

Verb = Literal["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
Operation = Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]


@dataclass(frozen=True)
class RequestInfo:
    """A resource request as the authorizer sees it (like k8s.io/apiserver RequestInfo).

    For non-resource requests (discovery, /version, /healthz) ``resource`` is
    empty and ``verb`` is the lower-cased HTTP method.
    """

    user: str
    groups: tuple[str, ...]
    verb: str
    api_group: str
    api_version: str
    resource: str
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    is_resource_request: bool = True
    # Set for an impersonated request (``impersonation.py``): the impersonated
    # user's uid and extra, and the authenticated user who asked.
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()
    impersonator: str = ""


INFO_KEY: web.RequestKey[RequestInfo] = web.RequestKey("localcluster.request_info", RequestInfo)
"""Where a request's current RequestInfo lives while hooks run: a hook that changes
who the request is for (impersonation) stores the new one here, and every hook
further in, and the handler, sees it."""

CREATED_NAME_KEY: web.RequestKey[str] = web.RequestKey("localcluster.created_name", str)
"""The name of the object a create stored (set by the handler): the audit log's
``objectRef.name`` for a create by ``generateName``, without decoding the response."""


@dataclass(frozen=True)
class AdmissionAttributes:
    """What admission plugins are told about the object being written."""

    operation: Operation
    group: str
    version: str
    resource: str
    subresource: str
    kind: str
    namespace: str
    name: str
    user: str
    groups: tuple[str, ...] = ()
    dry_run: bool = False
    options: dict[str, Any] = field(default_factory=dict)


class AdmissionPlugin(Protocol):
    """A mutating-and-validating admission step.

    ``mutate`` returns ``(new_object_or_None, warnings)``; ``None`` means
    "unchanged". ``obj`` is the incoming object (``None`` for DELETE), ``old`` the
    stored one (``None`` for CREATE). Both phases may raise ``StatusError``.
    """

    async def mutate(
        self, attrs: AdmissionAttributes, obj: dict[str, Any] | None, old: dict[str, Any] | None
    ) -> tuple[dict[str, Any] | None, list[str]]: ...

    async def validate(
        self, attrs: AdmissionAttributes, obj: dict[str, Any] | None, old: dict[str, Any] | None
    ) -> list[str]: ...


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RequestHook = Callable[[web.Request, RequestInfo, Handler], Awaitable[web.StreamResponse]]
# (namespace, pod, container) -> the log text; may be sync or a coroutine function.
PodLogProvider = Callable[[str, str, str], "str | Awaitable[str]"]
