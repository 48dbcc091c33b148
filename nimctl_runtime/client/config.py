"""Where the API server is and how to authenticate: :class:`RestConfig` and :func:`load_config`.

Lookup order is controller-runtime's ``GetConfig``: the ``--kubeconfig`` path, then
``KUBECONFIG`` (colon-separated files are merged), then in-cluster service-account
config, then ``~/.kube/config``. Kubeconfig parsing and user authentication (tokens,
client certificates, exec plugins, OIDC) are kubernetes-asyncio's; the HTTP transport
is ours (see :mod:`nimctl_runtime.client.client`).

The in-cluster token is re-read from its file once a minute (bound service-account
tokens rotate hourly), off the event loop.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nimctl_runtime.client.kubeconfig_modules import kube_config

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REFRESH_SECONDS = 60.0


class ConfigError(Exception):
    """No usable configuration was found, or it is malformed."""


@dataclass
class RestConfig:
    """Connection settings for one API server (the counterpart of client-go's ``rest.Config``).

    ``qps``/``burst`` enable the client-side token bucket; ``qps=None`` or a negative
    value disables it (controller-runtime's default since v0.21: rely on API Priority
    and Fairness). ``timeout`` bounds every unary request; ``watch_idle_timeout`` is
    the longest silence tolerated on a watch stream before it is considered dead.
    """

    host: str = ""
    ca_pem: bytes | None = None
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify_ssl: bool = True
    tls_server_name: str | None = None
    token: str | None = None
    token_file: str | None = None
    qps: float | None = None
    burst: int = 10
    timeout: float = 60.0
    watch_idle_timeout: float = 70.0
    user_agent: str = "nimctl/0.1.0"
    context: str | None = None
    _loader: Any = field(default=None, repr=False)
    _resolved: bool = field(default=False, repr=False)
    _token_read_at: float = field(default=0.0, repr=False)
    _resolve_lock: asyncio.Lock | None = field(default=None, repr=False)

    async def resolve(self, *, force: bool = False) -> None:
        """Finish loading (kubeconfig user authentication may call exec plugins).

        Idempotent; ``force=True`` runs the kubeconfig authentication again (a new
        exec-plugin or OIDC token after the old one was refused).
        """
        if self._loader is None or (self._resolved and not force):
            return
        if self._resolve_lock is None:
            self._resolve_lock = asyncio.Lock()
        async with self._resolve_lock:
            if self._resolved and not force:
                return
            _, configuration_class = kube_config()
            configuration = configuration_class()
            try:
                await self._loader.load_and_set(configuration)
            except Exception as err:
                raise ConfigError(f"cannot load kubeconfig: {err}") from err
            self.host = str(configuration.host).rstrip("/")
            self.ca_file = configuration.ssl_ca_cert or None
            self.cert_file = configuration.cert_file or None
            self.key_file = configuration.key_file or None
            self.verify_ssl = bool(configuration.verify_ssl)
            self.tls_server_name = getattr(configuration, "tls_server_name", None) or None
            token = configuration.api_key.get("BearerToken")
            if token:
                self.token = str(token)
            self._resolved = True

    async def refresh_credentials(self) -> bool:
        """Re-read credentials after a 401; True when something could be refreshed."""
        if self.token_file:
            self._token_read_at = 0.0
            return True
        if self._loader is not None:
            await self.resolve(force=True)
            return True
        return False

    def ssl_context(self) -> ssl.SSLContext | bool:
        """The TLS context for :attr:`host` (``False`` for plain HTTP)."""
        if not self.host.startswith("https"):
            return False
        if self.ca_pem is not None:
            ctx = ssl.create_default_context(cadata=self.ca_pem.decode())
        elif self.ca_file:
            ctx = ssl.create_default_context(cafile=self.ca_file)
        else:
            ctx = ssl.create_default_context()
        if not self.verify_ssl:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        if self.cert_file and self.key_file:
            ctx.load_cert_chain(self.cert_file, self.key_file)
        return ctx

    async def authorization(self) -> str | None:
        """The ``Authorization`` header value, re-reading a rotating token file when due."""
        if self.token_file and time.monotonic() - self._token_read_at >= TOKEN_REFRESH_SECONDS:
            path = self.token_file
            text = await asyncio.to_thread(Path(path).read_text)
            self._token_read_at = time.monotonic()
            if text.strip():
                self.token = text.strip()
        if not self.token:
            return None
        token = self.token
        return token if token.lower().startswith("bearer ") else f"Bearer {token}"


def in_cluster_config(
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
    environ: dict[str, str] | None = None,
) -> RestConfig:
    """Config from the pod's service account (``KUBERNETES_SERVICE_HOST``/``_PORT``)."""
    env = dict(os.environ) if environ is None else environ
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError(
            "not running in a cluster: KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT are unset"
        )
    token_path = service_account_dir / "token"
    ca_path = service_account_dir / "ca.crt"
    if not token_path.is_file():
        raise ConfigError(f"service-account token {token_path} does not exist")
    if not ca_path.is_file():
        raise ConfigError(f"service-account CA {ca_path} does not exist")
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    config = RestConfig(
        host=f"https://{host}:{port}",
        ca_file=str(ca_path),
        token=token_path.read_text().strip(),
        token_file=str(token_path),
    )
    config._token_read_at = time.monotonic()
    return config


def kubeconfig_config(path: str, context: str | None = None) -> RestConfig:
    """Config from a kubeconfig file (or ``:``-separated files); user auth resolves lazily."""
    module, _ = kube_config()
    ConfigException = module.ConfigException
    KubeConfigLoader, KubeConfigMerger = module.KubeConfigLoader, module.KubeConfigMerger

    files = [p for p in path.split(os.pathsep) if p]
    missing = [p for p in files if not Path(p).expanduser().is_file()]
    if not files or len(missing) == len(files):
        raise ConfigError(f"kubeconfig {path!r} does not exist")
    try:
        merged = KubeConfigMerger(os.pathsep.join(str(Path(p).expanduser()) for p in files))
        loader = KubeConfigLoader(config_dict=merged.config, active_context=context)
    except (ConfigException, KeyError, TypeError, ValueError) as err:
        raise ConfigError(f"kubeconfig {path!r}: {err}") from err
    current = loader.current_context or {}
    cluster_name = (current.get("context") or {}).get("cluster")
    server = ""
    root = merged.config
    if root is not None and cluster_name and root.safe_get("clusters"):
        node = root["clusters"].get_with_name(cluster_name, safe=True)
        if node is not None and node.safe_get("cluster"):
            server = str(node["cluster"].safe_get("server") or "")
    return RestConfig(host=server.rstrip("/"), context=current.get("name"), _loader=loader)


def load_config(kubeconfig: str | None = None, context: str | None = None) -> RestConfig:
    """Find the cluster the way controller-runtime does (see the module docstring)."""
    if kubeconfig:
        return kubeconfig_config(kubeconfig, context)
    env_path = os.environ.get("KUBECONFIG")
    if env_path:
        return kubeconfig_config(env_path, context)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and context is None:
        try:
            return in_cluster_config()
        except ConfigError:
            pass
    default = Path("~/.kube/config").expanduser()
    if default.is_file():
        return kubeconfig_config(str(default), context)
    raise ConfigError(
        "no Kubernetes configuration found: pass --kubeconfig, set KUBECONFIG, "
        "create ~/.kube/config, or run in a pod with a service account"
    )
