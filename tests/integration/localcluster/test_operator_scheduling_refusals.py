"""A NIMService whose affinity or security context kube-apiserver would refuse
in the rendered Deployment ends Failed with kube-apiserver's message, as on a real cluster.

The NIMService CRD embeds the core types without their validation, so these reach the
operator; the Deployment it renders is what the API server refuses.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from nimctl.demo import apply_objects, demo_objects
from nimctl_runtime.client import Client
from tests.integration.controllers.harness import cluster_with_crds, start_operator, wait_for

API = "apps.nvidia.com/v1alpha1"
NS = "scheduling-refusals"

AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In"}]}
            ]
        }
    }
}


def _services() -> list[dict[str, Any]]:
    objs = demo_objects(NS)
    base = next(o for o in objs if o["kind"] == "NIMService")
    no_values = copy.deepcopy(base)
    no_values["metadata"]["name"] = "no-values"
    no_values["spec"]["affinity"] = AFFINITY
    bad_user = copy.deepcopy(base)
    bad_user["metadata"]["name"] = "bad-user"
    bad_user["spec"]["userID"] = -1
    weightless = copy.deepcopy(base)
    weightless["metadata"]["name"] = "weightless"
    weightless["spec"]["affinity"] = {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 0, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}
            ]
        }
    }
    return [*objs, no_values, bad_user, weightless]


async def test_scheduling_refusals_reach_the_nimservice(tmp_path: Path) -> None:
    async with cluster_with_crds(tmp_path) as (_cluster, admin):
        operator = await start_operator(_cluster.kubeconfig_path)
        try:
            await apply_objects(admin, _services())
            names = ("no-values", "bad-user", "weightless")
            messages = {name: await _failure(admin, name) for name in names}
        finally:
            await operator.shutdown()
    assert (
        'Deployment.apps "no-values" is invalid: spec.template.spec.affinity.nodeAffinity.'
        "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]."
        "matchExpressions[0].values: Required value: must be specified when `operator` is 'In' "
        "or 'NotIn'"
    ) in messages["no-values"]
    assert (
        'Deployment.apps "weightless" is invalid: spec.template.spec.affinity.podAntiAffinity.'
        "preferredDuringSchedulingIgnoredDuringExecution[0].weight: Invalid value: 0: must be "
        "in the range 1-100"
    ) in messages["weightless"]
    assert (
        'Deployment.apps "bad-user" is invalid: spec.template.spec.securityContext.runAsUser: '
        "Invalid value: -1: must be between 0 and 2147483647, inclusive"
    ) in messages["bad-user"]


async def _failure(admin: Client, name: str) -> str:
    async def failed() -> dict[str, Any] | None:
        obj = await admin.get(API, "NIMService", name, NS)
        return obj if (obj.get("status") or {}).get("state") == "Failed" else None

    obj = await wait_for(failed, timeout=60)
    return " ".join(c.get("message", "") for c in obj["status"]["conditions"])
