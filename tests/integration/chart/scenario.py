"""The chart installed on a LocalCluster with RBAC enforced, and the operator's whole
life on the docs examples: NIM (create, Ready, update, prune, delete), NIMServices
on KServe, on DRA claims and across nodes (LeaderWorkerSet with MPI), the five
NeMo services, a NIMPipeline, a NIMBuild, the default ClusterPolicy (ready, one
operand switched off, a driver upgrade rolled over every GPU node, the driver
handed to an NVIDIADriver that gets Ready, deleted) and a GPUCluster. The RBAC
tests run this under the chart's ClusterRole, every kind at once in one operator.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from ruamel.yaml import YAML

from localcluster import LocalCluster
from localcluster.addons import install_ecosystem
from localcluster.authz import RBACAuthorizer, enable_rbac
from localcluster.extensions import extensions_of
from nimctl.demo import demo_objects
from nimctl_runtime.client import AlreadyExists, ApiError, Client, NotFound
from tests.integration.chart.helm import render, require_helm
from tests.integration.chart.install import (
    OperatorPod,
    install,
    served_api_versions,
    start_operator_pod,
)
from tests.ports import free_ports

API = "apps.nvidia.com/v1alpha1"
NS = "nimctl-system"
EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "docs" / "examples"
NIM_EXAMPLES = (
    "nim-minimal.yaml",
    "nimservice-autoscaling.yaml",
    "nimservice-router-ingress.yaml",
    "nimservice-full.yaml",
)
NEMO_EXAMPLES = (
    "nemo-customizer.yaml",
    "nemo-datastore.yaml",
    "nemo-entitystore.yaml",
    "nemo-evaluator.yaml",
    "nemo-guardrail.yaml",
)
STORAGE_CLASS: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
    "provisioner": "localcluster.nimctl.io/hostpath",
    "volumeBindingMode": "Immediate",
}
# The chart's rules for optional APIs (rbac.optionalAPIs): granted up front.
OPTIONAL_RESOURCES = {
    ("gateway.networking.k8s.io", "httproutes"),
    ("gateway.networking.k8s.io", "grpcroutes"),
    ("leaderworkerset.x-k8s.io", "leaderworkersets"),
    ("monitoring.coreos.com", "servicemonitors"),
    ("serving.kserve.io", "inferenceservices"),
    ("inference.networking.k8s.io", "inferencepools"),
    ("resource.k8s.io", "resourceclaimtemplates"),
    ("resource.k8s.io", "resourceclaims"),
    ("resource.nvidia.com", "computedomains"),
    ("run.ai", "trainingworkloads"),
    ("run.ai", "runaijobs"),
    # OpenShift only: the GPU controllers cache the cluster Proxy and the Driver Toolkit ImageStream.
    ("config.openshift.io", "proxies"),
    ("image.openshift.io", "imagestreams"),
}
# What only an OpenShift cluster exercises, on resources an operand role also grants
# (SCC use, ClusterVersion get/list): the operands' SCCs the operator writes there, the
# ClusterVersion watch (tests/integration/gpu/test_openshift.py runs that variant).
OPENSHIFT_ONLY = {
    *(
        ("security.openshift.io", "securitycontextconstraints", verb)
        for verb in ("get", "list", "watch", "create", "update", "patch", "delete")
    ),
    ("config.openshift.io", "clusterversions", "watch"),
}
TIMEOUT = 150.0  # two shared cores: generous, never asserted on


@dataclass
class Installed:
    cluster: LocalCluster
    admin: Client
    authorizer: RBACAuthorizer
    objects: list[dict[str, Any]]
    operator: OperatorPod
    metrics_port: int
    root: Path


async def start_installed(
    tmp: Path,
    values: dict[str, Any] | None = None,
    *,
    edit: Callable[[list[dict[str, Any]]], None] | None = None,
    wait_for_leader: bool = True,
    ecosystem: bool = False,
) -> Installed:
    """A cluster with RBAC on, the chart installed (``edit`` may change the rendered
    objects first), and the operator running as its pod. With ``ecosystem`` the
    third-party CRDs NVIDIA's samples use are installed first (``exercise_all``
    then also runs the KServe, DRA and multi-node NIMServices)."""
    require_helm()
    # Two 8-GPU nodes: room for every example, few DaemonSet pods to simulate.
    cluster = LocalCluster(workdir=tmp / "cluster", profile="gpu-operator")
    # Simulated kubelets at 10x: probe delays and image pulls do not dominate the run.
    cluster.simulator_options = {"speed": 10}  # type: ignore[attr-defined]
    await cluster.start()
    admin = Client(str(cluster.kubeconfig_path))
    with contextlib.suppress(AlreadyExists):
        await admin.create(STORAGE_CLASS)
    for node in (await admin.list("v1", "Node"))["items"]:  # what Node Feature Discovery adds
        if (node["metadata"].get("labels") or {}).get("nvidia.com/gpu.present") == "true":
            labels = {"feature.node.kubernetes.io/pci-10de.present": "true"}
            await admin.patch("v1", "Node", node["metadata"]["name"], {"metadata": {"labels": labels}})
    if ecosystem:  # KServe, LeaderWorkerSet, ...: before the render, which asks what is served
        await install_ecosystem(admin, kserve_mode="Standard")
    authorizer = enable_rbac(cluster)
    ports = dict(zip(("metrics", "health", "webhook"), free_ports(3), strict=True))
    overrides = copy.deepcopy(values or {})
    overrides.setdefault("operator", {})["ports"] = ports
    objects = render(overrides, namespace=NS, api_versions=await served_api_versions(admin))
    if edit is not None:
        edit(objects)
    await install(admin, NS, copy.deepcopy(objects))
    extensions_of(cluster).webhooks.register_service(
        NS, "nimctl-webhook-service", "127.0.0.1", ports["webhook"]
    )
    operator = await start_operator_pod(cluster, admin, objects, tmp / "pod")
    if wait_for_leader:
        await asyncio.wait_for(operator.manager.elected.wait(), 60)
    return Installed(cluster, admin, authorizer, objects, operator, ports["metrics"], tmp)


async def stop_installed(env: Installed, *, graceful: bool = True) -> None:
    if graceful:
        await env.operator.shutdown()
    else:  # the removal test: a refused operator may sit in backoff; do not wait for it
        # nor let it drain: a reconcile stuck on an informer its RBAC cannot list (the
        # refusal the test looked for) would hold the drain for the whole grace period.
        env.operator.manager.options.graceful_shutdown_timeout = 0.0
        env.operator.task.cancel()
        with contextlib.suppress(BaseException):
            await env.operator.task
        await env.operator.client.close()
    await env.admin.close()
    await env.cluster.stop()


async def poll(check: Callable[[], Awaitable[Any]], what: str, timeout: float = TIMEOUT) -> Any:
    """Call *check* until it returns something truthy; fail saying *what* and the last value."""
    deadline = asyncio.get_running_loop().time() + timeout
    last: Any = None
    while asyncio.get_running_loop().time() < deadline:
        try:
            last = await check()
        except NotFound as exc:
            last = exc
        else:
            if last:
                return last
        await asyncio.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout}s; last seen {last!r}"[:3000])


async def state_of(admin: Client, api_version: str, kind: str, name: str, namespace: str | None, want: set[str], timeout: float = TIMEOUT) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    async def check() -> dict[str, Any] | None:
        obj = await admin.get(api_version, kind, name, namespace)
        seen["status"] = obj.get("status")
        return obj if (obj.get("status") or {}).get("state") in want else None

    try:
        result: dict[str, Any] = await poll(check, f"{kind} {namespace}/{name} {want}", timeout)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; status {seen.get('status')!r}"[:3000]) from None
    return result


async def gone(admin: Client, api_version: str, kind: str, name: str, namespace: str | None) -> None:
    async def check() -> bool:
        try:
            await admin.get(api_version, kind, name, namespace)
        except NotFound:
            return True
        return False

    await poll(check, f"{kind} {namespace}/{name} deleted")


# -- the docs examples, moved to a namespace, with what they assume ---------------------


def _refs(value: Any, secrets: set[str], config_maps: set[str], parent: str = "") -> None:
    """Names of the Secrets and ConfigMaps a spec refers to (by the keys NVIDIA's use)."""
    if isinstance(value, dict):
        name = value.get("name")
        if "config" in parent.lower() and isinstance(name, str) and DNS1123.fullmatch(name):
            config_maps.add(name)
        for k, v in value.items():
            if (k in ("secretName", "pullSecret") or k.endswith("Secret")) and isinstance(v, str):
                secrets.add(v)
            elif k == "pullSecrets" and isinstance(v, list):
                secrets.update(str(s) for s in v)
            else:
                _refs(v, secrets, config_maps, k)
    elif isinstance(value, list):
        for v in value:
            _refs(v, secrets, config_maps, parent)


SECRET_KEYS = ("NGC_API_KEY", "HF_TOKEN", "password", "token", "accessKey", "secretKey")


def prerequisite(kind: str, name: str, namespace: str) -> dict[str, Any]:
    """A Secret, ConfigMap or PVC an example names but does not create."""
    meta = {"name": name, "namespace": namespace}
    if kind == "Secret":
        # One Secret serves as the NGC API key, a database password and an nvcr.io
        # image pull secret (the simulator refuses pulls without one).
        values = dict.fromkeys(SECRET_KEYS, "simulated")
        values[".dockerconfigjson"] = '{"auths": {"nvcr.io": {"auth": "c2ltdWxhdGVk"}}}'
        data = {k: base64.b64encode(v.encode()).decode() for k, v in values.items()}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "kubernetes.io/dockerconfigjson", "data": data}
    if kind == "ConfigMap":
        data = {"config.yaml": "models: []\n", "training": "{}\n", "models": "{}\n", "ca.crt": ""}
        return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "10Gi"}}},
    }


def example(name: str, namespace: str) -> list[dict[str, Any]]:
    """The example's objects in *namespace*, preceded by the namespace and the Secrets it names."""
    docs = [d for d in YAML(typ="safe", pure=True).load_all((EXAMPLES_DIR / name).read_text()) if d]
    secrets: set[str] = set()
    config_maps: set[str] = {"corporate-ca"}
    for d in docs:
        if d["kind"] != "ClusterPolicy":
            d["metadata"]["namespace"] = namespace
        if d["kind"] != "ClusterPolicy":
            _refs(d.get("spec"), secrets, config_maps)
    out = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}]
    out += [prerequisite("Secret", s, namespace) for s in sorted(secrets)]
    out += [prerequisite("ConfigMap", c, namespace) for c in sorted(config_maps - secrets)]
    return out + docs


async def create_all(admin: Client, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        with contextlib.suppress(AlreadyExists):
            await admin.create(obj)


DNS1123 = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
MISSING = re.compile(r"(Secret|ConfigMap|PersistentVolumeClaim) ([a-z0-9.-]+) not found")


async def provide_missing(admin: Client, obj: dict[str, Any]) -> None:
    """Create what the object's conditions say is missing (NeMo reports them by name)."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        found = MISSING.search(cond.get("message") or "")
        if found:
            with contextlib.suppress(ApiError):
                await admin.create(prerequisite(found.group(1), found.group(2), obj["metadata"]["namespace"]))


# -- the exercises ---------------------------------------------------------------------


def _one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(o for o in objects if o["kind"] == kind)


async def exercise_nim(admin: Client, prefix: str) -> None:
    """NIMCaches and NIMServices: Ready, updated (Service/Deployment/Role), pruned, deleted."""
    applied = {name: example(name, f"{prefix}-{i}") for i, name in enumerate(NIM_EXAMPLES)}
    for objects in applied.values():
        await create_all(admin, objects)
    for objects in applied.values():
        for obj in objects:
            if obj["kind"] in ("NIMCache", "NIMService"):
                meta = obj["metadata"]
                await state_of(admin, API, obj["kind"], meta["name"], meta["namespace"], {"Ready"})
    minimal = _one(applied["nim-minimal.yaml"], "NIMService")["metadata"]
    scaled = _one(applied["nimservice-autoscaling.yaml"], "NIMService")["metadata"]
    routed = _one(applied["nimservice-router-ingress.yaml"], "NIMService")["metadata"]
    full = _one(applied["nimservice-full.yaml"], "NIMService")["metadata"]
    await admin.patch(API, "NIMService", minimal["name"], {"spec": {"expose": {"service": {"port": 8080}}}}, namespace=minimal["namespace"])
    await admin.patch(API, "NIMService", scaled["name"], {"spec": {"scale": {"enabled": False}}}, namespace=scaled["namespace"])
    await admin.patch(API, "NIMService", routed["name"], {"spec": {"router": None, "expose": {"router": None, "ingress": None}}}, namespace=routed["namespace"])
    await admin.patch(API, "NIMService", full["name"], {"spec": {"proxy": None}}, namespace=full["namespace"])

    async def port_updated() -> bool:
        svc = await admin.get("v1", "Service", minimal["name"], minimal["namespace"])
        return any(p.get("port") == 8080 for p in svc["spec"]["ports"])

    async def scc_changed() -> bool:
        role = await admin.get("rbac.authorization.k8s.io/v1", "Role", full["name"], full["namespace"])
        return bool(role["rules"][0].get("resourceNames") == ["hostmount-anyuid"])

    await poll(port_updated, "the NIMService's Service moved to port 8080")
    await poll(scc_changed, "the NIMService's Role dropped the proxy's SCC")
    await gone(admin, "autoscaling/v2", "HorizontalPodAutoscaler", scaled["name"], scaled["namespace"])
    for objects in applied.values():
        for obj in objects:
            if obj["kind"] in ("NIMService", "NIMCache"):
                await admin.delete(API, obj["kind"], obj["metadata"]["name"], obj["metadata"]["namespace"])
    for objects in applied.values():
        for obj in objects:
            if obj["kind"] in ("NIMService", "NIMCache"):
                await gone(admin, API, obj["kind"], obj["metadata"]["name"], obj["metadata"]["namespace"])


async def exercise_nemo(admin: Client, namespace: str) -> None:
    """The five NeMo services, their missing Secrets/ConfigMaps/PVCs provided, up to their
    Deployments; then deleted."""
    crs: list[dict[str, Any]] = []
    for name in NEMO_EXAMPLES:
        objects = example(name, namespace)
        await create_all(admin, objects)
        crs += [o for o in objects if o["kind"].startswith("Nemo")]

    async def all_deployed() -> bool:
        done = True
        for cr in crs:
            live = await admin.get(API, cr["kind"], cr["metadata"]["name"], namespace)
            await provide_missing(admin, live)
            try:
                await admin.get("apps/v1", "Deployment", cr["metadata"]["name"], namespace)
            except NotFound:
                done = False
        return done

    await poll(all_deployed, "every NeMo service has its Deployment")
    for cr in crs:
        await admin.delete(API, cr["kind"], cr["metadata"]["name"], namespace)
    for cr in crs:
        await gone(admin, API, cr["kind"], cr["metadata"]["name"], namespace)


GPU_STATE = "nvidia.com/gpu-driver-upgrade-state"
NEW_DRIVER = "580.95.05"


async def _gpu_nodes(admin: Client) -> list[dict[str, Any]]:
    items = (await admin.list("v1", "Node"))["items"]
    return [n for n in items if (n["metadata"].get("labels") or {}).get("nvidia.com/gpu.present") == "true"]


async def _driver_upgraded(admin: Client, version: str) -> bool:
    """Every GPU node ``upgrade-done`` and running a driver pod of *version*."""
    nodes = await _gpu_nodes(admin)
    if not nodes or any((n["metadata"].get("labels") or {}).get(GPU_STATE) != "upgrade-done" for n in nodes):
        return False
    pods = (await admin.list("v1", "Pod"))["items"]
    running = {
        p["spec"].get("nodeName")
        for p in pods
        if p["metadata"]["name"].startswith("nvidia-driver-daemonset")
        and p.get("status", {}).get("phase") == "Running"
        and any(version in c.get("image", "") for c in p["spec"]["containers"])
    }
    return running >= {n["metadata"]["name"] for n in nodes}


async def exercise_gpu(admin: Client) -> None:
    """The default ClusterPolicy to ready, its DCGM exporter switched off (pruned), a
    driver upgrade rolled over every GPU node, NVIDIA's NVIDIADriver sample disabled
    beside it and then given the driver (``useNvidiaDriverCRD``) until ready, both
    deleted; then NVIDIA's GPUCluster sample deployed and deleted."""
    policy = _one(example("clusterpolicy-defaults.yaml", "unused"), "ClusterPolicy")
    await admin.create(policy)
    name = policy["metadata"]["name"]
    await state_of(admin, "nvidia.com/v1", "ClusterPolicy", name, None, {"ready"})

    async def exporters() -> list[str]:
        items = (await admin.list("apps/v1", "DaemonSet"))["items"]
        return [d["metadata"]["name"] for d in items if "dcgm-exporter" in d["metadata"]["name"]]

    await poll(exporters, "the ClusterPolicy's DCGM exporter DaemonSet")
    await admin.patch("nvidia.com/v1", "ClusterPolicy", name, {"spec": {"dcgmExporter": {"enabled": False}}})

    async def pruned() -> bool:
        return not await exporters()

    await poll(pruned, "the DCGM exporter pruned")
    # A driver upgrade: the upgrade controller labels, cordons, restarts the driver
    # pods and uncordons node after node (NVIDIA's states) until all are upgrade-done.
    # The NIM pods on the GPU nodes mount emptyDirs (/dev/shm): deleting them for the
    # driver restart needs deleteEmptyDir, else the node goes upgrade-failed, as NVIDIA's.
    upgrade = {"version": NEW_DRIVER, "upgradePolicy": {"podDeletion": {"deleteEmptyDir": True}}}
    await admin.patch("nvidia.com/v1", "ClusterPolicy", name, {"spec": {"driver": upgrade}})
    await poll(lambda: _driver_upgraded(admin, NEW_DRIVER), f"every GPU node upgraded to {NEW_DRIVER}")
    # NVIDIA's NVIDIADriver sample: disabled while the ClusterPolicy manages the driver,
    # then handed the driver and rolled out until ready.
    driver = YAML(typ="safe", pure=True).load((EXAMPLES_DIR / "nvidiadriver-sample.yaml").read_text())
    # taking the driver over restarts it on every node: the same pod deletion as above
    driver["spec"]["upgradePolicy"] = {"autoUpgrade": True, "podDeletion": {"deleteEmptyDir": True}}
    await admin.create(driver)
    driver_name = driver["metadata"]["name"]
    await state_of(admin, "nvidia.com/v1alpha1", "NVIDIADriver", driver_name, None, {"disabled"})
    await admin.patch("nvidia.com/v1", "ClusterPolicy", name, {"spec": {"driver": {"useNvidiaDriverCRD": True}}})
    await state_of(admin, "nvidia.com/v1alpha1", "NVIDIADriver", driver_name, None, {"ready"})
    await admin.delete("nvidia.com/v1alpha1", "NVIDIADriver", driver_name)
    await gone(admin, "nvidia.com/v1alpha1", "NVIDIADriver", driver_name, None)
    await admin.delete("nvidia.com/v1", "ClusterPolicy", name)
    await gone(admin, "nvidia.com/v1", "ClusterPolicy", name, None)
    # The DRA stack: NVIDIA's GPUCluster sample, deployed once the ClusterPolicy is
    # gone, then deleted (its claim consumers drained first).
    cluster = YAML(typ="safe", pure=True).load((EXAMPLES_DIR / "gpucluster-sample.yaml").read_text())
    await admin.create(cluster)

    async def dra_deployed() -> bool:
        items = (await admin.list("apps/v1", "DaemonSet"))["items"]
        return any(d["metadata"]["name"] == "nvidia-dra-validator" for d in items)

    await poll(dra_deployed, "the GPUCluster's DaemonSets")
    await admin.delete("nvidia.com/v1alpha1", "GPUCluster", "gpu-cluster")
    await gone(admin, "nvidia.com/v1alpha1", "GPUCluster", "gpu-cluster", None)


async def exercise_platforms(admin: Client, prefix: str) -> None:
    """NIMServices beyond a Deployment, each Ready and then deleted: NVIDIA's KServe
    Standard sample (an InferenceService), the DRA sample whose claims the operator
    creates (ResourceClaimTemplates), and a multi-node NIMService (a LeaderWorkerSet
    of two, with MPI's ConfigMaps and SSH Secret)."""
    kserve = example("nimservice-kserve-standard.yaml", f"{prefix}-kserve")
    dra = example("nimservice-dra-claim-creation.yaml", f"{prefix}-dra")
    multinode = demo_objects(f"{prefix}-multinode")
    _one(multinode, "NIMService")["spec"]["multiNode"] = {
        "backendType": "lws",
        "parallelism": {"pipeline": 2, "tensor": 1},
        "mpi": {"mpiStartTimeout": 300},
    }
    services = [_one(objects, "NIMService")["metadata"] for objects in (kserve, dra, multinode)]
    for objects in (kserve, dra, multinode):
        await create_all(admin, objects)
    for meta in services:
        await state_of(admin, API, "NIMService", meta["name"], meta["namespace"], {"Ready"})
    await admin.get("serving.kserve.io/v1beta1", "InferenceService", services[0]["name"], services[0]["namespace"])
    await admin.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", f"{services[2]['name']}-lws", services[2]["namespace"])
    for objects in (kserve, dra, multinode):
        for obj in objects:
            if obj["kind"] in ("NIMService", "NIMCache"):
                await admin.delete(API, obj["kind"], obj["metadata"]["name"], obj["metadata"]["namespace"])
    for objects in (kserve, dra, multinode):
        for obj in objects:
            if obj["kind"] in ("NIMService", "NIMCache"):
                await gone(admin, API, obj["kind"], obj["metadata"]["name"], obj["metadata"]["namespace"])


async def exercise_pipeline(admin: Client, namespace: str) -> None:
    """The RAG NIMPipeline: Ready, one service switched off (its NIMService deleted), one
    changed (its NIMService updated), deleted."""
    objects = example("nimpipeline-rag.yaml", namespace)
    await create_all(admin, objects)
    pipeline = _one(objects, "NIMPipeline")
    name = pipeline["metadata"]["name"]
    await state_of(admin, API, "NIMPipeline", name, namespace, {"Ready"})
    services = copy.deepcopy(pipeline["spec"]["services"])
    dropped = services[-1]["name"]
    services[-1]["enabled"] = False
    services[0]["spec"]["replicas"] = 2
    await admin.patch(API, "NIMPipeline", name, {"spec": {"services": services}}, namespace=namespace)
    await gone(admin, API, "NIMService", dropped, namespace)

    async def updated() -> bool:
        svc = await admin.get(API, "NIMService", services[0]["name"], namespace)
        return bool(svc["spec"].get("replicas") == 2)

    await poll(updated, "the pipeline's NIMService updated to 2 replicas")
    await admin.delete(API, "NIMPipeline", name, namespace)
    await gone(admin, API, "NIMPipeline", name, namespace)


async def exercise_build(admin: Client, namespace: str) -> None:
    """The NIMBuild example: its NIMCache Ready, the build Ready (finalizer, build pod,
    status), then both deleted (the finalizer released)."""
    objects = example("nimbuild-engine.yaml", namespace)
    await create_all(admin, objects)
    cache, build = _one(objects, "NIMCache")["metadata"], _one(objects, "NIMBuild")["metadata"]
    await state_of(admin, API, "NIMBuild", build["name"], namespace, {"Ready"})
    await admin.delete(API, "NIMBuild", build["name"], namespace)
    await gone(admin, API, "NIMBuild", build["name"], namespace)
    await admin.delete(API, "NIMCache", cache["name"], namespace)
    await gone(admin, API, "NIMCache", cache["name"], namespace)


async def scrape_metrics(env: Installed) -> int:
    """GET /metrics as a caller bound to the chart's metrics-reader ClusterRole."""
    from localcluster.authz import service_account_user

    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "prometheus-reads-nimctl-metrics"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nimctl-metrics-reader"},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}],
    }
    with contextlib.suppress(AlreadyExists):
        await env.admin.create(binding)
    token = env.cluster.token_for(service_account_user("monitoring", "prometheus"))
    url = f"http://127.0.0.1:{env.metrics_port}/metrics"
    async with aiohttp.ClientSession() as http:
        for _ in range(300):  # until the operator's metrics server listens
            try:
                async with http.get(url, headers={"Authorization": f"Bearer {token}"}) as resp:
                    return resp.status
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.1)
    raise AssertionError(f"{url} never answered")


async def exercise_all(env: Installed, *, platforms: bool = False) -> None:
    """Every kind at once in the one operator (``platforms`` needs ``ecosystem``)."""
    await asyncio.gather(
        *([exercise_platforms(env.admin, "platform")] if platforms else []),
        exercise_nim(env.admin, "nim"),
        exercise_nemo(env.admin, "nemo"),
        exercise_gpu(env.admin),
        exercise_pipeline(env.admin, "pipeline"),
        exercise_build(env.admin, "build"),
    )
