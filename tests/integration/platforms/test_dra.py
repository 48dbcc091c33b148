"""DRA NIMServices on localcluster: resource.k8s.io/v1, the simulated driver, claim statuses.

NVIDIA's two DRA samples reach Ready unchanged: claims are made from the
templates (the operator's, from ``claimCreationSpec``, or the user's), named
as the resourceclaim controller names them, allocated on one node and reserved
for the pod; ``status.draResourceStatuses`` lists each pod claim with its
claims' states. An idle reconcile writes nothing.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from localcluster.simulator.dra import generate_claim_name
from nimctl.demo import apply_objects
from nimctl_runtime.client import ApiError, Client
from tests.integration.controllers.harness import wait_for
from tests.integration.controllers.test_nim_controllers import EXAMPLES_DIR, example_objects
from tests.integration.platforms.conftest import Env, annotate, ready, status_of

pytestmark = pytest.mark.asyncio(loop_scope="module")

RESOURCE = "resource.k8s.io/v1"
SINGLE_GPU_TEMPLATE = {
    "apiVersion": RESOURCE,
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "single-gpu"},
    "spec": {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1},
                    }
                ]
            }
        }
    },
}


async def _claims_all_reserved(admin: Client, ns: str, name: str, count: int) -> Any:
    """``draResourceStatuses`` once each of ``count`` pod claims has a reserved claim."""
    st = await status_of(admin, ns, name)
    statuses = st.get("draResourceStatuses") or []
    states = [
        c.get("state")
        for s in statuses
        for c in (s.get("resourceClaimTemplateStatus") or {}).get("resourceClaimStatuses") or []
    ]
    if len(statuses) == count and states == ["allocated,reserved"] * count:
        return statuses
    return None


@pytest.mark.parametrize(
    ("example", "pod_claims"),
    [("nimservice-dra-claim-creation.yaml", 3), ("nimservice-dra-claim-template.yaml", 1)],
)
async def test_nvidia_dra_samples_get_claims_allocated(
    env: Env, example: str, pod_claims: int
) -> None:
    ns = "d-" + example.removeprefix("nimservice-dra-").removesuffix(".yaml")
    objs = example_objects(EXAMPLES_DIR / example, ns)
    if "template" in example:
        template = {**SINGLE_GPU_TEMPLATE, "metadata": {"name": "single-gpu", "namespace": ns}}
        objs.insert(1, template)
    await apply_objects(env.admin, objs)
    name = next(o["metadata"]["name"] for o in objs if o["kind"] == "NIMService")
    await ready(env.admin, ns, name)
    statuses = await wait_for(
        lambda: _claims_all_reserved(env.admin, ns, name, pod_claims), timeout=30
    )

    pods = (await env.admin.list("v1", "Pod", ns, label_selector={"app": name}))["items"]
    (pod,) = pods
    claim_statuses = pod["status"]["resourceClaimStatuses"]
    by_pod_claim = {c["name"]: c["resourceClaimName"] for c in claim_statuses}
    nodes = set()
    for entry in statuses:
        (made,) = entry["resourceClaimTemplateStatus"]["resourceClaimStatuses"]
        # Named as kube-controller-manager names them: <pod>-<pod claim>- (shortened
        # to 57 characters) and 5 random ones.
        assert by_pod_claim[entry["name"]] == made["name"]
        prefix = generate_claim_name(pod["metadata"]["name"], entry["name"])
        assert re.fullmatch(re.escape(prefix) + "[a-z0-9]{5}", made["name"]), made["name"]
        claim = await env.admin.get(RESOURCE, "ResourceClaim", made["name"], ns)
        assert claim["status"]["reservedFor"][0]["uid"] == pod["metadata"]["uid"]
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == "gpu.nvidia.com"
        nodes.add(result["pool"])
    assert nodes == {pod["spec"]["nodeName"]}, "every claim is allocated on the pod's node"
    if "creation" in example:
        templates = (await env.admin.list(RESOURCE, "ResourceClaimTemplate", ns))["items"]
        assert sorted(t["metadata"]["name"].split("-")[0] for t in templates) == [
            "bigmem",
            "cel",
            "h100",
        ]
        # The selectors as NVIDIA builds them: the driver first, compareTo operands in
        # parentheses.
        selectors = {
            t["metadata"]["name"].split("-")[0]: [
                sel["cel"]["expression"]
                for sel in t["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"]
            ]
            for t in templates
        }
        assert selectors == {
            "h100": [
                'device.driver == "gpu.nvidia.com"',
                'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"',
                '(device.attributes["gpu.nvidia.com"].driverVersion)'
                '.compareTo(semver("550.0.0")) >= 0',
            ],
            "bigmem": [
                'device.driver == "gpu.nvidia.com"',
                '(device.capacity["gpu.nvidia.com"].memory).compareTo(quantity("40Gi")) >= 0',
            ],
            "cel": [
                'device.driver == "gpu.nvidia.com"',
                "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'",
            ],
        }

    poke = annotate(env.admin, "apps/v1", "Deployment", name, ns)
    assert await env.idle_reconcile_writes(ns, poke) == [], "a second reconcile writes nothing"


CLAIM_TWICE = [{"resourceClaimName": "shared-gpu"}, {"resourceClaimName": "shared-gpu"}]
BAD_VERSION = [
    {
        "claimCreationSpec": {
            "devices": [
                {
                    "name": "gpu",
                    "attributeSelectors": [
                        {
                            "key": "driverVersion",
                            "op": "GreaterThan",
                            "value": {"versionValue": "550.127.08"},
                        }
                    ],
                }
            ]
        }
    }
]


@pytest.mark.parametrize(
    ("case", "dra", "message"),
    [
        (
            "claim-twice",
            CLAIM_TWICE,
            "spec.draResources[1].resourceClaimName: duplicate resource claim name: 'shared-gpu'",
        ),
        (
            "bad-version",
            BAD_VERSION,
            "spec.draResources[0].claimCreationSpec.devices[0].attributeSelectors[0].value"
            '.versionValue.version: invalid version "550.127.08": '
            'Patch number must not contain leading zeroes "08"',
        ),
    ],
)
async def test_dra_resources_nvidia_refuses_are_failed_and_not_rendered(
    env: Env, case: str, dra: list[dict[str, Any]], message: str
) -> None:
    ns = f"d-refused-{case}"
    objs = example_objects(EXAMPLES_DIR / "nimservice-dra-claim-creation.yaml", ns)
    svc = next(o for o in objs if o["kind"] == "NIMService")
    svc["spec"]["draResources"] = dra
    await apply_objects(env.admin, objs)
    name = svc["metadata"]["name"]

    async def failed() -> dict[str, Any] | None:
        st = await status_of(env.admin, ns, name)
        return st if st.get("state") == "Failed" else None

    st = await wait_for(failed, timeout=30)
    cond = next(c for c in st["conditions"] if c["type"] == "Failed")
    assert (cond["reason"], cond["message"]) == ("DRAResourcesUnsupported", message)
    for kind in ("Deployment", "ResourceClaimTemplate"):
        api = "apps/v1" if kind == "Deployment" else RESOURCE
        assert (await env.admin.list(api, kind, ns))["items"] == [], kind


async def test_cel_expressions_with_selectors_are_refused_at_admission(env: Env) -> None:
    ns = "d-refused-cel"
    objs = example_objects(EXAMPLES_DIR / "nimservice-dra-claim-creation.yaml", ns)
    svc = next(o for o in objs if o["kind"] == "NIMService")
    device = svc["spec"]["draResources"][0]["claimCreationSpec"]["devices"][0]
    device["celExpressions"] = ["device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"]
    await apply_objects(env.admin, [o for o in objs if o is not svc])
    with pytest.raises(ApiError) as err:
        await env.admin.create(svc)
    assert err.value.status == 422
    assert "celExpressions must not be set if attributeSelectors or capacitySelectors are set" in (
        str(err.value.message)
    )
