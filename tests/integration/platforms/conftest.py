"""One localcluster with the optional CRDs a NIMService may own, and the operator, per module.

What ``nimctl local`` installs (``localcluster.addons.install_ecosystem``:
LeaderWorkerSet, InferencePool, Gateway routes, ServiceMonitor, ComputeDomain
and the simulated KServe with ``defaultDeploymentMode: Standard``) is
installed before the operator starts, so discovery sees it; a test that needs a CRD installed late makes its own cluster. The
operator runs as user ``nimctl-operator`` so the audit log tells its writes
from the test's.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from localcluster.addons import install_ecosystem
from localcluster.extensions import extensions_of
from nimctl.demo import DEMO_NAME, demo_objects
from nimctl_runtime.client import Client, NotFound
from tests.integration.controllers.harness import (
    API,
    Operator,
    cluster_with_crds,
    optional_crd,
    reconciled_and_settled,
    reconciles,
    settle,
    start_operator,
    wait_for,
)

OPERATOR_USER = "nimctl-operator"
KSERVE_DEFAULT_MODE = "Standard"
WRITE_VERBS = ("create", "update", "patch", "delete")

OPTIONAL_CRDS = [
    ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet"),
    ("inference.networking.k8s.io", "v1", "inferencepools", "InferencePool"),
    ("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute"),
    ("gateway.networking.k8s.io", "v1", "grpcroutes", "GRPCRoute"),
    ("resource.nvidia.com", "v1beta1", "computedomains", "ComputeDomain"),
]


async def install_optional_crds(admin: Client, crds: list[tuple[str, str, str, str]]) -> None:
    for group, version, plural, kind in crds:
        await admin.create(optional_crd(group, version, plural, kind))
    for group, version, _, kind in crds:
        await wait_for(_served(admin, f"{group}/{version}", kind))


def _served(admin: Client, api_version: str, kind: str) -> Callable[[], Awaitable[Any]]:
    async def check() -> Any:
        return await admin.mapper.rest_mapping(api_version, kind)

    return check


@dataclass
class Env:
    cluster: Any
    admin: Client
    operator: Operator
    tmp: Path

    def audit_seq(self) -> int:
        return max((r.seq for r in extensions_of(self.cluster).audit.records()), default=0)

    def operator_writes(self, namespace: str, since: int = 0) -> list[tuple[str, ...]]:
        """``(verb, resource, subresource, name)`` the operator sent in ``namespace`` after ``since``."""
        return [
            (r.verb, r.resource, r.subresource, r.name)
            for r in extensions_of(self.cluster).audit.records(user=OPERATOR_USER)
            if r.seq > since
            and r.namespace == namespace
            and r.verb in WRITE_VERBS
            and r.resource != "events"
        ]

    async def idle_reconcile_writes(
        self,
        namespace: str,
        poke: Callable[[], Awaitable[Any]],
        controller: str = "nimservice",
        timeout: float = 30.0,
    ) -> list[tuple[str, ...]]:
        """What the operator writes when ``poke`` wakes a reconcile with nothing to change.

        Waits for the operator to settle first (writes of the last change land), then
        for ``controller`` to finish the reconcile ``poke`` woke and the operator to settle.
        """
        await settle(self.operator, timeout=timeout)
        since = self.audit_seq()
        before = reconciles(controller)
        await poke()
        await reconciled_and_settled(self.operator, controller, before, timeout=timeout)
        return self.operator_writes(namespace, since)


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("platforms")
    async with cluster_with_crds(tmp, profile="many-nodes") as (cluster, admin):
        # What `nimctl local` installs next to the nimctl CRDs.
        served = await install_ecosystem(admin, kserve_mode=KSERVE_DEFAULT_MODE)
        assert {k for *_, k in OPTIONAL_CRDS} | {"InferenceService"} <= set(served)
        kubeconfig = cluster.write_kubeconfig(tmp / "operator.kubeconfig", user=OPERATOR_USER)
        operator = await start_operator(kubeconfig)
        try:
            yield Env(cluster, admin, operator, tmp)
        finally:
            await operator.shutdown()


def objects_in(namespace: str, **service_spec: Any) -> list[dict[str, Any]]:
    """The demo's Namespace, Secrets, NIMCache and NIMService, the service's spec updated."""
    objs = demo_objects(namespace)
    svc = next(o for o in objs if o["kind"] == "NIMService")
    svc["spec"].update(copy.deepcopy(service_spec))
    return objs


async def status_of(admin: Client, namespace: str, name: str = DEMO_NAME) -> dict[str, Any]:
    obj = await admin.get(API, "NIMService", name, namespace)
    return dict(obj.get("status") or {})


async def ready(admin: Client, namespace: str, name: str = DEMO_NAME) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        st = await status_of(admin, namespace, name)
        return st if st.get("state") == "Ready" else None

    result: dict[str, Any] = await wait_for(check, timeout=60)
    return result


async def exists(admin: Client, api_version: str, kind: str, name: str, ns: str) -> bool:
    try:
        await admin.get(api_version, kind, name, ns)
    except NotFound:
        return False
    return True


def annotate(admin: Client, api_version: str, kind: str, name: str, ns: str) -> Callable[
    [], Awaitable[Any]
]:
    """A poke: annotate an owned object, which wakes its NIMService and changes nothing."""
    counter = {"n": 0}

    async def poke() -> Any:
        counter["n"] += 1
        return await admin.patch(
            api_version,
            kind,
            name,
            {"metadata": {"annotations": {"example.com/poke": str(counter["n"])}}},
            namespace=ns,
        )

    return poke
