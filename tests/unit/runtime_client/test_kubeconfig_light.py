"""Issue 18 (memory): a kubeconfig is loaded without kubernetes_asyncio's generated API client.

Run in a fresh interpreter each, since the test process may have imported
kubernetes_asyncio already: loading a kubeconfig must not import the generated
models (~37 MB resident), and the complete package must still import and work
afterwards in the same process.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: one
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u1
  user: {token: secret-token}
contexts:
- name: one
  context: {cluster: c1, user: u1}
"""


def _run(tmp_path: Path, body: str) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    code = textwrap.dedent(
        f"""
        import asyncio, sys
        from nimctl_runtime.client.config import load_config
        config = load_config({str(path)!r})
        asyncio.run(config.resolve())
        """
    ) + textwrap.dedent(body)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_kubeconfig_loads_without_the_generated_models(tmp_path: Path) -> None:
    out = _run(
        tmp_path,
        """
        print(config.host, config.token)
        print("models loaded:", "kubernetes_asyncio.client.models" in sys.modules)
        """,
    )
    assert "https://127.0.0.1:6443 Bearer secret-token" in out
    assert "models loaded: False" in out


def test_the_full_client_still_imports_and_builds_from_a_kubeconfig_afterwards(
    tmp_path: Path,
) -> None:
    out = _run(
        tmp_path,
        f"""
        from kubernetes_asyncio import client, config as kconfig
        async def build():
            api = await kconfig.new_client_from_config({str(tmp_path / "kubeconfig")!r})
            print(type(api).__name__, api.configuration.host, client.CoreV1Api.__name__)
            await api.close()
        asyncio.run(build())
        """,
    )
    assert "ApiClient https://127.0.0.1:6443 CoreV1Api" in out
