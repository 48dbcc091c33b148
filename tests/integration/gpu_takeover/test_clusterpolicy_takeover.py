"""A ClusterPolicy cluster NVIDIA's operator set up, handed to nimctl: no operand restarts.

The cluster holds, before nimctl starts, the chart's default ClusterPolicy over
two GPU nodes labelled as NVIDIA's node labelling leaves them, and the operand
DaemonSets NVIDIA's ClusterPolicy controller makes for that policy, built by
``nvidia_clusterpolicy`` from NVIDIA's assets and transforms (not from nimctl's
renders), with the pods the DaemonSet controller started from them. Then nimctl
starts and is waited on until it has adopted each DaemonSet (its own hash
annotation) and settled. Counted (``ledger.Ledger``): pod-template changes,
pods deleted, nodes entering a driver upgrade; all must be 0.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from localcluster import LocalCluster
from manifests.hashing import LAST_APPLIED_HASH_ANNOTATION
from nimctl.operator import install_crds
from nimctl_runtime.client import Client
from nimctl_runtime.meta import dig
from tests.integration.controllers.harness import reconciles, settle, start_operator, wait_for
from tests.integration.gpu_nvidiadriver.env import POLICY_SAMPLE
from tests.integration.gpu_takeover import nvidia_clusterpolicy
from tests.integration.gpu_takeover.ledger import UPGRADE_DONE, UPGRADE_STATE, Ledger

pytestmark = pytest.mark.timeout(180)

NS = "gpu-operator"
DEPLOY = (
    "driver",
    "gpu-feature-discovery",
    "container-toolkit",
    "device-plugin",
    "dcgm",
    "dcgm-exporter",
    "node-status-exporter",
    "operator-validator",
    "mig-manager",
)


def _profile() -> dict[str, Any]:
    """Two GPU nodes as NVIDIA's operator left them: ``gpu.present`` and the deploy labels
    of its node labelling, and ``upgrade-done`` from its upgrade controller (the default
    policy has ``driver.upgradePolicy.autoUpgrade: true``)."""
    return {
        "name": "takeover",
        "pools": [
            {
                "namePrefix": "gpu",
                "count": 2,
                "labels": {
                    "feature.node.kubernetes.io/pci-10de.present": "true",
                    "nvidia.com/gpu.present": "true",
                    **{f"nvidia.com/gpu.deploy.{d}": "true" for d in DEPLOY},
                    UPGRADE_STATE: UPGRADE_DONE,
                },
                "annotations": {
                    "localcluster.nimctl.io/gpus": "1",
                    "localcluster.nimctl.io/gpu-product": "NVIDIA-L40S",
                    "localcluster.nimctl.io/driver-install-seconds": "1",
                },
            }
        ],
    }


NO_PODS = ("nvidia-device-plugin-mps-control-daemon",)
"""Its pods need ``nvidia.com/mps.capable`` (an MPS sharing config), which these nodes lack:
only its template is compared."""


@pytest.mark.parametrize(
    "node_status_exporter", [False, True], ids=["defaults", "node-status-exporter"]
)
async def test_clusterpolicy_takeover_restarts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, node_status_exporter: bool
) -> None:
    """The chart's default ClusterPolicy (and the same with ``nodeStatusExporter.enabled``)."""
    monkeypatch.setitem(os.environ, "OPERATOR_NAMESPACE", NS)
    cluster = LocalCluster(workdir=tmp_path)
    cluster.simulator_options = {"profile": _profile(), "speed": 1.0}
    async with cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            await install_crds(admin)
            await admin.create({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": NS}})  # fmt: skip
            policy_obj = YAML(typ="safe").load(POLICY_SAMPLE.read_text())
            policy_obj["spec"]["nodeStatusExporter"]["enabled"] = node_status_exporter
            policy = await admin.create(policy_obj)
            theirs = nvidia_clusterpolicy.daemonsets(policy, NS)
            accounts = {ds["spec"]["template"]["spec"]["serviceAccountName"] for ds in theirs}
            for sa in sorted(accounts):
                await admin.create({"apiVersion": "v1", "kind": "ServiceAccount",
                                    "metadata": {"name": sa, "namespace": NS}})  # fmt: skip
            for ds in theirs:
                await admin.create(ds)
            names = [ds["metadata"]["name"] for ds in theirs]

            async def pods_everywhere() -> bool:
                pods = (await admin.list("v1", "Pod", NS))["items"]
                return all(
                    sum(1 for p in pods if p["metadata"]["labels"].get("app") == n) == 2
                    for n in names
                    if n not in NO_PODS
                )

            await wait_for(pods_everywhere, timeout=60, interval=0.2)
            async with Ledger.before(admin, NS) as ledger:
                upgrade_passes = reconciles("upgrade-controller")
                operator = await start_operator(kubeconfig)
                try:

                    async def adopted() -> bool:
                        for name in names:
                            ds = await admin.get("apps/v1", "DaemonSet", name, NS)
                            mark = (dig(ds, "metadata", "annotations") or {}).get(
                                LAST_APPLIED_HASH_ANNOTATION
                            )
                            if mark in (None, nvidia_clusterpolicy.NVIDIAS_HASH):
                                return False
                        return True

                    await wait_for(adopted, timeout=60, interval=0.2)

                    async def upgrade_pass() -> bool:
                        return reconciles("upgrade-controller") > upgrade_passes

                    await wait_for(upgrade_pass, timeout=60, interval=0.1)
                    await settle(operator, timeout=60)
                    counts = await ledger.after(operator.client.writes)
                finally:
                    await operator.shutdown()
            print(f"clusterpolicy ({len(names)} DaemonSets): {counts.summary()}")
            assert counts.template_changes == [], "\n".join(counts.template_changes)
            assert counts.restarts == [], counts.restarts
            assert counts.upgrades == [], counts.upgrades
            for name in names:
                ds = await admin.get("apps/v1", "DaemonSet", name, NS)
                (owner,) = ds["metadata"]["ownerReferences"]
                assert (owner["kind"], owner["uid"], owner["controller"]) == (
                    "ClusterPolicy",
                    policy["metadata"]["uid"],
                    True,
                )
