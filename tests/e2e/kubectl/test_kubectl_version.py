"""The Kubernetes version localcluster reports is per cluster and current by default."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster
from localcluster.discovery import newest_schema_minor
from tests.conftest import Kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


async def _server_version(cluster: LocalCluster, binary: str, home: Path) -> dict[str, str]:
    home.mkdir()
    out = await Kubectl(binary, cluster.kubeconfig_path, home).run("version", "-o", "json")
    return dict(json.loads(out.stdout)["serverVersion"])


async def test_default_is_the_newest_minor_with_schemas(
    kubectl_binary: str, tmp_path: Path
) -> None:
    async with LocalCluster(simulator=False) as cluster:
        version = await _server_version(cluster, kubectl_binary, tmp_path / "home")
    assert int(version["minor"]) == newest_schema_minor() >= 34  # DRA's resource.k8s.io/v1
    assert version["gitVersion"] == f"v1.{version['minor']}.0-nimctl"


async def test_version_is_configurable(kubectl_binary: str, tmp_path: Path) -> None:
    async with LocalCluster(simulator=False, kubernetes_version="v1.34.2") as cluster:
        version = await _server_version(cluster, kubectl_binary, tmp_path / "home")
    assert (version["major"], version["minor"], version["gitVersion"]) == (
        "1",
        "34",
        "v1.34.2-nimctl",
    )


def test_a_bad_version_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'1\.x' is not a Kubernetes version"):
        LocalCluster(kubernetes_version="1.x")
    for command in ("local", "localcluster"):
        done = subprocess.run(
            [sys.executable, "-m", "nimctl", command, "--kubernetes-version", "2.0"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=tmp_path,
        )
        assert done.returncode == 2
        assert done.stderr.strip().splitlines()[-1] == (
            f"nimctl {command}: error: argument --kubernetes-version: '2.0' is not a Kubernetes "
            f"version localcluster can report: give one such as 1.34 or v1.35.2, from 1.26 to "
            f"1.{newest_schema_minor()}"
        )


async def test_nodes_report_the_clusters_version(kubectl_binary: str, tmp_path: Path) -> None:
    async with LocalCluster(kubernetes_version="1.35") as cluster:
        home = tmp_path / "home"
        home.mkdir()
        out = await Kubectl(kubectl_binary, cluster.kubeconfig_path, home).run("get", "nodes")
    rows = [line.split() for line in out.stdout.splitlines()[1:]]
    assert rows and all(row[-1] == "v1.35.0" for row in rows)
