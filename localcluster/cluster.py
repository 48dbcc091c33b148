"""``LocalCluster``: the in-process Kubernetes API server as one object.

``async with LocalCluster() as cluster:`` starts an HTTPS server on 127.0.0.1
with a throwaway CA, bearer-token users and a kubeconfig for ``admin``;
``cluster.storage`` is the same data in process. Extensions (simulator, audit,
fault injection, webhook admission) are started by
``extensions.start_extensions`` and plug in through ``request_hooks``,
``admission_plugins`` and ``pod_log_provider``.
"""

from __future__ import annotations

import asyncio
import secrets
import shutil
import ssl
import tempfile
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from aiohttp import web

from nimctl_runtime import certs
from nimctl_runtime.logsetup import get_logger

from . import cel, patch
from .authz import Attributes, RBACAuthorizer, enable_rbac, service_account_groups
from .codec import MAX_BODY
from .crd import CRDController
from .discovery import default_kubernetes_version, parse_kubernetes_version
from .extensions import start_extensions
from .gc import GarbageCollector
from .hooks import AdmissionPlugin, PodLogProvider, RequestHook
from .impersonation import Impersonation
from .kubeconfig import render_kubeconfig, write_kubeconfig_file
from .registry import Registry
from .server import ApiServer
from .serviceaccounts import ServiceAccountAdmission, ServiceAccountsController
from .storage import Storage
from .store import Entry
from .tokens import TokenIssuer

log = get_logger(__name__)

SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
ADMIN_GROUPS = ("system:masters", "system:authenticated")
USER_GROUPS = ("system:authenticated",)
AUTHORIZATION_MODES = ("AlwaysAllow", "RBAC")
"""What ``--authorization-mode`` takes: everyone may do everything, or RBAC (``authz.py``)."""


class _Stoppable(Protocol):
    async def stop(self) -> None: ...


class LocalCluster:
    """An in-process Kubernetes API server (HTTPS, bearer tokens, kubeconfig)."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        simulator: bool = True,
        profile: str | None = None,
        debug_api: bool = False,
        workdir: str | Path | None = None,
        history_size: int = 20000,
        bookmark_interval: float = 2.0,
        watch_buffer: int = 100000,
        kubernetes_version: str | None = None,
        authorization_mode: str = "AlwaysAllow",
    ) -> None:
        if authorization_mode not in AUTHORIZATION_MODES:
            raise ValueError(
                f"authorization mode {authorization_mode!r} is not one of "
                + ", ".join(AUTHORIZATION_MODES)
            )
        self.authorization_mode = authorization_mode
        # The RBAC authorizer once RBAC is on (``authz.enable_rbac``), else None.
        self.authorizer: RBACAuthorizer | None = None
        self.impersonation = Impersonation(self._authorize)
        self.host = host
        self.port = port
        # The version /version reports ("1.35.0"); a bad one is a ValueError here.
        self.kubernetes_version = parse_kubernetes_version(
            kubernetes_version or default_kubernetes_version()
        )
        # Seconds a connection may take to send a whole request, or sit idle: a
        # half-open connection is closed instead of being held forever.
        self.header_timeout = 60.0
        self.simulator = simulator
        self.profile = profile
        self.debug_api = debug_api
        self.bookmark_interval = bookmark_interval
        self._history_size = history_size
        self._watch_buffer = watch_buffer
        self._workdir_arg = Path(workdir) if workdir is not None else None
        self.workdir: Path = self._workdir_arg or Path(".")
        self._own_workdir = False
        self.registry = Registry()
        self.storage = Storage(self.registry, history_size=history_size, watch_buffer=watch_buffer)
        self.request_hooks: list[RequestHook] = []
        self.admission_plugins: list[AdmissionPlugin] = []
        self.pod_log_provider: PodLogProvider | None = None
        self.url = ""
        self.ca_pem = b""
        self.ca: certs.CertPair | None = None
        self.kubeconfig_path = Path()
        self._tokens: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._bound_objects: dict[tuple[str, str, str], tuple[Entry, dict[str, Any]]] = {}
        self._user_tokens: dict[str, str] = {}
        # Signs the ServiceAccount tokens of the serviceaccounts/token subresource.
        self.token_issuer = TokenIssuer()
        self._runner: web.AppRunner | None = None
        self._gc: GarbageCollector | None = None
        self._serviceaccounts: ServiceAccountsController | None = None
        self.crds: CRDController = CRDController(self.storage, self.registry)
        self._extensions: _Stoppable | None = None
        self._started = False
        self.server_ssl_context: ssl.SSLContext | None = None

    # ------------------------------------------------------------------ users

    def _authorize(self, attrs: Attributes) -> bool:
        """The cluster's authorizer (AlwaysAllow until RBAC is on)."""
        return self.authorizer is None or self.authorizer.authorize(attrs)

    def token_for(self, user: str) -> str:
        """The bearer token of *user* (made on first use)."""
        token = self._user_tokens.get(user)
        if token is None:
            token = secrets.token_urlsafe(32)
            groups: tuple[str, ...] = ADMIN_GROUPS
            if user != "admin":  # a ServiceAccount user also gets its groups
                groups = (*service_account_groups(user), *USER_GROUPS)
            self._user_tokens[user] = token
            self._tokens[token] = (user, groups)
        return token

    def user_for_token(self, token: str) -> tuple[str, tuple[str, ...]] | None:
        found = self._tokens.get(token)
        if found is None and token.count(".") == 2:  # a TokenRequest's JWT
            found = self.token_issuer.authenticate(token, self._lookup)
        return found

    def _lookup(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The current object a token is bound to (read only: the decode is shared).

        Every request of a ServiceAccount token looks its ServiceAccount up; stored
        entries are replaced, never changed, on a write, so the decode of an entry is
        kept while that entry is the stored one.
        """
        info = self.registry.get_by_kind("v1", kind)
        entry = self.storage.get_entry(info, namespace, name) if info is not None else None
        if entry is None:
            return None
        key = (kind, namespace, name)
        seen = self._bound_objects.get(key)
        if seen is not None and seen[0] is entry:
            return seen[1]
        obj = entry.decode()
        if len(self._bound_objects) >= 1024:
            self._bound_objects.clear()
        self._bound_objects[key] = (entry, obj)
        return obj

    def kubeconfig_text(self, user: str = "admin") -> str:
        return render_kubeconfig(self.url, self.ca_pem, user, self.token_for(user))

    def write_kubeconfig(self, path: str | Path, user: str = "admin") -> Path:
        """Write a kubeconfig for *user* (distinct token per user) to *path*."""
        if not self.url:
            raise RuntimeError("the cluster is not started: no server URL to write")
        return write_kubeconfig_file(path, self.kubeconfig_text(user))

    def client_ssl_context(self) -> ssl.SSLContext:
        return certs.client_ssl_context(self.ca_pem)

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> LocalCluster:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    def _bootstrap(self) -> None:
        ns_info = self.registry.get("", "v1", "namespaces")
        assert ns_info is not None
        for name in SYSTEM_NAMESPACES:
            if self.storage.get_entry(ns_info, "", name) is None:
                self.storage.create_object(
                    ns_info, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
                )

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        if self._workdir_arg is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="nimctl-localcluster-"))
            self._own_workdir = True
        else:
            self.workdir = self._workdir_arg
            self.workdir.mkdir(parents=True, exist_ok=True)
        hosts = [self.host, "localhost", "127.0.0.1"]
        (ca, serving), _ = await asyncio.gather(
            asyncio.to_thread(_make_certs, list(dict.fromkeys(hosts))),
            asyncio.to_thread(_warm_up),
        )
        self.ca = ca
        self.ca_pem = ca.cert_pem
        self.server_ssl_context = certs.server_ssl_context(serving)
        self._bootstrap()
        self._gc = GarbageCollector(self.storage)
        self._gc.start()
        self._serviceaccounts = ServiceAccountsController(self.storage)
        self._serviceaccounts.start()
        if not any(isinstance(p, ServiceAccountAdmission) for p in self.admission_plugins):
            self.admission_plugins.append(ServiceAccountAdmission(self.storage))
        self._extensions = await start_extensions(self)
        # After the audit hook (which records who asked and who was served) and
        # before the authorizer (which decides for the impersonated user).
        self.request_hooks.append(self.impersonation.hook)
        if self.authorization_mode == "RBAC":
            enable_rbac(self)
        api = ApiServer(self)
        app = api.make_app(MAX_BODY + 64 * 1024)
        self._runner = web.AppRunner(
            app, access_log=None, shutdown_timeout=1.0, keepalive_timeout=self.header_timeout
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self.server_ssl_context)
        await site.start()
        server: Any = site._server
        sockets = getattr(server, "sockets", None) or []
        if sockets:
            self.port = int(sockets[0].getsockname()[1])
        url_host = f"[{self.host}]" if ":" in self.host else self.host
        self.url = f"https://{url_host}:{self.port}"
        self.kubeconfig_path = self.write_kubeconfig(self.workdir / "kubeconfig")
        log.info("localcluster started", url=self.url, kubeconfig=str(self.kubeconfig_path))

    async def stop(self) -> None:
        if not self._started:
            return
        self._started = False
        if self._extensions is not None:
            try:
                await self._extensions.stop()
            finally:
                self._extensions = None
        self.storage.close_watchers()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._gc is not None:
            await self._gc.stop()
            self._gc = None
        if self._serviceaccounts is not None:
            await self._serviceaccounts.stop()
            self._serviceaccounts = None
        self.crds.close()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        log.info("localcluster stopped", url=self.url)


def _warm_up() -> None:
    """Pay the first-use cost of the patch schemas and the CEL parser off the event loop."""
    patch.warm_up()
    cel.warm_up()


def _make_certs(hosts: list[str]) -> tuple[certs.CertPair, certs.CertPair]:
    ca = certs.generate_ca("nimctl-localcluster-ca")
    return ca, certs.generate_serving_cert(ca, hosts, common_name="localcluster")
