"""Serving certificate that follows its files (cert-manager rotation without restarts).

Like controller-runtime's ``certwatcher``: the key pair is re-read when the
files change (polled, default every 10 s, comparing content digests so that a
Secret volume's symlink swap is seen), and new TLS handshakes use the new pair
at once. The listening socket is never restarted: the same ``SSLContext`` is
reloaded in place, which OpenSSL applies to every later connection. A broken
pair (half-written files, a key that does not match) is logged and the last good
pair keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import ssl
from pathlib import Path

from nimctl_runtime.logsetup import get_logger

log = get_logger("webhook.certwatcher")


class CertWatcher:
    """Holds an ``SSLContext`` for ``cert_path``/``key_path`` and keeps it current."""

    def __init__(self, cert_path: str | Path, key_path: str | Path, interval: float = 10.0) -> None:
        self.cert_path = Path(cert_path)
        self.key_path = Path(key_path)
        self.interval = interval
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.set_alpn_protocols(["http/1.1"])
        self._digest = b""
        self.reloads = 0
        self.rejected = 0  # changed pairs that failed to load (the old pair kept serving)

    def _current_digest(self) -> bytes:
        h = hashlib.sha256()
        h.update(self.cert_path.read_bytes())
        h.update(b"\0")
        h.update(self.key_path.read_bytes())
        return h.digest()

    def load(self) -> None:
        """Read the pair now; raise with the file names if it cannot be used."""
        try:
            digest = self._current_digest()
            self.context.load_cert_chain(self.cert_path, self.key_path)
        except (OSError, ssl.SSLError) as e:
            raise RuntimeError(
                f"cannot load webhook serving certificate {self.cert_path}"
                f" / key {self.key_path}: {e}"
            ) from e
        self._digest = digest
        self.reloads += 1

    def reload_if_changed(self) -> bool:
        """Reload when the files' contents changed; keep the old pair on error."""
        try:
            digest = self._current_digest()
        except OSError as e:
            log.warning("certificate files unreadable, keeping the current pair", error=str(e))
            return False
        if digest == self._digest:
            return False
        try:
            self.context.load_cert_chain(self.cert_path, self.key_path)
        except (OSError, ssl.SSLError) as e:
            self.rejected += 1
            log.warning("new certificate pair rejected, keeping the current one", error=str(e))
            return False
        self._digest = digest
        self.reloads += 1
        log.info("webhook serving certificate reloaded", cert=str(self.cert_path))
        return True

    async def watch(self, stop: asyncio.Event) -> None:
        """Poll until *stop* is set."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.interval)
            if not stop.is_set():
                self.reload_if_changed()
