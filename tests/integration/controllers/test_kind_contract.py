"""The kind contract's three regressions (issue 10), through the real operator on localcluster.

The cluster serves the optional CRDs a NIMService may own (LeaderWorkerSet,
InferencePool, InferenceService, Gateway routes), installed before the
operator starts so discovery sees them. Each test works in its own namespace.

- EPP turned off: the EPP Deployment, Service, ConfigMap and InferencePool go.
- Multi-node: Ready when the LeaderWorkerSet is Available; a change of the
  LeaderWorkerSet (scaled to 0 by hand) wakes the NIMService, which has no
  requeue pending once Ready, so only the LeaderWorkerSet watch can move it.
- KServe: the operator creates the InferenceService (as ``nimctl render``
  does) and says what it waits for.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from nimctl.demo import DEMO_NAME, apply_objects, demo_objects
from nimctl_runtime.client import Client, NotFound
from tests.integration.controllers.harness import (
    API,
    Operator,
    cluster_with_crds,
    optional_crd,
    start_operator,
    wait_for,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPTIONAL_CRDS = [
    ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet"),
    ("inference.networking.k8s.io", "v1", "inferencepools", "InferencePool"),
    ("serving.kserve.io", "v1beta1", "inferenceservices", "InferenceService"),
    ("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute"),
    ("gateway.networking.k8s.io", "v1", "grpcroutes", "GRPCRoute"),
]

EPP_CONFIG = {
    "containerSpec": {
        "name": "epp",
        "image": {
            "repository": "registry.k8s.io/gateway-api-inference-extension/epp",
            "tag": "v1.0.0",
        },
    },
    "config": {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [{"type": "single-profile-handler"}],
        "schedulingProfiles": [{"name": "default", "plugins": [{"pluginRef": "single"}]}],
    },
}


class Env:
    def __init__(self, admin: Client, operator: Operator) -> None:
        self.admin = admin
        self.operator = operator


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("contract")
    async with cluster_with_crds(tmp, profile="many-nodes") as (cluster, admin):
        for group, version, plural, kind in OPTIONAL_CRDS:
            await admin.create(optional_crd(group, version, plural, kind))
        for group, version, _, kind in OPTIONAL_CRDS:
            av = f"{group}/{version}"
            await wait_for(lambda av=av, kind=kind: admin.mapper.rest_mapping(av, kind))
        operator = await start_operator(cluster.write_kubeconfig(tmp / "operator.kubeconfig"))
        try:
            yield Env(admin, operator)
        finally:
            await operator.shutdown()


def objects_in(namespace: str, **service_spec: Any) -> list[dict[str, Any]]:
    objs = demo_objects(namespace)
    svc = next(o for o in objs if o["kind"] == "NIMService")
    svc["spec"].update(copy.deepcopy(service_spec))
    return objs


async def status_of(admin: Client, namespace: str) -> dict[str, Any]:
    obj = await admin.get(API, "NIMService", DEMO_NAME, namespace)
    return dict(obj.get("status") or {})


async def exists(admin: Client, api_version: str, kind: str, name: str, ns: str) -> bool:
    try:
        await admin.get(api_version, kind, name, ns)
    except NotFound:
        return False
    return True


async def test_turning_epp_off_deletes_its_objects(env: Env) -> None:
    ns = "c-epp"
    router = {
        "hostDomainName": "example.com",
        "gateway": {"namespace": "gw", "name": "gw", "httpRoutesEnabled": True},
        "eppConfig": EPP_CONFIG,
    }
    await apply_objects(
        env.admin, objects_in(ns, expose={"service": {"port": 8000}, "router": router})
    )
    epp = [
        ("apps/v1", "Deployment", f"{DEMO_NAME}-epp"),
        ("v1", "Service", f"{DEMO_NAME}-epp"),
        ("v1", "ConfigMap", f"{DEMO_NAME}-epp-config"),
        ("inference.networking.k8s.io/v1", "InferencePool", DEMO_NAME),
    ]

    async def all_there() -> bool:
        return all([await exists(env.admin, *o, ns) for o in epp])

    await wait_for(all_there, timeout=60)
    no_epp = {k: v for k, v in router.items() if k != "eppConfig"}
    await env.admin.patch(
        API,
        "NIMService",
        DEMO_NAME,
        [{"op": "replace", "path": "/spec/expose/router", "value": no_epp}],
        namespace=ns,
        patch_type="json",
    )

    async def all_gone() -> bool:
        return not any([await exists(env.admin, *o, ns) for o in epp])

    await wait_for(all_gone, timeout=30)
    # What stays is what the new spec renders.
    assert await exists(env.admin, "apps/v1", "Deployment", DEMO_NAME, ns)
    assert await exists(env.admin, "gateway.networking.k8s.io/v1", "HTTPRoute", DEMO_NAME, ns)


async def test_multinode_is_ready_when_its_leaderworkerset_is_available(env: Env) -> None:
    ns = "c-lws"
    multi = {"backendType": "lws", "parallelism": {"pipeline": 2, "tensor": 1}, "ray": {}}
    await apply_objects(env.admin, objects_in(ns, multiNode=multi))
    lws_name = f"{DEMO_NAME}-lws"

    async def ready() -> dict[str, Any] | None:
        st = await status_of(env.admin, ns)
        return st if st.get("state") == "Ready" else None

    st = await wait_for(ready, timeout=60)
    cond = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert cond["message"] == f'leaderworkerset "{lws_name}" is ready'
    assert not await exists(env.admin, "apps/v1", "Deployment", DEMO_NAME, ns)

    # Ready has no requeue: only the LeaderWorkerSet watch can bring the change in.
    await env.admin.patch(
        "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", lws_name, {"spec": {"replicas": 0}},
        namespace=ns,
    )

    async def scaled_down() -> str | None:
        st = await status_of(env.admin, ns)
        msg = next((c["message"] for c in st.get("conditions", []) if c["type"] == "Ready"), "")
        return msg if st.get("state") == "NotReady" else None

    assert await wait_for(scaled_down, timeout=30) == f'leaderworkerset "{lws_name}" is scaled down'


async def test_kserve_nimservice_gets_an_inferenceservice(env: Env) -> None:
    ns = "c-kserve"
    await apply_objects(
        env.admin,
        objects_in(
            ns,
            inferencePlatform="kserve",
            annotations={
                "serving.kserve.io/deploymentMode": "RawDeployment",
                # localcluster simulates KServe: keep the predictor unready, so
                # what the operator says while it waits stays observable.
                "localcluster.nimctl.io/simulate": "never-ready",
            },
        ),
    )

    async def isvc() -> dict[str, Any]:
        return await env.admin.get(
            "serving.kserve.io/v1beta1", "InferenceService", DEMO_NAME, ns
        )

    obj = await wait_for(isvc, timeout=60)
    annotations = obj["metadata"].get("annotations") or {}
    assert annotations.get("serving.kserve.io/deploymentMode") == "RawDeployment"
    assert not await exists(env.admin, "apps/v1", "Deployment", DEMO_NAME, ns)

    async def waiting() -> str | None:
        st = await status_of(env.admin, ns)
        cond = next((c for c in st.get("conditions", []) if c["type"] == "Ready"), None)
        return cond["message"] if cond and st.get("state") == "NotReady" else None

    message = await wait_for(waiting, timeout=30)
    assert message == f'Waiting for InferenceService "{DEMO_NAME}" reporting Predictor readiness'
