"""Helpers for benchmarks that run the operator as its own process.

``nimctl localcluster`` (with the debug API, for its audit log) and ``nimctl run``
each run as a child process, so the operator's CPU and memory are read from
``/proc/<pid>`` apart from the API server's and the benchmark client's. The
operator talks as a ServiceAccount with its own token and kubeconfig, so the
audit log tells its requests apart from the client's.

With ``NIMCTL_BENCH_PROFILE=1`` (or a benchmark's ``--profile``) the operator
runs under :mod:`tests.bench._profiled_run`: cProfile (or, with
``NIMCTL_BENCH_PROFILER=sample``, a stack sampler) is switched on and off by
signals around the window measured, and :func:`print_profile` prints the top 15
functions by cumulative time. With ``NIMCTL_BENCH_PROFILER=py-spy`` the operator
runs unchanged and ``py-spy record`` (when installed: ``pip install py-spy``)
samples it from outside over the same window: no GIL bias (the in-process
sampler only gets the GIL where the main thread releases it, so TLS and socket
calls look several times their share) and no CPU charged to the operator, so
the figures and the profile come from the same run.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import pstats
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcluster.kubeconfig import render_kubeconfig
from nimctl_runtime.client import AlreadyExists, Client

OPERATOR_NS = "nimctl-bench"
OPERATOR_SA = "nimctl-operator"
OPERATOR_USER = f"system:serviceaccount:{OPERATOR_NS}:{OPERATOR_SA}"
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
_TICK = os.sysconf("SC_CLK_TCK")


def profiling_requested(flag: bool) -> bool:
    return flag or os.environ.get("NIMCTL_BENCH_PROFILE", "") not in ("", "0")


def _profiler() -> str:
    return os.environ.get("NIMCTL_BENCH_PROFILER", "cprofile")


def _py_spy() -> str:
    found = shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
    if found is None:
        raise RuntimeError(
            "NIMCTL_BENCH_PROFILER=py-spy: py-spy is not installed (pip install py-spy)"
        )
    return found


def server_profiling_requested() -> bool:
    """``NIMCTL_BENCH_PROFILE_SERVER=1``: py-spy the API server (localcluster) too."""
    return os.environ.get("NIMCTL_BENCH_PROFILE_SERVER", "") not in ("", "0")


def spy_record(pid: int, out: Path) -> subprocess.Popen[bytes]:
    spy = subprocess.Popen(
        [
            _py_spy(),
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "250",
            "--nonblocking",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # attached before the window opens
    return spy


def spy_stop(spy: subprocess.Popen[bytes]) -> None:
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(timeout=60)
    except subprocess.TimeoutExpired:
        spy.kill()


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of *pid* (``/proc/<pid>/stat`` fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def proc_hwm_mb(pid: int) -> float:
    """Peak resident memory (``VmHWM``)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Cluster:
    proc: subprocess.Popen[str]
    kubeconfig: Path
    _spy: subprocess.Popen[bytes] | None = field(default=None)
    profile_out: Path | None = field(default=None)

    def profile_start(self, out: Path) -> None:
        """``py-spy record`` on the API server process (``NIMCTL_BENCH_PROFILE_SERVER=1``)."""
        self.profile_out = out
        self._spy = spy_record(self.proc.pid, out)

    def profile_stop(self) -> None:
        if self._spy is not None:
            spy, self._spy = self._spy, None
            spy_stop(spy)

    def stop(self) -> None:
        self.profile_stop()
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def start_cluster(tmp: Path, profile: str | None = None) -> Cluster:
    """``python -m nimctl localcluster`` with the debug API (audit log), until it serves."""
    kubeconfig = tmp / "cluster" / "kubeconfig"
    kubeconfig.parent.mkdir(parents=True, exist_ok=True)
    cmd = [
        sys.executable,
        "-m",
        "nimctl",
        "--log-level",
        "warning",
        "localcluster",
        "--kubeconfig",
        str(kubeconfig),
        "--enable-debug-api",
    ]
    if profile:
        cmd += ["--profile", profile]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("kubeconfig written"):
            break
    else:
        raise RuntimeError("nimctl localcluster exited before it served")
    return Cluster(proc, kubeconfig)


async def operator_kubeconfig(admin: Client, server: str, ca_pem: bytes, path: Path) -> Path:
    """A ServiceAccount bound to a ``*`` ClusterRole, its TokenRequest token, its kubeconfig."""
    objs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NS}},
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": OPERATOR_SA, "namespace": OPERATOR_NS},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": "nimctl-bench-operator"},
            "rules": [
                {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                {"nonResourceURLs": ["*"], "verbs": ["*"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "nimctl-bench-operator"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "nimctl-bench-operator",
            },
            "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_SA, "namespace": OPERATOR_NS}],
        },
    ]
    for obj in objs:
        with contextlib.suppress(AlreadyExists):
            await admin.create(obj)
    answer = await admin.request(
        "POST",
        f"/api/v1/namespaces/{OPERATOR_NS}/serviceaccounts/{OPERATOR_SA}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 86400},
        },
    )
    path.write_text(render_kubeconfig(server, ca_pem, OPERATOR_SA, answer["status"]["token"]))
    return path


def cluster_endpoint(kubeconfig: Path) -> tuple[str, bytes]:
    """The server URL and CA of a kubeconfig ``nimctl localcluster`` wrote."""
    import base64

    from ruamel.yaml import YAML

    doc = YAML(typ="safe").load(kubeconfig.read_text())
    cluster = doc["clusters"][0]["cluster"]
    return cluster["server"], base64.b64decode(cluster["certificate-authority-data"])


@dataclass
class OperatorProcess:
    proc: subprocess.Popen[bytes]
    profile_out: Path | None
    log: Path
    _profiling: bool = field(default=False)
    _spy: subprocess.Popen[bytes] | None = field(default=None)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def cpu(self) -> float:
        return proc_cpu(self.pid)

    def rss_mb(self) -> float:
        return proc_rss_mb(self.pid)

    def profile_start(self) -> None:
        if self.profile_out is not None and _profiler() == "py-spy":
            self._spy = spy_record(self.pid, self.profile_out)
        elif self.profile_out is not None:
            os.kill(self.pid, signal.SIGUSR1)
            self._profiling = True

    def profile_stop(self) -> None:
        if self._spy is not None:
            spy, self._spy = self._spy, None
            spy_stop(spy)
            return
        if self.profile_out is not None and self._profiling:
            self._profiling = False
            with contextlib.suppress(FileNotFoundError):
                self.profile_out.unlink()
            os.kill(self.pid, signal.SIGUSR2)
            deadline = time.monotonic() + 30
            while not self.profile_out.exists() and time.monotonic() < deadline:
                time.sleep(0.1)

    def stop(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def start_operator(
    kubeconfig: Path, tmp: Path, extra: list[str], *, profile: bool, env: dict[str, str] | None
) -> OperatorProcess:
    """``python -m nimctl run`` (or the profiled wrapper of the same entry point)."""
    profile_out = tmp / "operator.prof" if profile else None
    module = "tests.bench._profiled_run" if profile and _profiler() != "py-spy" else "nimctl"
    cmd = [
        sys.executable,
        "-m",
        module,
        "run",
        "--kubeconfig",
        str(kubeconfig),
        "--health-probe-bind-address",
        "0",
        *extra,
    ]
    full_env = {**os.environ, **(env or {})}
    if profile_out is not None:
        full_env["NIMCTL_BENCH_PROFILE_OUT"] = str(profile_out)
    log = tmp / "operator.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env)
    return OperatorProcess(proc, profile_out, log)


def _print_samples(path: Path, title: str, top: int) -> None:
    data = json.loads(path.read_text())
    total = max(int(data["samples"]), 1)
    idle = sum(n for name, n in data["on_top"] if "select" in name and "selectors.py" in name)
    print(
        f"--- operator profile: {title} ({total} stack samples, 1 per "
        f"{1000 * data['interval']:.0f} ms; {100 * idle / total:.0f}% idle in epoll)"
    )
    print(f"  top {top} by share of samples on the stack (cumulative):")
    for name, n in data["on_stack"][:top]:
        print(f"    {100 * n / total:5.1f}%  {name[-130:]}")
    print(f"  top {top} by share of samples on top (own time; C calls count for their caller):")
    for name, n in data["on_top"][:top]:
        print(f"    {100 * n / total:5.1f}%  {name[-130:]}")


def _print_collapsed(path: Path, title: str, top: int, who: str = "operator") -> None:
    """py-spy's raw output: one ``frame;frame;... count`` line per distinct stack."""
    on_stack: dict[str, int] = {}
    on_top: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        for name in set(frames):
            on_stack[name] = on_stack.get(name, 0) + n
        on_top[frames[-1]] = on_top.get(frames[-1], 0) + n
    total = max(total, 1)
    print(
        f"--- {who} profile: {title} (py-spy, {total} busy samples at 250/s, "
        f"idle not sampled; raw stacks in {path})"
    )
    for label, table in (("on the stack (cumulative)", on_stack), ("on top (own time)", on_top)):
        print(f"  top {top} by share of busy samples {label}:")
        ranked = sorted(table.items(), key=lambda kv: -kv[1])
        for name, n in ranked[:top]:
            print(f"    {100 * n / total:5.1f}%  {name[-130:]}")


def print_server_profile(path: Path | None, title: str, top: int = 15) -> None:
    """The API server's py-spy stacks (see :func:`server_profiling_requested`)."""
    if path is not None and path.exists():
        n = int(os.environ.get("NIMCTL_BENCH_PROFILE_TOP", top))
        _print_collapsed(path, title, n, who="API server")


def print_profile(path: Path | None, title: str, top: int = 15) -> None:
    if path is None or not path.exists():
        return
    if _profiler() == "py-spy":
        _print_collapsed(path, title, int(os.environ.get("NIMCTL_BENCH_PROFILE_TOP", top)))
        return
    if path.read_bytes()[:1] == b"{":
        _print_samples(path, title, top)
        return
    buf = io.StringIO()
    stats = pstats.Stats(str(path), stream=buf)
    stats.sort_stats("cumulative").print_stats(top)
    print(f"--- operator profile: {title} (top {top} by cumulative time)")
    lines = buf.getvalue().splitlines()
    start = next((i for i, ln in enumerate(lines) if "ncalls" in ln), 0)
    for line in lines[start:]:
        if line.strip():
            print("  " + line.rstrip()[:160])
    buf = io.StringIO()
    stats = pstats.Stats(str(path), stream=buf)
    stats.sort_stats("tottime").print_stats(top)
    print(f"--- operator profile: {title} (top {top} by own time)")
    lines = buf.getvalue().splitlines()
    start = next((i for i, ln in enumerate(lines) if "ncalls" in ln), 0)
    for line in lines[start:]:
        if line.strip():
            print("  " + line.rstrip()[:160])


async def audit(admin: Client, user: str = OPERATOR_USER, **filters: str) -> list[dict[str, Any]]:
    """The audit log's records of *user*; ``verb=`` and ``resource=`` filter on the server
    (a poll that needs only those then costs the server little: the polls are in the
    server CPU a benchmark reports)."""
    answer = await admin.request("GET", "/debug/audit", params={"user": user, **filters})
    items: list[dict[str, Any]] = answer["items"]
    return items


def writes(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["verb"] in WRITE_VERBS]


def by_resource(records: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in records:
        res = r["resource"] + (f"/{r['subresource']}" if r["subresource"] else "")
        key = f"{r['verb']} {res}"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


async def wait_for(check: Any, timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if await check():
            return True
        await asyncio.sleep(interval)
    return False
