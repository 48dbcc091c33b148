"""Config lookup order, kubeconfig contexts, in-cluster token rotation, token bucket, errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from nimctl_runtime.client import (
    Backoff,
    ConfigError,
    Conflict,
    TokenBucket,
    in_cluster_config,
    load_config,
)
from nimctl_runtime.client.errors import AlreadyExists, ServerTimeout, from_status

KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: one
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
- name: c2
  cluster: {server: "https://10.0.0.2:6443"}
users:
- name: u1
  user: {token: tok-one}
- name: u2
  user: {token: tok-two}
contexts:
- name: one
  context: {cluster: c1, user: u1}
- name: two
  context: {cluster: c2, user: u2}
"""


@pytest.fixture
def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    path.write_text(KUBECONFIG)
    return path


async def test_kubeconfig_current_context_and_explicit_context(kubeconfig, monkeypatch):
    monkeypatch.delenv("KUBECONFIG", raising=False)
    config = load_config(str(kubeconfig))
    await config.resolve()
    assert config.host == "https://127.0.0.1:6443"
    assert await config.authorization() == "Bearer tok-one"
    assert config.verify_ssl is False
    other = load_config(str(kubeconfig), context="two")
    assert other.host == "https://10.0.0.2:6443"
    await other.resolve()
    assert await other.authorization() == "Bearer tok-two"


def test_kubeconfig_env_is_used_when_no_flag(kubeconfig, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
    assert load_config().host == "https://127.0.0.1:6443"


def test_unknown_context_and_missing_files_are_actionable(kubeconfig, monkeypatch, tmp_path):
    with pytest.raises(ConfigError):
        load_config(str(kubeconfig), context="nope")
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "missing"))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="--kubeconfig"):
        load_config()


async def test_in_cluster_token_is_reread_when_rotated(tmp_path):
    (tmp_path / "token").write_text("first\n")
    (tmp_path / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")
    config = in_cluster_config(
        tmp_path, {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert config.host == "https://10.96.0.1:443"
    assert await config.authorization() == "Bearer first"
    (tmp_path / "token").write_text("second\n")
    assert await config.authorization() == "Bearer first"  # not yet due
    config._token_read_at -= 61
    assert await config.authorization() == "Bearer second"


def test_in_cluster_needs_service_env(tmp_path):
    with pytest.raises(ConfigError, match="KUBERNETES_SERVICE_HOST"):
        in_cluster_config(tmp_path, {})


async def test_token_bucket_allows_burst_then_throttles():
    bucket = TokenBucket(qps=0.001, burst=3)
    assert [bucket.try_acquire() for _ in range(4)] == [True, True, True, False]


def test_backoff_doubles_with_jitter_up_to_cap():
    backoff = Backoff(0.8, cap=30.0, jitter=1.0, reset_after=None)
    delays = [backoff.next_delay() for _ in range(10)]
    nominal = [min(30.0, 0.8 * 2**i) for i in range(10)]
    assert all(n <= d < 2 * n for d, n in zip(delays, nominal, strict=True))


def test_from_status_maps_reasons_and_codes():
    assert isinstance(
        from_status(409, {"kind": "Status", "reason": "AlreadyExists"}), AlreadyExists
    )
    assert isinstance(from_status(409, None), Conflict)
    assert isinstance(from_status(504, None), ServerTimeout)
    err = from_status(
        429,
        {
            "kind": "Status",
            "reason": "TooManyRequests",
            "code": 429,
            "details": {"retryAfterSeconds": 3},
        },
    )
    assert err.retry_after == 3.0
