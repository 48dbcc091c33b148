"""An NVIDIADriver cluster NVIDIA's operator set up, handed to nimctl: no driver restarts.

For each case of NVIDIA's render goldens the cluster holds, before nimctl starts,
what NVIDIA's operator leaves behind (``nvidia_driver.nvidia_objects``: the
golden's objects with the fixture-injected values replaced by what the live
operator sets, as ``nvidia_driver.REPLACEMENTS`` lists), the driver pods the
DaemonSet controller started from them, and GPU nodes labelled as NVIDIA's
upgrade controller leaves them (``upgrade-done``). Then nimctl starts with the
same ClusterPolicy and NVIDIADriver and is waited on until it has adopted the
DaemonSet (its own hash annotation) and settled. Counted
(``ledger.Ledger``): DaemonSet pod-template changes, pods deleted, nodes
entering a driver upgrade. All three must be 0.
"""

from __future__ import annotations

import io
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver
from localcluster import LocalCluster
from manifests.hashing import LAST_APPLIED_HASH_ANNOTATION
from nimctl.operator import install_crds
from nimctl_runtime.client import Client, NotFound
from nimctl_runtime.meta import Obj, dig
from platforms.gpu.nvidiadriver_cli import render_drivers
from tests.integration.controllers.harness import reconciles, settle, start_operator, wait_for
from tests.integration.gpu_nvidiadriver.env import sample_policy
from tests.integration.gpu_takeover import nvidia_driver
from tests.integration.gpu_takeover.ledger import UPGRADE_DONE, UPGRADE_STATE, Counts, Ledger
from tests.unit.gpu_nvidiadriver import goldens

pytestmark = [
    pytest.mark.timeout(180),
    pytest.mark.skipif(
        not goldens.cases(),
        reason=f"NVIDIA's render goldens are not here ({goldens.GOLDENS} is absent)",
    ),
]

NS = "gpu-operator"
ND = "nvidia.com/v1alpha1"
CASES = [
    "driver-minimal",
    "driver-precompiled",
    "driver-gds",
    "driver-gdrcopy",
    "driver-rdma",
    "driver-rdma-hostmofed",
    "driver-secret-env",
    "driver-hostnetwork",
    "driver-full-spec",
    "driver-additional-configs",
    "driver-vgpu-host-manager",
    "driver-vgpu-licensing",
    "driver-vgpu-licensing-secret",
]
GENERATED_LABELS = (
    "feature.node.kubernetes.io/kernel-version",
    "feature.node.kubernetes.io/system-os_release",
    "kubernetes.io/hostname",
)


def _load(path: Path) -> list[Obj]:
    return [d for d in YAML(typ="safe").load_all(path.read_text()) if isinstance(d, dict)]


def _profile(node: Obj, workload: str | None = None) -> dict[str, Any]:
    """One simulated node shaped as the case's node, as NVIDIA's operator left it: its
    upgrade controller labelled it ``upgrade-done`` and, with ``autoUpgrade``, annotated
    ``nvidia.com/gpu-driver-upgrade-enabled``; a vGPU host carries its ``gpu.workload.config``."""
    labels: dict[str, str] = node["metadata"]["labels"]
    return {
        "name": "takeover",
        "pools": [
            {
                "namePrefix": "gpu-node",
                "count": 1,
                "osID": labels[nvidia_driver.OS_ID],
                "osVersionID": labels[nvidia_driver.OS_VERSION],
                "kernelVersion": labels[nvidia_driver.KERNEL],
                "labels": {
                    **{k: v for k, v in labels.items() if not k.startswith(GENERATED_LABELS)},
                    UPGRADE_STATE: UPGRADE_DONE,
                    **({"nvidia.com/gpu.workload.config": workload} if workload else {}),
                },
                "annotations": {
                    "localcluster.nimctl.io/gpus": "1",
                    "localcluster.nimctl.io/gpu-product": "NVIDIA-L40S",
                    "localcluster.nimctl.io/driver-install-seconds": "1",
                    "nvidia.com/gpu-driver-upgrade-enabled": "true",
                },
            }
        ],
    }


def _our_digest(cr: Obj, nodes: list[Obj], policy: Obj) -> str:
    """DRIVER_CONFIG_DIGEST for the live inputs (NVIDIA's formula: see REPLACEMENTS)."""
    objects = render_drivers(
        [NVIDIADriver.model_validate(cr)], [*nodes, policy], err=io.StringIO(), namespace=NS
    )
    ds = next(o for o in objects if o["kind"] == "DaemonSet")
    env = ds["spec"]["template"]["spec"]["containers"][0]["env"]
    return str(next(e["value"] for e in env if e["name"] == "DRIVER_CONFIG_DIGEST"))


async def _exists(admin: Client, kind: str, name: str) -> bool:
    try:
        await admin.get("v1", kind, name, NS)
    except NotFound:
        return False
    return True


async def _prerequisites(admin: Client, cr: Obj) -> None:
    """What the user had made for NVIDIA's operator: the secret secretEnv names, the
    priority class the spec names, the licensing ConfigMap or Secret."""
    if secret := dig(cr, "spec", "secretEnv"):
        await admin.create({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": secret, "namespace": NS},
                            "stringData": {"EXAMPLE": "1"}})  # fmt: skip
    licensing = {"gridd.conf": "FeatureType=1\n", "client_configuration_token.tok": "token"}
    if (name := dig(cr, "spec", "licensingConfig", "name")) and not await _exists(
        admin, "ConfigMap", name
    ):
        await admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                            "metadata": {"name": name, "namespace": NS}, "data": licensing})  # fmt: skip
    if (name := dig(cr, "spec", "licensingConfig", "secretName")) and not await _exists(
        admin, "Secret", name
    ):
        await admin.create({"apiVersion": "v1", "kind": "Secret",
                            "metadata": {"name": name, "namespace": NS},
                            "stringData": licensing})  # fmt: skip
    if (priority := dig(cr, "spec", "priorityClassName")) not in (None, "system-node-critical"):
        await admin.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                            "metadata": {"name": priority}, "value": 1000})  # fmt: skip


@asynccontextmanager
async def _nvidia_cluster(
    tmp_path: Path, case: str, *, older_driver: bool = False
) -> AsyncIterator[tuple[Client, Obj, Obj]]:
    """localcluster as NVIDIA's operator left it for ``case``: (admin, CR, DaemonSet)."""
    inputs = goldens.GOLDENS / "inputs" / case
    cluster_objects = _load(inputs / "nodes.yaml")
    (node,) = [o for o in cluster_objects if o["kind"] == "Node"]
    (driver,) = _load(inputs / "nvidiadriver.yaml")
    driver["metadata"].pop("uid", None)
    cluster = LocalCluster(workdir=tmp_path)
    vgpu = dig(driver, "spec", "driverType") == "vgpu-host-manager"
    cluster.simulator_options = {
        "profile": _profile(node, "vm-vgpu" if vgpu else None),
        "speed": 1.0,
    }
    async with cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            await install_crds(admin)
            await admin.create({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": NS}})  # fmt: skip
            policy = sample_policy(use_driver_crd=True)
            if dig(driver, "spec", "driverType") == "vgpu-host-manager":
                # a vGPU host: NVIDIA's node labelling deploys the vGPU manager only on
                # nodes of a sandbox-workloads policy configured for vm-vgpu
                policy["spec"]["sandboxWorkloads"]["enabled"] = True
            await admin.create(policy)
            cr: Obj = await admin.create(driver)
            for extra in cluster_objects:
                if extra["kind"] != "Node":  # the case's ConfigMaps and Secrets
                    extra["metadata"]["namespace"] = NS
                    await admin.create(extra)
            await _prerequisites(admin, cr)
            nodes = (await admin.list("v1", "Node"))["items"]
            digest = _our_digest(cr, nodes, policy)
            objects = nvidia_driver.nvidia_objects(case, cr, nodes[0], namespace=NS, digest=digest)
            ds = next(o for o in objects if o["kind"] == "DaemonSet")
            if older_driver:
                driver_ctr = ds["spec"]["template"]["spec"]["containers"][0]
                driver_ctr["image"] = driver_ctr["image"].replace("525.85.03", "525.60.13")
            for obj in objects:
                await admin.create(obj)

            async def driver_pod_started() -> bool:
                """The driver pod runs on the node (the vGPU manager's image is private, so
                its container waits in ImagePullBackOff: started, not Running)."""
                pods = await admin.list(
                    "v1", "Pod", NS, label_selector={"app": ds["metadata"]["name"]}
                )
                return any(dig(p, "status", "startTime") for p in pods["items"])

            await wait_for(driver_pod_started, timeout=60, interval=0.2)
            yield admin, cr, ds


async def _take_over(tmp_path: Path, case: str, *, older_driver: bool = False) -> Counts:
    async with _nvidia_cluster(tmp_path, case, older_driver=older_driver) as (admin, cr, nvidia_ds):
        name = nvidia_ds["metadata"]["name"]
        async with Ledger.before(admin, NS) as ledger:
            upgrade_passes = reconciles("upgrade-controller")
            operator = await start_operator(tmp_path / "admin.kubeconfig")
            try:

                async def adopted() -> bool:
                    ds = await admin.get("apps/v1", "DaemonSet", name, NS)
                    annotations = dig(ds, "metadata", "annotations") or {}
                    return annotations.get(LAST_APPLIED_HASH_ANNOTATION) not in (
                        None,
                        nvidia_driver.NVIDIAS_HASH,
                    )

                await wait_for(adopted, timeout=60, interval=0.2)

                async def upgrade_pass() -> bool:
                    return reconciles("upgrade-controller") > upgrade_passes

                await wait_for(upgrade_pass, timeout=60, interval=0.1)
                await settle(operator, timeout=60)
                counts = await ledger.after(operator.client.writes)
            finally:
                await operator.shutdown()
        print(f"{case}: {counts.summary()}")
        ds = await admin.get("apps/v1", "DaemonSet", name, NS)
        (owner,) = ds["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner["controller"]) == (
            "NVIDIADriver",
            cr["metadata"]["uid"],
            True,
        )
        return counts


@pytest.mark.parametrize("case", CASES)
async def test_nvidiadriver_takeover_restarts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    monkeypatch.setitem(os.environ, "OPERATOR_NAMESPACE", NS)
    counts = await _take_over(tmp_path, case)
    assert counts.template_changes == [], counts.template_changes
    assert counts.restarts == [], counts.restarts
    assert counts.upgrades == [], counts.upgrades
    # the metadata-only update that stamps nimctl's hash; about 1 run in 7 sends it twice
    # (counted requests include refused ones, e.g. a 409 against the DaemonSet controller's
    # status write); either way the pod template is unchanged
    assert counts.daemonset_writes in (1, 2), counts.daemonset_writes


async def test_a_cluster_on_another_driver_version_is_upgraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The control: NVIDIA's DaemonSet runs an older driver than the NVIDIADriver asks for
    (as after an edit NVIDIA's operator had not synced), so nimctl changes the pod template
    and the upgrade controller takes the node through an upgrade. The ledger sees both."""
    monkeypatch.setitem(os.environ, "OPERATOR_NAMESPACE", NS)
    counts = await _take_over(tmp_path, "driver-minimal", older_driver=True)
    (change,) = counts.template_changes
    assert "525.60.13" in change and "525.85.03" in change, change
    assert counts.upgrades, "the node did not enter a driver upgrade"
