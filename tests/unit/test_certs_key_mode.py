"""Issue 19 item 7: private keys are written owner-only from the moment they exist."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from nimctl_runtime.certs import generate_ca


@pytest.fixture
def open_umask() -> Iterator[None]:
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_key_is_created_0600_without_a_later_chmod(
    tmp_path: Path, open_umask: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With chmod disabled, only a file *created* 0600 ends up 0600: a writer that
    # creates the key with default bits and narrows them afterwards is caught here.
    monkeypatch.setattr(Path, "chmod", lambda self, mode: None)
    monkeypatch.setattr(os, "chmod", lambda *a, **k: None)
    cert_path, key_path = generate_ca().write(tmp_path)
    assert _mode(key_path) == 0o600
    assert key_path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert _mode(cert_path) & 0o044  # the certificate is public


def test_an_existing_world_readable_key_is_narrowed_before_it_is_rewritten(
    tmp_path: Path,
) -> None:
    key_path = tmp_path / "tls.key"
    key_path.write_bytes(b"old")
    key_path.chmod(0o644)
    pair = generate_ca()
    pair.write(tmp_path)
    assert _mode(key_path) == 0o600
    assert key_path.read_bytes() == pair.key_pem
