"""NIMCache and NIMService controllers against a LocalCluster, through real HTTP.

One cluster and one operator serve the whole module; each test works in its
own namespace.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from localcluster.extensions import extensions_of
from nimctl.demo import DEMO_NAME, apply_objects, demo_objects
from nimctl_runtime.client import Client, NotFound
from tests.integration.controllers.harness import (
    API,
    Operator,
    cluster_with_crds,
    get_state,
    reconciled_and_settled,
    reconciles,
    settle,
    start_operator,
    wait_for,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPERATOR_USER = "nimctl-operator"

GATEWAY_CRDS = [
    ("httproutes", "HTTPRoute"),
    ("grpcroutes", "GRPCRoute"),
]


def _gateway_crd(plural: str, kind: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.gateway.networking.k8s.io"},
        "spec": {
            "group": "gateway.networking.k8s.io",
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


# What GPU feature discovery would add to the simulated GPU nodes: one H100 node, one L4 node.
GPU_NODE_PRODUCTS = {"gpu-node-0": "NVIDIA-H100-80GB-HBM3", "gpu-node-1": "NVIDIA-L4"}

STANDARD_STORAGE_CLASS: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {"name": "standard"},
    "provisioner": "localcluster.nimctl.io/hostpath",
    "volumeBindingMode": "Immediate",
}


async def _label_gpu_nodes(admin: Client) -> None:
    nodes = (await admin.list("v1", "Node"))["items"]
    for node in nodes:
        name = node["metadata"]["name"]
        product = GPU_NODE_PRODUCTS.get(name)
        if product:
            labels = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": product}
            await admin.patch("v1", "Node", name, {"metadata": {"labels": labels}})


class Env:
    def __init__(self, cluster: Any, admin: Client, operator: Operator) -> None:
        self.cluster = cluster
        self.admin = admin
        self.operator = operator


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("nimctl")
    # The docs examples alone ask for more GPUs than the default two nodes have.
    async with cluster_with_crds(tmp, profile="many-nodes") as (cluster, admin):
        for plural, kind in GATEWAY_CRDS:
            await admin.create(_gateway_crd(plural, kind))
        await wait_for(
            lambda: admin.mapper.rest_mapping("gateway.networking.k8s.io/v1", "HTTPRoute")
        )
        await _label_gpu_nodes(admin)
        await apply_objects(admin, [STANDARD_STORAGE_CLASS])
        kubeconfig = cluster.write_kubeconfig(tmp / "operator.kubeconfig", user=OPERATOR_USER)
        operator = await start_operator(kubeconfig)
        try:
            yield Env(cluster, admin, operator)
        finally:
            await operator.shutdown()


def objects_in(namespace: str, *, cache: bool = True, **service_spec: Any) -> list[dict[str, Any]]:
    objs = demo_objects(namespace)
    if not cache:
        objs = [o for o in objs if o["kind"] != "NIMCache"]
    svc = next(o for o in objs if o["kind"] == "NIMService")
    svc["spec"].update(copy.deepcopy(service_spec))
    return objs


async def _ready(admin: Client, kind: str, namespace: str, name: str = DEMO_NAME) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await admin.get(API, kind, name, namespace)
        return obj if (obj.get("status") or {}).get("state") == "Ready" else None

    result: dict[str, Any] = await wait_for(check, timeout=60)
    return result


async def test_nimcache_then_nimservice_become_ready(env: Env) -> None:
    ns = "t-ready"
    states: list[str] = []
    # Watching from this resource version, the watch misses nothing created after it.
    since = (await env.admin.list(API, "NIMCache", ns))["metadata"]["resourceVersion"]

    async def watch_states() -> None:
        async for ev in env.admin.watch(API, "NIMCache", ns, resource_version=since):
            st = (ev.object.get("status") or {}).get("state")
            if st and (not states or states[-1] != st):
                states.append(st)

    watcher = asyncio.create_task(watch_states())
    await apply_objects(env.admin, objects_in(ns))
    cache = await _ready(env.admin, "NIMCache", ns)

    async def watched_ready() -> bool:
        return bool(states) and states[-1] == "Ready"

    await wait_for(watched_ready, timeout=10)
    watcher.cancel()
    assert states[0] == "PVC-Created" and "Started" in states and states[-1] == "Ready"
    assert cache["status"]["pvc"] == f"{DEMO_NAME}-pvc"
    assert cache["status"]["profiles"], "a Ready NIMCache lists the profiles it cached"
    assert cache["status"]["profiles"][0]["config"]["llm_engine"] == "tensorrt_llm"

    svc = await _ready(env.admin, "NIMService", ns)
    model = svc["status"]["model"]
    assert model["name"] == "meta/llama-3.1-8b-instruct"
    assert model["clusterEndpoint"].endswith(":8000")
    ready = next(c for c in svc["status"]["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and ready["reason"] == "Ready"
    for api_version, kind in (
        ("apps/v1", "Deployment"),
        ("v1", "Service"),
        ("v1", "ServiceAccount"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ):
        await env.admin.get(api_version, kind, DEMO_NAME, ns)


async def test_spec_edit_updates_deployment_once_and_idle_reconciles_write_nothing(
    env: Env,
) -> None:
    ns = "t-edit"
    await apply_objects(env.admin, objects_in(ns))
    await _ready(env.admin, "NIMService", ns)
    await settle(env.operator)
    # An owned object changes in a way that does not matter: reconcile runs, writes nothing.
    writes_before = len(env.operator.client.object_writes())
    reconciles_before = reconciles("nimservice")
    await env.admin.patch(
        "apps/v1",
        "Deployment",
        DEMO_NAME,
        {"metadata": {"annotations": {"example.com/touched": "yes"}}},
        namespace=ns,
    )
    audit = extensions_of(env.cluster).audit
    seq_before = max((r.seq for r in audit.records()), default=0)
    await reconciled_and_settled(env.operator, "nimservice", reconciles_before)
    assert env.operator.client.object_writes()[writes_before:] == []
    operator_writes = [
        r.call
        for r in audit.records(user=OPERATOR_USER)
        if r.seq > seq_before
        and r.verb in ("create", "update", "patch", "delete")
        and r.resource != "events"
    ]
    assert operator_writes == [], "the audit log shows the operator wrote during an idle reconcile"

    await env.admin.patch(
        API,
        "NIMService",
        DEMO_NAME,
        {"spec": {"env": [{"name": "NIM_LOG_LEVEL", "value": "DEBUG"}]}},
        namespace=ns,
    )

    async def has_env() -> bool:
        dep = await env.admin.get("apps/v1", "Deployment", DEMO_NAME, ns)
        env_list = dep["spec"]["template"]["spec"]["containers"][0].get("env") or []
        return {"name": "NIM_LOG_LEVEL", "value": "DEBUG"} in env_list

    await wait_for(has_env)
    await _ready(env.admin, "NIMService", ns)
    await settle(env.operator)
    deployment_path = f"/apis/apps/v1/namespaces/{ns}/deployments/{DEMO_NAME}"
    updates = [
        w for w in env.operator.client.writes[writes_before:] if w == ("PUT", deployment_path)
    ]
    assert len(updates) == 1


async def test_router_ingress_to_gateway_swaps_ingress_for_httproute(env: Env) -> None:
    ns = "t-router"
    router = {"hostDomainName": "example.com", "ingress": {"ingressClass": "nginx"}}
    await apply_objects(
        env.admin, objects_in(ns, expose={"service": {"port": 8000}, "router": router})
    )
    await wait_for(lambda: env.admin.get("networking.k8s.io/v1", "Ingress", DEMO_NAME, ns))
    await env.admin.patch(
        API,
        "NIMService",
        DEMO_NAME,
        {
            "spec": {
                "expose": {
                    "router": {
                        "ingress": None,
                        "gateway": {
                            "namespace": "gw",
                            "name": "gateway",
                            "httpRoutesEnabled": True,
                        },
                    }
                }
            }
        },
        namespace=ns,
    )
    await wait_for(
        lambda: env.admin.get("gateway.networking.k8s.io/v1", "HTTPRoute", DEMO_NAME, ns)
    )

    async def ingress_gone() -> bool:
        try:
            await env.admin.get("networking.k8s.io/v1", "Ingress", DEMO_NAME, ns)
        except NotFound:
            return True
        return False

    await wait_for(ingress_gone)


async def test_missing_nimcache_fails_then_recovers(env: Env) -> None:
    ns = "t-missing"
    await apply_objects(env.admin, objects_in(ns, cache=False))

    async def failed() -> dict[str, Any] | None:
        obj = await env.admin.get(API, "NIMService", DEMO_NAME, ns)
        st = obj.get("status") or {}
        return obj if st.get("state") == "Failed" else None

    svc = await wait_for(failed)
    cond = next(c for c in svc["status"]["conditions"] if c["type"] == "Failed")
    assert cond["reason"] == "NIMCacheNotFound"
    assert cond["message"] == f"NIMCache {DEMO_NAME} not found"
    await apply_objects(env.admin, [o for o in demo_objects(ns) if o["kind"] == "NIMCache"])
    await _ready(env.admin, "NIMService", ns)


async def test_deleting_nimservice_removes_what_it_owned(env: Env) -> None:
    ns = "t-delete"
    await apply_objects(env.admin, objects_in(ns))
    await _ready(env.admin, "NIMService", ns)
    await env.admin.delete(API, "NIMService", DEMO_NAME, ns)

    async def all_gone() -> bool:
        for api_version, kind in (
            (API, "NIMService"),
            ("apps/v1", "Deployment"),
            ("v1", "Service"),
            ("v1", "ServiceAccount"),
            ("rbac.authorization.k8s.io/v1", "Role"),
            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ):
            try:
                await env.admin.get(api_version, kind, DEMO_NAME, ns)
            except NotFound:
                continue
            return False
        return True

    await wait_for(all_gone, timeout=30)
    assert await get_state(env.admin, "NIMCache", DEMO_NAME, ns) == "Ready"


async def test_failing_cache_job_gives_nimcache_failed(env: Env) -> None:
    ns = "t-jobfail"
    image = "nvcr.io/nim/example/broken-model"
    extensions_of(env.cluster).catalog.set(
        f"{image}*", logs="ERROR download failed\n", exit_code=1, command="download-to-cache"
    )
    cache = next(o for o in demo_objects(ns) if o["kind"] == "NIMCache")
    cache["spec"]["source"]["ngc"]["modelPuller"] = f"{image}:1.0"
    await apply_objects(env.admin, [o for o in demo_objects(ns) if o["kind"] != "NIMCache"][:3])
    await apply_objects(env.admin, [cache])

    async def failed() -> dict[str, Any] | None:
        obj = await env.admin.get(API, "NIMCache", DEMO_NAME, ns)
        return obj if (obj.get("status") or {}).get("state") == "Failed" else None

    obj = await wait_for(failed, timeout=90)
    cond = next(c for c in obj["status"]["conditions"] if c["type"] == "NIM_CACHE_JOB_COMPLETED")
    assert (cond["status"], cond["reason"]) == ("False", "JobFailed")
    # NVIDIA's words, then which pod failed and how (issue 25)
    job = f"{DEMO_NAME}-job"
    assert cond["message"].startswith(
        f"The Job to cache NIM has failed: caching job {job} failed: pod {job}-"
    )
    assert cond["message"].endswith("exit code 1 (Error)")


EXAMPLES_DIR = Path(__file__).resolve().parents[3] / "docs" / "examples"
SINGLE_NODE_EXCLUDES = ("multiNode", "kserve", "draResources", "eppConfig", "NIMPipeline")


def single_node_examples() -> list[Path]:
    out = []
    for path in sorted(EXAMPLES_DIR.glob("*.yaml")):
        text = path.read_text()
        if ("kind: NIMService" in text or "kind: NIMCache" in text) and not any(
            x in text for x in SINGLE_NODE_EXCLUDES
        ):
            out.append(path)
    return out


def _secret_names(
    value: Any,
    found: set[str],
    keys: dict[str, str] | None = None,
    config_maps: set[str] | None = None,
) -> None:
    """Secrets the example names; *keys* gets the keys its env reads (``secretKeyRef``),
    *config_maps* the ConfigMaps it mounts (``certConfigMap``)."""
    keys = {} if keys is None else keys
    config_maps = set() if config_maps is None else config_maps
    if isinstance(value, dict):
        for k, v in value.items():
            if k in ("authSecret", "pullSecret") and isinstance(v, str):
                found.add(v)
            elif k == "pullSecrets" and isinstance(v, list):
                found.update(str(s) for s in v)
            elif k == "certConfigMap" and isinstance(v, str) and v:
                config_maps.add(v)
            elif k == "secretKeyRef" and isinstance(v, dict) and v.get("name"):
                found.add(str(v["name"]))
                keys[str(v.get("key", ""))] = "simulated"
            else:
                _secret_names(v, found, keys, config_maps)
    elif isinstance(value, list):
        for v in value:
            _secret_names(v, found, keys, config_maps)


def example_objects(path: Path, namespace: str) -> list[dict[str, Any]]:
    """The example's objects moved to ``namespace``, with the Secrets and PVCs it assumes."""
    from ruamel.yaml import YAML

    docs = [d for d in YAML(typ="safe").load_all(path.read_text()) if d]
    secrets: set[str] = set()
    keys: dict[str, str] = {}
    config_maps: set[str] = set()
    pvcs: set[str] = set()
    for d in docs:
        d["metadata"]["namespace"] = namespace
        _secret_names(d.get("spec"), secrets, keys, config_maps)
        for pvc in (
            ((d.get("spec") or {}).get("storage") or {}).get("pvc"),
            ((d.get("spec") or {}).get("storage") or {}).get("pvc"),
        ):
            if pvc and pvc.get("name") and not pvc.get("create"):
                pvcs.add(pvc["name"])
    prereqs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    ]
    for name in sorted(secrets):
        prereqs.append(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": name, "namespace": namespace},
                # one Secret serves as auth secret and as nvcr.io image pull secret
                "type": "kubernetes.io/dockerconfigjson",
                "stringData": {
                    **keys,
                    "NGC_API_KEY": "simulated",
                    "HF_TOKEN": "simulated",
                    ".dockerconfigjson": '{"auths": {"nvcr.io": {"auth": "c2ltdWxhdGVk"}}}',
                },
            }
        )
    for name in sorted(config_maps):
        prereqs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": namespace},
                "data": {"ca.crt": "simulated"},
            }
        )
    for name in sorted(pvcs):
        prereqs.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {
                    "accessModes": ["ReadWriteMany"],
                    "resources": {"requests": {"storage": "10Gi"}},
                },
            }
        )
    caches = {d["metadata"]["name"] for d in docs if d.get("kind") == "NIMCache"}
    for d in docs:
        ref = (((d.get("spec") or {}).get("storage") or {}).get("nimCache") or {}).get("name")
        if d.get("kind") == "NIMService" and ref and ref not in caches:
            # The example reuses a NIMCache another example creates: provide one.
            cache = next(o for o in demo_objects(namespace) if o["kind"] == "NIMCache")
            cache["metadata"]["name"] = ref
            prereqs.append(cache)
            caches.add(ref)
    return prereqs + docs


# Examples that need hardware the simulated cluster does not have: they must
# stay NotReady waiting for their rollout (and say so), never Failed.
NEEDS_OTHER_HARDWARE = {
    "nimservice-confidential-computing.yaml": "nodes advertising nvidia.com/pgpu",
}


async def test_every_single_node_example_reconciles_to_ready(env: Env) -> None:
    examples = single_node_examples()
    assert examples, "docs/examples has no NIMCache/NIMService examples"
    expected: list[tuple[str, str, str, str]] = []
    for i, path in enumerate(examples):
        ns = f"ex-{i:02d}"
        objs = example_objects(path, ns)
        await apply_objects(env.admin, objs)
        expected += [
            (path.name, o["kind"], ns, o["metadata"]["name"])
            for o in objs
            if o["kind"] in ("NIMCache", "NIMService")
        ]
    assert len(expected) >= 20

    async def states() -> dict[tuple[str, str, str, str], str]:
        out = {}
        for key in expected:
            _, kind, ns, name = key
            out[key] = await get_state(env.admin, kind, name, ns)
        return out

    def acceptable(key: tuple[str, str, str, str], state: str) -> bool:
        if key[0] in NEEDS_OTHER_HARDWARE and key[1] == "NIMService":
            return state == "NotReady"
        return state == "Ready"

    async def all_ready() -> bool:
        return all(acceptable(k, s) for k, s in (await states()).items())

    try:
        await wait_for(all_ready, timeout=80, interval=1.0)
    except TimeoutError:
        not_ready = {}
        for key, state in (await states()).items():
            if not acceptable(key, state):
                obj = await env.admin.get(API, key[1], key[3], key[2])
                conds = [
                    (c["type"], c.get("reason"), c.get("message"))
                    for c in (obj.get("status") or {}).get("conditions") or []
                ]
                manifest = ""
                if key[1] == "NIMCache":
                    try:
                        cm = await env.admin.get("v1", "ConfigMap", f"{key[3]}-manifest", key[2])
                        manifest = str(cm.get("data"))[:300]
                    except NotFound:
                        manifest = "<no manifest ConfigMap>"
                not_ready[key] = (state, conds, manifest)
        pytest.fail(f"examples not Ready: {not_ready}")
