"""localcluster answers kubectl like a real API server (k3s, through testcontainers).

The same CRDs and manifests go to a k3s container and to localcluster; kubectl must
print the same thing for both (accepted objects, and NVIDIA's validation messages
for rejected ones). A difference is a bug in localcluster. The kubectl scenario of
the localcluster suite (``tests/e2e/kubectl/scenario.py``: create deployment, job,
cronjob, service and ingress, expose, rollout status and undo, apply twice,
explain, create token, drain --dry-run=server) runs on both too, step by step.
Needs a container engine; without one the module skips and says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import shutil
import subprocess
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.kubectl.scenario import STEPS, run_step

pytestmark = [pytest.mark.k3s, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[3]


def _engine_problem() -> str | None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # any failure means no usable engine
        return f"{type(exc).__name__}: {str(exc)[:160]}"
    return None


def _kubectl(
    kubeconfig: Path, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("kubectl")
    assert binary is not None
    return subprocess.run(
        [binary, "--kubeconfig", str(kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _install_crds(kubeconfig: Path, crd_dir: Path) -> None:
    res = _kubectl(kubeconfig, "apply", "--server-side", "-f", str(crd_dir))
    assert res.returncode == 0, res.stderr
    res = _kubectl(
        kubeconfig, "wait", "--for=condition=established", "crd", "--all", "--timeout=90s"
    )
    assert res.returncode == 0, res.stderr


@pytest.fixture(scope="module")
def crd_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from api.crdgen import main

    out = tmp_path_factory.mktemp("crds")
    assert main(str(out)) == 0
    return out


@pytest.fixture(scope="module")
def k3s(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Path]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH")
    problem = _engine_problem()
    if problem is not None:
        pytest.skip(f"needs a container engine to start k3s through testcontainers ({problem})")
    from testcontainers.community.k3s import K3SContainer

    crd_dir: Path = request.getfixturevalue("crd_dir")

    with K3SContainer() as container:
        path = tmp_path_factory.mktemp("k3s") / "kubeconfig"
        path.write_text(container.config_yaml())
        _install_crds(path, crd_dir)
        yield path


@contextlib.contextmanager
def _local_cluster(*, simulator: bool) -> Iterator[Path]:
    """A localcluster served from its own thread, so blocking kubectl calls can reach it."""
    import threading

    from localcluster import LocalCluster

    loop = asyncio.new_event_loop()
    cluster = LocalCluster(simulator=simulator)
    loop.run_until_complete(cluster.start())
    runner = asyncio.Event()
    thread = threading.Thread(target=loop.run_until_complete, args=(runner.wait(),), daemon=True)
    thread.start()
    try:
        yield Path(cluster.kubeconfig_path)
    finally:
        loop.call_soon_threadsafe(runner.set)
        thread.join(10)
        loop.run_until_complete(cluster.stop())
        loop.close()


@pytest.fixture(scope="module")
def local(crd_dir: Path, k3s: Path) -> Iterator[Path]:
    with _local_cluster(simulator=False) as path:
        _install_crds(path, crd_dir)
        yield path


@pytest.fixture(scope="module")
def local_sim(k3s: Path) -> Iterator[Path]:
    """A localcluster with its simulator (the scenario rolls Deployments out)."""
    with _local_cluster(simulator=True) as path:
        yield path


def _normalise(text: str) -> str:
    """Drop what legitimately differs between servers (addresses, timings)."""
    return re.sub(r"https://127\.0\.0\.1:\d+|https://[\d.]+:\d+", "SERVER", text).strip()


CASES = {
    "minimal example": (ROOT / "docs/examples/nim-minimal.yaml").read_text(),
    "negative replicas": textwrap.dedent(
        """
        apiVersion: apps.nvidia.com/v1alpha1
        kind: NIMService
        metadata: {name: bad-replicas, namespace: nim-service}
        spec:
          image: {repository: nvcr.io/nim/meta/llama-3.1-8b-instruct, tag: "1.3.3"}
          storage: {emptyDir: {}}
          replicas: -1
        """
    ),
    "replicas with autoscaling (CEL)": textwrap.dedent(
        """
        apiVersion: apps.nvidia.com/v1alpha1
        kind: NIMService
        metadata: {name: bad-scale, namespace: nim-service}
        spec:
          image: {repository: nvcr.io/nim/meta/llama-3.1-8b-instruct, tag: "1.3.3"}
          storage: {emptyDir: {}}
          replicas: 2
          scale: {enabled: true, hpa: {maxReplicas: 3}}
        """
    ),
    "two cache sources (CEL)": textwrap.dedent(
        """
        apiVersion: apps.nvidia.com/v1alpha1
        kind: NIMCache
        metadata: {name: bad-source, namespace: nim-service}
        spec:
          source:
            ngc: {modelPuller: "nvcr.io/nim/x:1", pullSecret: s, authSecret: a}
            hf: {endpoint: "https://huggingface.co", namespace: meta, modelName: m,
                 authSecret: a, modelPuller: p, pullSecret: s}
          storage: {pvc: {create: true, size: 10Gi}}
        """
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_kubectl_sees_the_same_answer(case: str, k3s: Path, local: Path) -> None:
    answers = []
    for kubeconfig in (k3s, local):
        _kubectl(kubeconfig, "create", "namespace", "nim-service")
        res = _kubectl(kubeconfig, "apply", "-f", "-", stdin=CASES[case])
        answers.append((res.returncode, _normalise(res.stdout), _normalise(res.stderr)))
    assert answers[1] == answers[0], f"localcluster differs from k3s for {case!r}"


def test_kubectl_scenario_steps_match_k3s(k3s: Path, local_sim: Path) -> None:
    """The localcluster kubectl suite's steps (``scenario.STEPS``), on both servers."""

    def runner(kubeconfig: Path) -> Callable[[tuple[str, ...], str | None], tuple[int, str, str]]:
        def run(args: tuple[str, ...], stdin: str | None) -> tuple[int, str, str]:
            res = _kubectl(kubeconfig, *args, stdin=stdin)
            return res.returncode, res.stdout, res.stderr

        return run

    differences = []
    for step in STEPS:
        on_k3s = run_step(step, runner(k3s))
        on_local = run_step(step, runner(local_sim))
        if on_local != on_k3s:
            differences.append(f"{step.name}: k3s {on_k3s!r}, localcluster {on_local!r}")
    assert not differences, "localcluster differs from k3s:\n" + "\n".join(differences)
