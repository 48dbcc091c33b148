"""e2e: ``nimctl local --openshift`` serves what OpenShift serves, as kubectl sees it.

The embedded cluster plays OpenShift: RHCOS GPU nodes on cri-o (``gpu-openshift``),
the ClusterVersion with a Completed update, the SCC API with OpenShift's SCCs and the
Driver Toolkit ImageStream, so a ClusterPolicy applied to it is rendered for OpenShift
(tests/integration/gpu/test_openshift.py checks the operands).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .local import MARKS, kubectl, nimctl_local

pytestmark = MARKS


def test_local_openshift_serves_openshifts_apis_and_rhcos_nodes(tmp_path: Path) -> None:
    with nimctl_local(tmp_path, "--openshift") as (proc, kubeconfig):
        deadline = time.monotonic() + 90
        version = ""
        while time.monotonic() < deadline and not version:
            if proc.poll() is not None:
                pytest.fail(f"nimctl local exited early: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            if kubeconfig.is_file():
                version = kubectl(
                    kubeconfig, "get", "clusterversion", "version",
                    "-o", "jsonpath={.status.history[0].state} {.status.history[0].version}",
                ).stdout.strip()  # fmt: skip
            time.sleep(0.5)
        assert version == "Completed 4.16.3"

        sccs = kubectl(kubeconfig, "get", "scc", "-o", "name")
        assert sccs.returncode == 0, sccs.stderr
        assert "securitycontextconstraints.security.openshift.io/privileged" in sccs.stdout.split()

        stream = kubectl(kubeconfig, "-n", "openshift", "get", "imagestream", "driver-toolkit",
                          "-o", "jsonpath={.spec.tags[*].name}")  # fmt: skip
        assert stream.stdout.split() == ["416.94.202410211619-0", "latest"]

        os_label = r"feature\.node\.kubernetes\.io/system-os_release\.ID"
        query = (
            "jsonpath={.metadata.labels."
            + os_label
            + "} {.status.nodeInfo.containerRuntimeVersion}"
        )
        nodes = kubectl(kubeconfig, "get", "node", "gpu-node-0", "-o", query)
        os_id, runtime = nodes.stdout.split()
        assert (os_id, runtime.split("://")[0]) == ("rhcos", "cri-o")
