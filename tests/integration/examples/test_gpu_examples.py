"""Every GPU Operator example in docs/examples, with the prerequisites
docs/examples/README.md lists, reaches the state the README promises on
localcluster (profile ``gpu-bare``: NFD-labelled GPU nodes with no driver).

ClusterPolicy, NVIDIADriver and GPUCluster are cluster-scoped and exclude one
another, so each example gets its own small cluster; they run side by side.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster import LocalCluster
from nimctl.demo import apply_objects
from nimctl.operator import install_crds
from nimctl_runtime.client import Client
from nimctl_runtime.meta import Obj
from tests.integration.controllers.harness import start_operator, wait_for

pytestmark = pytest.mark.timeout(240)

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
NS = "gpu-operator"
KINDS = {
    "ClusterPolicy": "nvidia.com/v1",
    "NVIDIADriver": "nvidia.com/v1alpha1",
    "GPUCluster": "nvidia.com/v1alpha1",
}


def _docs(file: str) -> list[Obj]:
    return [d for d in yaml.safe_load_all((EXAMPLES / file).read_text()) if d]


def _policy_for_driver_crd() -> Obj:
    """The README's prerequisite of the NVIDIADriver examples: a ClusterPolicy that hands
    the driver to NVIDIADriver (``driver.useNvidiaDriverCRD: true``)."""
    (policy,) = _docs("clusterpolicy-defaults.yaml")
    policy["spec"]["driver"]["useNvidiaDriverCRD"] = True
    return policy


RDMA_NODE_LABELS = {
    "example.com/gpu-pool": "rdma",
    "feature.node.kubernetes.io/pci-15b3.present": "true",
}


async def _label_rdma_node(admin: Client) -> None:
    """``nvidiadriver.yaml``'s ``rdma-open`` pool: a GPU node labelled for it, with a
    Mellanox NIC (NFD's ``pci-15b3.present``)."""
    await admin.patch("v1", "Node", "gpu-node-1", {"metadata": {"labels": RDMA_NODE_LABELS}})


async def _vgpu_config_map(admin: Client) -> None:
    """``clusterpolicy-sandbox.yaml`` mounts this ConfigMap of the operator namespace."""
    await admin.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "vgpu-kernel-module-params", "namespace": NS},
            "data": {"nvidia.conf": "NVreg_RegistryDwords=RMIntrLockingMode=1\n"},
        }
    )


Prepare = Callable[[Client], Coroutine[Any, Any, None]]
# file -> (objects it needs first, other prerequisites)
SCENARIOS: dict[str, tuple[list[Obj], list[Prepare]]] = {
    "clusterpolicy-defaults.yaml": ([], []),
    "clusterpolicy-sandbox.yaml": ([], [_vgpu_config_map]),
    "nvidiadriver.yaml": ([_policy_for_driver_crd()], [_label_rdma_node]),
    "nvidiadriver-sample.yaml": ([_policy_for_driver_crd()], []),
    "gpucluster-sample.yaml": ([], []),
}


@asynccontextmanager
async def _operator_namespace() -> AsyncIterator[None]:
    previous = os.environ.get("OPERATOR_NAMESPACE")
    os.environ["OPERATOR_NAMESPACE"] = NS
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("OPERATOR_NAMESPACE", None)
        else:
            os.environ["OPERATOR_NAMESPACE"] = previous


async def _state(admin: Client, kind: str, name: str) -> tuple[str, str]:
    obj = await admin.get(KINDS[kind], kind, name)
    status = obj.get("status") or {}
    error = next((c for c in status.get("conditions") or [] if c.get("type") == "Error"), {})
    return str(status.get("state", "")), f"{error.get('reason', '')}: {error.get('message', '')}"


async def _scenario(tmp_path: Path, file: str) -> str:
    """Run one example on its own cluster; "" when every CR in it is ready, else why not."""
    needs, prepare = SCENARIOS[file]
    workdir = tmp_path / file.removesuffix(".yaml")
    workdir.mkdir()
    cluster = LocalCluster(workdir=workdir, profile="gpu-bare")
    cluster.simulator_options = {"speed": 20.0}
    async with cluster:
        kubeconfig = cluster.write_kubeconfig(workdir / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            await install_crds(admin)
            await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            for step in prepare:
                await step(admin)
            operator = await start_operator(kubeconfig)
            try:
                objs = _docs(file)
                await apply_objects(admin, [*needs, *objs])
                crs = [(o["kind"], o["metadata"]["name"]) for o in [*needs, *objs]]

                async def all_ready() -> bool:
                    states = [(await _state(admin, k, n))[0] for k, n in crs]
                    return all(s == "ready" for s in states)

                try:
                    await wait_for(all_ready, timeout=90, interval=0.5)
                except TimeoutError:
                    states = [f"{k}/{n}: {await _state(admin, k, n)}" for k, n in crs]
                    return f"{file}: not ready: {'; '.join(states)}"
                return ""
            finally:
                await operator.shutdown()


async def test_each_gpu_example_is_ready_with_its_prerequisites(tmp_path: Path) -> None:
    async with _operator_namespace():
        results = await asyncio.gather(*(_scenario(tmp_path, f) for f in SCENARIOS))
    failures = [r for r in results if r]
    assert not failures, "\n".join(failures)


def test_every_gpu_example_file_is_covered() -> None:
    crs = {
        p.name
        for p in EXAMPLES.glob("*.yaml")
        if any(d.get("kind") in KINDS for d in _docs(p.name))
    }
    assert crs == set(SCENARIOS)
