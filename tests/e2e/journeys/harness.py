"""Subprocess harness for the journeys: a ``nimctl`` process in a temp dir and kubectl bound to it.

Every wait is bounded; every process started here is stopped (SIGINT, then SIGKILL) on teardown.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "docs" / "examples"
READY_LINE = "Press Ctrl-C to stop."
T = TypeVar("T")


def kubectl_binary() -> str:
    """The kubectl on PATH, or skip the test with the reason."""
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip(
            "kubectl is not installed (install kubectl v1.32, or Debian's kubernetes-client)"
        )
    return binary


def nimctl_argv(*args: str) -> list[str]:
    """The argv of the ``nimctl`` console script from this checkout."""
    return [sys.executable, "-m", "nimctl", *args]


def subprocess_env(home: Path) -> dict[str, str]:
    """A clean environment: own HOME (no kubectl cache leaks), this checkout importable."""
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(REPO))
    env.pop("KUBECONFIG", None)
    env.pop("ENABLE_WEBHOOKS", None)
    return env


def wait_for(probe: Callable[[], T | None], timeout: float, what: str, interval: float = 0.5) -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out waiting for {what} (last: {last!r})")


class NimctlProcess:
    """One ``nimctl`` sub-command running in the background with output captured to files."""

    def __init__(self, workdir: Path, *args: str) -> None:
        self.workdir = workdir
        self.home = workdir / "home"
        self.home.mkdir(parents=True, exist_ok=True)
        self.stdout_path = workdir / "nimctl.stdout"
        self.stderr_path = workdir / "nimctl.stderr"
        with self.stdout_path.open("w") as out, self.stderr_path.open("w") as err:
            self.proc = subprocess.Popen(
                nimctl_argv(*args),
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=subprocess_env(self.home),
                text=True,
            )

    @property
    def stdout(self) -> str:
        return self.stdout_path.read_text()

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def wait_for_output(self, text: str, timeout: float) -> None:
        def seen() -> bool:
            if self.proc.poll() is not None:
                pytest.fail(
                    f"nimctl exited early ({self.proc.returncode}):\n{self.stdout}\n"
                    f"{self.stderr[-3000:]}"
                )
            return text in self.stdout

        wait_for(seen, timeout, f"nimctl to print {text!r}")

    def interrupt(self, timeout: float = 45) -> int:
        """Ctrl-C: SIGINT and wait; SIGKILL if it does not stop in time. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
                pytest.fail(f"nimctl did not stop within {timeout} s of Ctrl-C")
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class Kubectl:
    """kubectl with its own HOME and a kubeconfig; every call bounded."""

    def __init__(self, binary: str, kubeconfig: Path, home: Path) -> None:
        self.binary = binary
        self.kubeconfig = kubeconfig
        self.env = dict(os.environ, KUBECONFIG=str(kubeconfig), HOME=str(home))
        self.env.pop("KUBECTL_EXTERNAL_DIFF", None)

    def run(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        res = subprocess.run(
            [self.binary, *args],
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=timeout,
            check=False,
        )
        if check and res.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}"
            )
        return res

    def apply_generated(self, *create_args: str) -> None:
        """``kubectl create ... --dry-run=client -o yaml | kubectl apply -f -``."""
        manifest = self.run("create", *create_args, "--dry-run=client", "-o", "yaml").stdout
        self.run("apply", "-f", "-", input=manifest)

    def jsonpath(self, *args: str, path: str) -> str:
        return self.run("get", *args, "-o", f"jsonpath={path}", check=False).stdout.strip()

    def gone(self, *args: str) -> bool:
        res = self.run("get", *args, "--ignore-not-found", "-o", "name", check=False)
        return res.returncode == 0 and res.stdout.strip() == ""

    def ngc_namespace(self, namespace: str) -> None:
        """A namespace with the two NGC secrets the examples expect."""
        self.apply_generated("namespace", namespace)
        self.apply_generated(
            "secret", "generic", "ngc-api-secret", "--from-literal=NGC_API_KEY=x", "-n", namespace
        )
        self.apply_generated(
            "secret",
            "docker-registry",
            "ngc-secret",
            "--docker-server=nvcr.io",
            "--docker-username=$oauthtoken",
            "--docker-password=x",
            "-n",
            namespace,
        )


def example(name: str, namespace: str) -> str:
    """An example from docs/examples with its namespace replaced by ``namespace``."""
    text = (EXAMPLES / name).read_text()
    return text.replace("namespace: nim-service", f"namespace: {namespace}")
