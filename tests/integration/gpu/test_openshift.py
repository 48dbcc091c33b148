"""OpenShift detection, live: the ClusterPolicy and NVIDIADriver controllers render the
OpenShift variant exactly where the cluster is OpenShift.

The same run on two clusters: bare RHCOS GPU nodes (``gpu-openshift``: NFD's rhcos
labels with ``OSTREE_VERSION``, cri-o) with what OpenShift serves
(``localcluster.openshift``: ClusterVersion 4.16.3, a cluster-wide Proxy with a trusted
CA, the SCC and ImageStream APIs, the ``openshift/driver-toolkit`` ImageStream), and
bare Ubuntu GPU nodes (``gpu-bare``) on plain Kubernetes. NVIDIA's sample ClusterPolicy
is applied, then the driver is handed to an NVIDIADriver. On OpenShift the operands
must get their SecurityContextConstraints, cri-o, and the driver's ``OPENSHIFT_VERSION``,
proxy env and trusted-CA ConfigMap (ClusterPolicy and NVIDIADriver), the Driver Toolkit
container and the RHCOS pool selector (NVIDIADriver), and the operator's namespace (there
NVIDIA's suggested ``nvidia-gpu-operator``) is labelled for cluster monitoring; on
Kubernetes none of these. What tells them apart is read from the controllers' caches:
the operator lists and watches the ClusterVersion, it never GETs it, however many
passes run. ``nimctl render`` of the same cluster's objects gives the same driver
DaemonSets (ClusterPolicy's and the NVIDIADriver pool's) on both.
"""

from __future__ import annotations

import contextlib
import io
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver
from localcluster import LocalCluster, extensions_of
from localcluster.openshift import DEFAULT_RHCOS, install_openshift
from nimctl.operator import install_crds
from nimctl_runtime.client import ApiError, Client
from platforms.gpu.cli import render_policy
from platforms.gpu.nvidiadriver_cli import render_drivers
from tests.integration.controllers.harness import (
    Operator,
    reconciles,
    settle,
    start_operator,
    wait_for,
)
from tests.integration.gpu_nvidiadriver.env import nvidia_driver, sample_policy

pytestmark = pytest.mark.timeout(240)

NS = "gpu-operator"
OCP_NS = "nvidia-gpu-operator"  # NVIDIA's suggested namespace on OpenShift
MONITORING = "openshift.io/cluster-monitoring"
CP = "nvidia.com/v1"
ND = "nvidia.com/v1alpha1"
SCC = "security.openshift.io/v1"
PROXY = {
    "httpProxy": "http://proxy.example.com:3128",
    "httpsProxy": "http://proxy.example.com:3129",
    "noProxy": ".cluster.local,.svc,10.0.0.0/16",
    "trustedCA": {"name": "user-ca-bundle"},
}
OSTREE = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"
DTK = "openshift-driver-toolkit-ctr"


@dataclass
class Env:
    cluster: LocalCluster
    admin: Client
    operator: Operator
    openshift: bool
    namespace: str

    async def daemonset(self, name: str) -> dict[str, Any]:
        return await self.admin.get("apps/v1", "DaemonSet", name, self.namespace)

    async def driver_daemonsets(self, owner_kind: str) -> list[dict[str, Any]]:
        items = (
            await self.admin.list(
                "apps/v1",
                "DaemonSet",
                self.namespace,
                label_selector="app.kubernetes.io/component=nvidia-driver",
            )
        )["items"]
        return [
            d
            for d in items
            if any(r.get("kind") == owner_kind for r in d["metadata"].get("ownerReferences", []))
        ]

    async def sccs(self) -> dict[str, dict[str, Any]]:
        items = (await self.admin.list(SCC, "SecurityContextConstraints"))["items"]
        return {s["metadata"]["name"]: s for s in items}


@contextlib.asynccontextmanager
async def running(tmp_path: Path, openshift: bool) -> AsyncIterator[Env]:
    namespace = OCP_NS if openshift else NS
    previous = os.environ.get("OPERATOR_NAMESPACE")
    os.environ["OPERATOR_NAMESPACE"] = namespace
    cluster = LocalCluster(workdir=tmp_path)
    cluster.simulator_options = {"profile": "gpu-openshift" if openshift else "gpu-bare"}
    try:
        async with cluster:
            kubeconfig = cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
            async with Client(str(kubeconfig)) as admin:
                await install_crds(admin)
                if openshift:
                    await install_openshift(admin, proxy=PROXY)
                await admin.create(
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
                )
                # From here on, every request is the operator's.
                extensions_of(cluster).audit.clear()
                operator = await start_operator(
                    cluster.write_kubeconfig(tmp_path / "op.kubeconfig")
                )
                try:
                    yield Env(cluster, admin, operator, openshift, namespace)
                finally:
                    await operator.shutdown()
    finally:
        if previous is None:
            os.environ.pop("OPERATOR_NAMESPACE", None)
        else:
            os.environ["OPERATOR_NAMESPACE"] = previous


def env_of(container: Mapping[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in container.get("env") or []}


def container(ds: Mapping[str, Any], name: str) -> dict[str, Any]:
    (found,) = [c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return dict(found)


def containers(ds: Mapping[str, Any]) -> list[str]:
    return [c["name"] for c in ds["spec"]["template"]["spec"]["containers"]]


async def _after(count: float) -> bool:
    return reconciles("clusterpolicy-controller") > count


async def trusted_ca(env: Env, owner_kind: str) -> bool:
    """Whether the trusted-CA ConfigMap exists, for OpenShift to inject into, owned so."""
    cm = await env.admin.get("v1", "ConfigMap", "gpu-operator-trusted-ca", env.namespace)
    assert cm["metadata"]["labels"]["config.openshift.io/inject-trusted-cabundle"] == "true"
    return bool(cm["metadata"]["ownerReferences"][0]["kind"] == owner_kind)


async def _clusterpolicy_operands(env: Env) -> dict[str, Any]:
    policy = sample_policy(use_driver_crd=False)
    policy["spec"]["psa"] = {"enabled": True}
    await env.admin.create(policy)
    driver = await wait_for(lambda: env.daemonset("nvidia-driver-daemonset"), timeout=90)
    toolkit = await env.daemonset("nvidia-container-toolkit-daemonset")
    driver_env = env_of(container(driver, "nvidia-driver-ctr"))
    toolkit_env = env_of(container(toolkit, "nvidia-container-toolkit-ctr"))

    async def namespace_labels() -> dict[str, str]:
        ns = await env.admin.get("v1", "Namespace", env.namespace)
        labels = dict(ns["metadata"].get("labels") or {})
        return labels if labels.get("pod-security.kubernetes.io/enforce") else {}

    labels = await wait_for(namespace_labels, timeout=30)
    if not env.openshift:
        assert not {"OPENSHIFT_VERSION", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"} & set(driver_env)
        assert toolkit_env["RUNTIME"] == "containerd"
        assert MONITORING not in labels
        with pytest.raises(ApiError):  # not served: nothing could have been created
            await env.sccs()
        return dict(driver)
    # NVIDIA's own namespace on OpenShift: PSA labels, and cluster monitoring scrapes it.
    assert labels[MONITORING] == "true"
    # NVIDIA's n.openshift: major.minor of the ClusterVersion's Completed update.
    assert driver_env["OPENSHIFT_VERSION"] == "4.16"
    assert toolkit_env["RUNTIME"] == "crio"
    assert driver_env["HTTP_PROXY"] == PROXY["httpProxy"]
    assert driver_env["NO_PROXY"] == PROXY["noProxy"]
    assert await trusted_ca(env, "ClusterPolicy")
    # OpenShift injects the cluster's CA bundle into it; the operator's passes keep it.
    before = reconciles("clusterpolicy-controller")
    bundle = {"ca-bundle.crt": "-----BEGIN CERTIFICATE-----\nMIIB...\n-----END CERTIFICATE-----\n"}
    await env.admin.patch(
        "v1", "ConfigMap", "gpu-operator-trusted-ca", {"data": bundle}, namespace=env.namespace
    )
    await wait_for(lambda: _after(before), timeout=30)
    await settle(env.operator)
    cm = await env.admin.get("v1", "ConfigMap", "gpu-operator-trusted-ca", env.namespace)
    assert cm["data"] == bundle
    sccs = await wait_for(env.sccs, timeout=30)
    for name in ("nvidia-driver", "nvidia-operator-validator", "nvidia-gpu-feature-discovery"):
        scc = sccs[name]
        assert scc["users"] == [f"system:serviceaccount:{env.namespace}:{name}"], name
        assert scc["allowPrivilegedContainer"] is True, name
        assert scc["metadata"]["ownerReferences"][0]["kind"] == "ClusterPolicy", name
    # OpenShift's own SCCs are neither touched nor owned.
    assert "ownerReferences" not in sccs["privileged"]["metadata"]
    return dict(driver)


async def _nvidiadriver_operands(env: Env) -> dict[str, Any]:
    await env.admin.patch(
        CP, "ClusterPolicy", "cluster-policy", {"spec": {"driver": {"useNvidiaDriverCRD": True}}}
    )
    await env.admin.create(nvidia_driver("default", {}))

    async def pools() -> list[dict[str, Any]]:
        return await env.driver_daemonsets("NVIDIADriver")

    (ds,) = await wait_for(pools, timeout=90)
    pod = ds["spec"]["template"]["spec"]
    driver_env = env_of(container(ds, "nvidia-driver-ctr"))
    if not env.openshift:
        assert DTK not in containers(ds)
        assert OSTREE not in pod["nodeSelector"]
        assert not {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "OPENSHIFT_VERSION"} & set(driver_env)
        return ds
    # The RHCOS pool: its nodes by OSTree release, built with that release's toolkit image.
    assert pod["nodeSelector"][OSTREE] == DEFAULT_RHCOS
    stream = await env.admin.get(
        "image.openshift.io/v1", "ImageStream", "driver-toolkit", "openshift"
    )
    (tag,) = [t for t in stream["spec"]["tags"] if t["name"] == DEFAULT_RHCOS]
    toolkit = container(ds, DTK)
    assert toolkit["image"] == tag["from"]["name"]
    assert env_of(toolkit)["RHCOS_VERSION"] == DEFAULT_RHCOS
    assert driver_env["OPENSHIFT_VERSION"] == "4.16"
    assert driver_env["HTTP_PROXY"] == PROXY["httpProxy"]
    assert driver_env["HTTPS_PROXY"] == PROXY["httpsProxy"]
    assert driver_env["NO_PROXY"] == PROXY["noProxy"]
    # ClusterPolicy's copy is pruned with its driver state, NVIDIADriver's takes its place.
    await wait_for(lambda: trusted_ca(env, "NVIDIADriver"), timeout=30)
    sa = ds["spec"]["template"]["spec"]["serviceAccountName"]
    scc = (await env.sccs())[sa]
    assert scc["users"] == [f"system:serviceaccount:{env.namespace}:{sa}"]
    assert scc["metadata"]["ownerReferences"][0]["kind"] == "NVIDIADriver"
    return ds


async def _dump(env: Env) -> list[dict[str, Any]]:
    """The cluster's objects ``nimctl render --nodes`` reads, as kubectl would dump them."""
    kinds = [("v1", "Node", None)]
    if env.openshift:
        kinds += [
            ("config.openshift.io/v1", "ClusterVersion", None),
            ("config.openshift.io/v1", "Proxy", None),
            ("image.openshift.io/v1", "ImageStream", "openshift"),
        ]
    out: list[dict[str, Any]] = []
    for api, kind, ns in kinds:
        items = (await env.admin.list(api, kind, ns))["items"]
        out += [{"apiVersion": api, "kind": kind, **o} for o in items]
    return out


def shape(ds: Mapping[str, Any]) -> dict[str, Any]:
    pod = ds["spec"]["template"]["spec"]
    return {
        "nodeSelector": pod["nodeSelector"],
        "containers": {c["name"]: (c["image"], env_of(c)) for c in pod["containers"]},
        "initContainers": [c["name"] for c in pod.get("initContainers") or []],
        "volumes": sorted(v["name"] for v in pod.get("volumes") or []),
    }


async def _render_agrees(
    env: Env, policy_driver: Mapping[str, Any], pool: Mapping[str, Any]
) -> None:
    """``nimctl render`` of the same cluster gives the driver DaemonSets the controllers
    created, the ClusterPolicy's and the NVIDIADriver pool's: the same flag and values
    reach both."""
    dump = await _dump(env)
    live_policy = await env.admin.get(CP, "ClusterPolicy", "cluster-policy")
    live_policy["spec"]["driver"]["useNvidiaDriverCRD"] = False  # as it was when rendered
    rendered = render_policy(ClusterPolicy.model_validate(live_policy), dump, err=io.StringIO())
    (offline,) = [
        o
        for o in rendered
        if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nvidia-driver-daemonset"
    ]
    assert shape(offline) == shape(policy_driver)

    driver = NVIDIADriver.model_validate(await env.admin.get(ND, "NVIDIADriver", "default"))
    dump.append(await env.admin.get(CP, "ClusterPolicy", "cluster-policy"))
    rendered = render_drivers([driver], dump, namespace=env.namespace, err=io.StringIO())
    (offline,) = [o for o in rendered if o["kind"] == "DaemonSet"]
    assert offline["metadata"]["name"] == pool["metadata"]["name"]
    assert shape(offline) == shape(pool)


@pytest.mark.parametrize("openshift", [False, True], ids=["kubernetes", "openshift"])
async def test_operands_are_the_openshift_variant_exactly_on_openshift(
    tmp_path: Path, openshift: bool
) -> None:
    async with running(tmp_path, openshift) as env:
        policy_driver = await _clusterpolicy_operands(env)
        pool = await _nvidiadriver_operands(env)
        reads = extensions_of(env.cluster).audit.records(resource="clusterversions")
        if openshift:
            # One informer per GPU cache (ClusterPolicy's, NVIDIADriver's): listed, then watched.
            assert {r.verb for r in reads} == {"list", "watch"}, [(r.verb, r.path) for r in reads]
            assert len([r for r in reads if r.verb == "list"]) == 2
        else:
            assert reads == [], "nothing is looked up where the API is not served"
        await _render_agrees(env, policy_driver, pool)
