"""e2e: a driver upgrade driven as a user would, watched with ``kubectl get nodes -L``.

``nimctl local --gpu-operator`` brings bare GPU nodes up with NVIDIA's sample
ClusterPolicy (``autoUpgrade: true``); every node then shows ``upgrade-done``
in the ``GPU-DRIVER-UPGRADE-STATE`` column. A ``kubectl patch`` of
``driver.version`` rolls the nodes through NVIDIA's states, one at a time
(``maxParallelUpgrades: 1``), back to ``upgrade-done``; ``kubectl describe
clusterpolicy`` shows the ``DriverUpgrade`` condition throughout.
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
LABEL = "nvidia.com/gpu-driver-upgrade-state"

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.timeout(400),
    pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed"),
]


def _kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip


def _states(kubeconfig: Path) -> dict[str, str]:
    """The GPU-DRIVER-UPGRADE-STATE column of ``kubectl get nodes -L``, per GPU node."""
    out = _kubectl(kubeconfig, "get", "nodes", "-L", LABEL).stdout.splitlines()
    if not out:
        return {}
    header = out[0].split()
    assert header[-1] == "GPU-DRIVER-UPGRADE-STATE", header
    states: dict[str, str] = {}
    for line in out[1:]:
        cells = line.split()
        if cells and cells[0].startswith("gpu-node"):
            states[cells[0]] = cells[-1] if len(cells) == len(header) else ""
    return states


def test_driver_upgrade_shows_in_kubectl_get_nodes(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "nimctl", "--log-level", "warning", "local",
         "--gpu-operator", "--disable-webhooks"],
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
             "HOME": str(tmp_path)},
    )  # fmt: skip
    kubeconfig = tmp_path / ".nimctl" / "kubeconfig"
    try:
        deadline = time.monotonic() + 180
        states: dict[str, str] = {}
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"nimctl local exited early: {proc.stderr.read()[-3000:]}")  # type: ignore[union-attr]
            if kubeconfig.is_file():
                states = _states(kubeconfig)
                if states and all(s == "upgrade-done" for s in states.values()):
                    break
            time.sleep(1)
        assert states and all(s == "upgrade-done" for s in states.values()), states

        patched = _kubectl(kubeconfig, "patch", "clusterpolicy", "cluster-policy", "--type",
                           "merge", "-p", '{"spec":{"driver":{"version":"595.91.08"}}}')  # fmt: skip
        assert patched.returncode == 0, patched.stderr
        seen: dict[str, set[str]] = {name: set() for name in states}
        described = ""
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            states = _states(kubeconfig)
            for name, state in states.items():
                seen.setdefault(name, set()).add(state)
            in_progress = [
                s for s in states.values() if s not in ("upgrade-done", "upgrade-required")
            ]
            assert len(in_progress) <= 1, f"maxParallelUpgrades 1: {states}"
            if in_progress and not described:
                described = _kubectl(
                    kubeconfig, "describe", "clusterpolicy", "cluster-policy"
                ).stdout
            if all(len(s) > 1 for s in seen.values()) and all(
                s == "upgrade-done" for s in states.values()
            ):
                break
            time.sleep(0.5)
        assert all(s == "upgrade-done" for s in states.values()), states
        # Every node left upgrade-done and came back; polling every 0.5 s can miss a
        # brief state on one node, so the states are checked over all nodes together.
        assert all(s - {"upgrade-done"} for s in seen.values()), seen
        assert "upgrade-required" in set().union(*seen.values()), seen
        assert "DriverUpgrade" in described and "UpgradeInProgress" in described, described
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
