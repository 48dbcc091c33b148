"""Whether the API server can be reached: failures logged with server and reason; readyz.

A kubeconfig whose CA does not sign the server's certificate used to make the
operator wait silently: every request was retried at debug level, and nothing said
why nothing happened. :class:`ConnectionHealth` sits in the Client: each
connection failure (TLS verification, handshake, refused, DNS) is classified
into a reason a user can act on and logged at warning level with the server, the
first time and then at most every ``log_interval`` seconds while it persists (with
the number of failures since the last line); any answer from the server clears it
and says so. The manager serves :meth:`check` as the ``apiServer`` readyz check,
so ``/readyz/apiServer`` names the reason. Retrying (with backoff) stays the
caller's business: a fixed CA or a server back up is picked up without a restart.

:func:`certificate_problem` is for start-up: a kubeconfig whose CA does not
sign the server's certificate will not start working by itself, so ``nimctl
run`` asks once (a few attempts, bounded) and exits with the reason instead of
retrying forever.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from typing import TYPE_CHECKING

import aiohttp

from nimctl_runtime.client.http1 import ConnectFailed
from nimctl_runtime.logsetup import get_logger

if TYPE_CHECKING:
    from nimctl_runtime.client.config import RestConfig

log = get_logger("nimctl.client")

LOG_INTERVAL = 30.0


def describe(err: BaseException) -> str:
    """A one-line reason for a failed connection, with what to check for TLS failures."""
    if isinstance(err, ConnectFailed):
        cause = err.os_error
        if isinstance(cause, ssl.SSLCertVerificationError):
            detail = cause.verify_message or str(cause)
            return (
                f"TLS certificate verification failed: {detail} (check the kubeconfig's "
                "certificate-authority-data / certificate-authority and the server name)"
            )
        if isinstance(cause, ssl.SSLError):
            return f"TLS handshake failed: {cause}"
        return f"cannot connect: {cause}"
    if isinstance(err, aiohttp.ClientConnectorCertificateError):
        cert_error = err.certificate_error
        detail = getattr(cert_error, "verify_message", "") or str(cert_error)
        return (
            f"TLS certificate verification failed: {detail} (check the kubeconfig's "
            "certificate-authority-data / certificate-authority and the server name)"
        )
    if isinstance(err, aiohttp.ClientSSLError | ssl.SSLError):
        cause = getattr(err, "os_error", None) or err
        return f"TLS handshake failed: {cause}"
    if isinstance(err, aiohttp.ClientConnectorError):
        return f"cannot connect: {err.os_error or err}"
    return f"{type(err).__name__}: {err}"


class ConnectionHealth:
    """The state of the connection to one API server (see the module docstring)."""

    def __init__(self, server: str = "", *, log_interval: float = LOG_INTERVAL) -> None:
        self.server = server
        self.log_interval = log_interval
        self.reason: str | None = None
        self.failures = 0
        self._unlogged = 0
        self._logged_reason: str | None = None
        self._logged_at = 0.0

    def failed(self, err: BaseException, *, request: str = "") -> str:
        """Record a failed connection; logs when the reason is new or the interval passed."""
        reason = describe(err)
        self.reason = reason
        self.failures += 1
        self._unlogged += 1
        now = time.monotonic()
        if reason != self._logged_reason or now - self._logged_at >= self.log_interval:
            log.warning(
                "cannot reach the API server; retrying with backoff",
                server=self.server,
                reason=reason,
                request=request,
                failures=self._unlogged,
            )
            self._logged_reason = reason
            self._logged_at = now
            self._unlogged = 0
        return reason

    def succeeded(self) -> None:
        """The server answered (any HTTP status): the connection works."""
        if self.reason is None:
            return
        log.info("the API server is reachable again", server=self.server, failures=self.failures)
        self.reason = None
        self.failures = 0
        self._unlogged = 0
        self._logged_reason = None

    def check(self) -> None:
        """A readyz check: raises with the reason while the server cannot be reached."""
        if self.reason is not None:
            raise RuntimeError(f"{self.server}: {self.reason}")


def _is_certificate_error(err: BaseException) -> bool:
    if isinstance(err, aiohttp.ClientConnectorCertificateError):
        return True
    cause = getattr(err, "os_error", None) or err.__cause__
    return isinstance(cause, ssl.SSLCertVerificationError)


async def certificate_problem(
    config: RestConfig, *, attempts: int = 3, interval: float = 1.0, attempt_seconds: float = 10.0
) -> str | None:
    """Why the API server's certificate does not verify, when it failed on every attempt.

    Each attempt is one ``GET /version`` (any HTTP answer, 401 included, means
    TLS works); ``None`` when an attempt got through or failed for another
    reason (refused, DNS, timeout: the client retries those itself). Bounded by
    ``attempts * (attempt_seconds + interval)`` seconds.
    """
    if not config.host.startswith("https"):
        return None
    await config.resolve()
    context = await asyncio.to_thread(config.ssl_context)
    reason: str | None = None
    for attempt in range(attempts):
        if attempt:
            await asyncio.sleep(interval)
        connector = aiohttp.TCPConnector(ssl=context)
        try:
            async with (
                aiohttp.ClientSession(connector=connector) as session,
                session.get(
                    config.host.rstrip("/") + "/version",
                    timeout=aiohttp.ClientTimeout(total=attempt_seconds),
                    server_hostname=config.tls_server_name,
                ) as resp,
            ):
                await resp.read()
            return None
        except aiohttp.ClientError as err:
            if not _is_certificate_error(err):
                return None
            reason = describe(err)
        except (TimeoutError, OSError):
            return None
    return reason
