"""e2e: handing the driver from ClusterPolicy to NVIDIA's NVIDIADriver sample with kubectl.

``nimctl local --gpu-operator`` brings GPU nodes up with NVIDIA's sample
ClusterPolicy managing the driver. The user applies
``docs/examples/nvidiadriver-sample.yaml`` (``kubectl get nvd`` says
``disabled``), lets its upgrades delete GPU pods with an ``emptyDir`` (the demo
NIM's), patches ``useNvidiaDriverCRD: true``, and watches the nodes
(``kubectl get nodes -o custom-columns=...``) take their owner label and come back to ``upgrade-done`` on the NVIDIADriver's
driver, until ``kubectl get nvd`` says ``ready``. One node skips upgrades at
first: there the NVIDIADriver's driver pod stays Pending beside the old one
(``kubectl get pods`` and ``kubectl get events`` show kube-scheduler's
anti-affinity message) and ``kubectl get nvd`` says ``notReady``, until the
skip label is removed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

KUBECTL = "/usr/bin/kubectl"
STATE = "nvidia.com/gpu-driver-upgrade-state"
OWNER = "nvidia.com/gpu-operator.driver.owner"
SKIP = "nvidia.com/gpu-driver-upgrade.skip"
SAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "nvidiadriver-sample.yaml"

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.timeout(500),
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed"),
]


def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def _columns(kubeconfig: Path) -> dict[str, tuple[str, str]]:
    """Per GPU node, its upgrade state and driver owner labels (``<none>`` when unset)."""
    columns = (
        "NAME:.metadata.name,"
        "STATE:.metadata.labels.nvidia\\.com/gpu-driver-upgrade-state,"
        "OWNER:.metadata.labels.nvidia\\.com/gpu-operator\\.driver\\.owner"
    )
    out = _kubectl(kubeconfig, "get", "nodes", "-o", f"custom-columns={columns}").stdout
    rows: dict[str, tuple[str, str]] = {}
    for line in out.splitlines()[1:]:
        cells = line.split()
        if len(cells) == 3 and cells[0].startswith("gpu-node"):
            rows[cells[0]] = (cells[1], cells[2])
    return rows


def _nvd_status(kubeconfig: Path) -> str:
    out = _kubectl(kubeconfig, "get", "nvd", "nvidiadriver-sample").stdout.splitlines()
    return out[1].split()[1] if len(out) > 1 and len(out[1].split()) > 1 else ""


def _wait(check: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(1)
    pytest.fail(f"timed out waiting for {what}")


def test_the_driver_moves_to_nvidias_nvidiadriver_sample(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nimctl", "--log-level", "warning", "local",
         "--gpu-operator", "--disable-webhooks"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
             "HOME": str(tmp_path)},
    )  # fmt: skip
    kubeconfig = tmp_path / ".nimctl" / "kubeconfig"
    try:

        def all_done() -> bool:
            if proc.poll() is not None:
                pytest.fail(f"nimctl local exited early: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            rows = _columns(kubeconfig) if kubeconfig.is_file() else {}
            return bool(rows) and all(state == "upgrade-done" for state, _ in rows.values())

        _wait(all_done, 180, "every GPU node upgrade-done under the ClusterPolicy")
        nodes = sorted(_columns(kubeconfig))

        applied = _kubectl(kubeconfig, "apply", "-f", str(SAMPLE))
        assert applied.returncode == 0, applied.stderr
        _wait(lambda: _nvd_status(kubeconfig) == "disabled", 60, "kubectl get nvd: disabled")

        # The demo NIM keeps its model in an emptyDir: let the upgrade delete such GPU
        # pods (NVIDIADriver's default refuses and fails the node, as NVIDIA's does).
        policy = '{"spec":{"upgradePolicy":{"podDeletion":{"deleteEmptyDir":true}}}}'
        patched = _kubectl(kubeconfig, "patch", "nvd", "nvidiadriver-sample", "--type", "merge",
                           "-p", policy)  # fmt: skip
        assert patched.returncode == 0, patched.stderr
        held = nodes[0]
        labelled = _kubectl(kubeconfig, "label", "node", held, f"{SKIP}=true")
        assert labelled.returncode == 0, labelled.stderr
        patched = _kubectl(kubeconfig, "patch", "clusterpolicy", "cluster-policy", "--type",
                           "merge", "-p", '{"spec":{"driver":{"useNvidiaDriverCRD":true}}}')  # fmt: skip
        assert patched.returncode == 0, patched.stderr

        def pending_beside_the_old_pod() -> bool:
            out = _kubectl(kubeconfig, "get", "pods", "-n", "gpu-operator", "-l",
                           "app.kubernetes.io/component=nvidia-driver", "--field-selector",
                           "status.phase=Pending", "-o",
                           "jsonpath={range .items[*]}{.status.conditions[0].message}{'\\n'}{end}"
                           ).stdout  # fmt: skip
            return "1 node(s) didn't match pod anti-affinity rules" in out

        _wait(pending_beside_the_old_pod, 120, "the held node's new driver pod Pending")
        events = _kubectl(kubeconfig, "get", "events", "-n", "gpu-operator", "--field-selector",
                          "reason=FailedScheduling", "-o",
                          "jsonpath={range .items[*]}{.message}{'\\n'}{end}").stdout  # fmt: skip
        assert "didn't match pod anti-affinity rules" in events, events
        assert _nvd_status(kubeconfig) == "notReady"
        unlabelled = _kubectl(kubeconfig, "label", "node", held, f"{SKIP}-")
        assert unlabelled.returncode == 0, unlabelled.stderr

        def handed_over() -> bool:
            rows = _columns(kubeconfig)
            return sorted(rows) == nodes and all(
                row == ("upgrade-done", "nvidiadriver-sample") for row in rows.values()
            )

        _wait(handed_over, 240, "every node owned by the sample and upgrade-done")
        _wait(lambda: _nvd_status(kubeconfig) == "ready", 120, "kubectl get nvd: ready")
        pods = _kubectl(kubeconfig, "get", "pods", "-n", "gpu-operator", "-l",
                        "app.kubernetes.io/component=nvidia-driver", "-o",
                        "jsonpath={range .items[*]}{.metadata.ownerReferences[0].name}{'\\n'}{end}")  # fmt: skip
        owners = [line for line in pods.stdout.splitlines() if line]
        assert len(owners) == len(nodes), pods.stdout
        assert all(o.startswith("nvidia-gpu-driver-") for o in owners), owners
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
