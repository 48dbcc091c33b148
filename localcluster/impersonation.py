"""User impersonation, as kube-apiserver's ``WithImpersonation`` filter.

A request carrying ``Impersonate-User`` (and optionally ``Impersonate-Group``,
``Impersonate-Uid``, ``Impersonate-Extra-<key>``) is served as the user it
names, once the authenticated user is allowed the ``impersonate`` verb on each
thing it asks for:

* ``users`` (core group) named by ``Impersonate-User``, or ``serviceaccounts``
  in the account's namespace when the name is
  ``system:serviceaccount:<namespace>:<name>``;
* ``groups`` (core group) for every ``Impersonate-Group``;
* ``uids`` (``authentication.k8s.io``) for ``Impersonate-Uid``;
* ``userextras/<key>`` (``authentication.k8s.io``) for every value of every
  ``Impersonate-Extra-<key>`` (the key lower-cased and percent-decoded).

A refusal is kube-apiserver's 403, e.g. ``users "bob" is forbidden: User "alice"
cannot impersonate resource "users" in API group "" at the cluster scope``.
Groups, a uid or extras without a user are a 500, as there. The impersonated
user gets ``system:authenticated`` unless ``system:authenticated`` or
``system:unauthenticated`` was asked for (``system:anonymous`` gets
``system:unauthenticated``), and a ServiceAccount impersonated without groups
gets its ServiceAccount groups. Everything further in (the RBAC authorizer,
admission, ``kubectl auth whoami``) sees the impersonated user; the audit log
records both.

The hook sits after the audit hook and before the authorizer; without RBAC
(``--authorization-mode AlwaysAllow``) every impersonation is allowed, as with
kube-apiserver's AlwaysAllow authorizer.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from urllib.parse import unquote

from aiohttp import web

from .authz import (
    AUTHENTICATED_GROUP,
    UNAUTHENTICATED_GROUP,
    Attributes,
    forbidden_error,
    service_account_groups,
    service_account_user,
)
from .hooks import INFO_KEY, Handler, RequestInfo

USER_HEADER = "Impersonate-User"
GROUP_HEADER = "Impersonate-Group"
UID_HEADER = "Impersonate-Uid"
EXTRA_PREFIX = "impersonate-extra-"
AUTHENTICATION_GROUP = "authentication.k8s.io"
ANONYMOUS = "system:anonymous"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclasses.dataclass(frozen=True)
class _Ask:
    """One thing the requester asks to act as (an ObjectReference in kube-apiserver)."""

    kind: str  # ServiceAccount, User, Group, UserExtra, UID
    name: str
    namespace: str = ""
    api_version: str = ""
    field_path: str = ""  # a UserExtra's key

    def go_text(self) -> str:
        """How Go's ``%v`` prints the ObjectReference (for the 500's message)."""
        return "{" + " ".join(
            [self.kind, self.namespace, self.name, "", self.api_version, "", self.field_path]
        ) + "}"


def split_service_account(user: str) -> tuple[str, str] | None:
    """``(namespace, name)`` of a ServiceAccount user name (serviceaccount.SplitUsername)."""
    prefix = service_account_user("", "")[:-1]  # "system:serviceaccount:"
    if not user.startswith(prefix):
        return None
    parts = user[len(prefix) :].split(":")
    if len(parts) != 2:
        return None
    namespace, name = parts
    if not _DNS_LABEL.match(namespace) or len(namespace) > 63:
        return None
    if not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
        return None
    return namespace, name


def _asks(request: web.Request) -> list[_Ask]:
    """The impersonation requests in the headers (buildImpersonationRequests)."""
    headers = request.headers
    asks: list[_Ask] = []
    user = headers.get(USER_HEADER, "")
    if user:
        sa = split_service_account(user)
        if sa is not None:
            asks.append(_Ask("ServiceAccount", sa[1], namespace=sa[0], api_version="v1"))
        else:
            asks.append(_Ask("User", user, api_version="v1"))
    asks.extend(_Ask("Group", g, api_version="v1") for g in headers.getall(GROUP_HEADER, []))
    for header, value in headers.items():
        if header.lower().startswith(EXTRA_PREFIX):
            key = unquote(header[len(EXTRA_PREFIX) :].lower())
            asks.append(
                _Ask("UserExtra", value, api_version=f"{AUTHENTICATION_GROUP}/v1", field_path=key)
            )
    uid = headers.get(UID_HEADER, "")
    if uid:
        asks.append(_Ask("UID", uid, api_version=f"{AUTHENTICATION_GROUP}/v1"))
    if asks and not user:
        listed = " ".join(a.go_text() for a in asks)
        raise _InternalError(
            f'Internal Server Error: "{request.rel_url}": '
            f"requested [{listed}] without impersonating a user"
        )
    return asks


class _InternalError(Exception):
    """kube-apiserver answers a malformed impersonation with a plain-text 500."""


class Impersonation:
    """The request hook; *authorize* decides ``impersonate`` checks (None: allow all)."""

    def __init__(self, authorize: Callable[[Attributes], bool] | None = None) -> None:
        self.authorize = authorize

    async def hook(
        self, request: web.Request, info: RequestInfo, handler: Handler
    ) -> web.StreamResponse:
        try:
            asks = _asks(request)
        except _InternalError as exc:
            return web.Response(status=500, text=str(exc) + "\n")
        if not asks:
            return await handler(request)
        request[INFO_KEY] = self.impersonate(info, asks)
        return await handler(request)

    def impersonate(self, info: RequestInfo, asks: list[_Ask]) -> RequestInfo:
        """The RequestInfo of the impersonated user; raises 403 on a refused ask."""
        username = ""
        uid = ""
        groups: list[str] = []
        extra: dict[str, list[str]] = {}
        groups_given = any(a.kind == "Group" for a in asks)
        for ask in asks:
            group = AUTHENTICATION_GROUP if ask.kind in ("UserExtra", "UID") else ""
            resource, subresource = "", ""
            if ask.kind == "ServiceAccount":
                resource = "serviceaccounts"
                username = service_account_user(ask.namespace, ask.name)
                if not groups_given:
                    groups = list(service_account_groups(username))
            elif ask.kind == "User":
                resource = "users"
                username = ask.name
            elif ask.kind == "Group":
                resource = "groups"
                groups.append(ask.name)
            elif ask.kind == "UserExtra":
                resource, subresource = "userextras", ask.field_path
                extra.setdefault(ask.field_path, []).append(ask.name)
            else:
                resource = "uids"
                uid = ask.name
            attrs = Attributes(
                user=info.user,
                groups=tuple(info.groups),
                verb="impersonate",
                api_group=group,
                resource=resource,
                subresource=subresource,
                namespace=ask.namespace,
                name=ask.name,
            )
            if self.authorize is not None and not self.authorize(attrs):
                raise forbidden_error(attrs)
        if username != ANONYMOUS:
            if not any(g in (AUTHENTICATED_GROUP, UNAUTHENTICATED_GROUP) for g in groups):
                groups.append(AUTHENTICATED_GROUP)
        elif UNAUTHENTICATED_GROUP not in groups:
            groups.append(UNAUTHENTICATED_GROUP)
        return dataclasses.replace(
            info,
            user=username,
            groups=tuple(groups),
            uid=uid,
            extra=tuple((k, tuple(v)) for k, v in extra.items()),
            impersonator=info.user,
        )
