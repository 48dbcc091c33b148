"""A NIMService's creates come back from the watch without queueing it again (issue 30).

Against an API server alone (no simulator: nothing else moves), a new NIMService
is reconciled exactly once: the pass creates its ServiceAccount, Role,
RoleBinding, Service and Deployment and reads each answer; the five ADDED
events that follow carry what that pass already saw and queue nothing
(``nimctl_runtime.expectations``). Before, they queued a second pass per
NIMService that changed nothing: a third of the operator's CPU while 1,000 were
applied. A real change still wakes it: a deleted Deployment is created again.
Counts reconciles and echoes, never time.
"""

from __future__ import annotations

from typing import Any

from localcluster.cluster import LocalCluster
from nimctl_runtime.client import Client
from tests.integration.controllers.harness import (
    API,
    reconciled_and_settled,
    reconciles,
    settle,
    start_operator,
    wait_for,
)

NS = "echo"
OWNED = [
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ("v1", "Service"),
    ("apps/v1", "Deployment"),
]


def nimservice(name: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "NIMService",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "image": {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.8.4"},
            "authSecret": "ngc-api-secret",
            "storage": {"pvc": {"name": "model-pvc"}},
            "replicas": 1,
            "expose": {"service": {"port": 8000}},
        },
    }


async def test_a_new_nimservice_is_reconciled_once_and_drift_still_wakes_it(
    cluster: LocalCluster,
) -> None:
    from nimctl.operator import install_crds

    async with Client(str(cluster.kubeconfig_path)) as admin:
        await install_crds(admin)
        await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        operator = await start_operator(cluster.kubeconfig_path)
        try:
            (controller,) = [
                r for r in operator.manager.runnables() if getattr(r, "name", "") == "nimservice"
            ]
            expectations = controller.reconciler.expectations
            await settle(operator)
            before = reconciles("nimservice")
            names = [f"llm-{i}" for i in range(3)]
            for name in names:
                await admin.create(nimservice(name))

            async def all_deployments() -> bool:
                items = (await admin.list("apps/v1", "Deployment", NS))["items"]
                return len(items) == len(names)

            await wait_for(all_deployments)
            await settle(operator)
            for api_version, kind in OWNED:
                items = (await admin.list(api_version, kind, NS))["items"]
                assert {i["metadata"]["name"] for i in items} >= set(names), kind
            assert reconciles("nimservice") - before == len(names), (
                "a NIMService was reconciled again for its own creates coming back"
            )
            assert expectations.echoes == len(names) * len(OWNED)
            assert len(expectations) == 0, "an expected echo never came"

            # Someone deletes a Deployment: news, the NIMService creates it again.
            before = reconciles("nimservice")
            await admin.delete("apps/v1", "Deployment", names[0], NS)
            await reconciled_and_settled(operator, "nimservice", before)

            async def recreated() -> Any:
                return await admin.get("apps/v1", "Deployment", names[0], NS)

            assert await wait_for(recreated)
            await settle(operator)
            assert len(expectations) == 0
        finally:
            await operator.shutdown()
