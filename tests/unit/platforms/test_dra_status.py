"""``status.draResourceStatuses`` and ``status.computeDomainStatus`` from claims and domains."""

from __future__ import annotations

from nimctl_runtime.meta import Obj
from platforms.nimservice import NIMServiceContract, dra_details
from platforms.standalone.context import RenderContext
from platforms.standalone.dra_status import (
    claim_state,
    compute_domain_status,
    dra_resource_statuses,
)
from tests.unit.platforms.helpers import nimservice


def claim(name: str, *, pod_claim: str = "", allocated: bool = False, reserved: bool = False,
          deleting: bool = False, created: str = "2026-01-01T00:00:00Z") -> Obj:  # fmt: skip
    meta: Obj = {"name": name, "namespace": "ns", "creationTimestamp": created}
    if pod_claim:
        meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": pod_claim}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    status: Obj = {}
    if allocated:
        status["allocation"] = {"devices": {"results": []}}
    if reserved:
        status["reservedFor"] = [{"resource": "pods", "name": "p", "uid": "u"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": meta,
            "status": status}  # fmt: skip


def test_claim_states_in_nvidias_words() -> None:
    assert claim_state(claim("a")) == "pending"
    assert claim_state(claim("a", allocated=True)) == "allocated"
    assert claim_state(claim("a", allocated=True, reserved=True)) == "allocated,reserved"
    assert claim_state(claim("a", deleting=True)) == "deleted"
    assert claim_state(claim("a", deleting=True, allocated=True)) == "deleted,allocated"


def test_one_status_per_pod_claim() -> None:
    pod_claims = [
        {"name": "claim-x-0-aaa-0", "resourceClaimName": "shared"},
        {"name": "claim-x-1-bbb-0", "resourceClaimTemplateName": "single-gpu"},
        {"name": "claim-x-1-ccc-0", "resourceClaimTemplateName": "no-pods-yet"},
    ]
    claims = [
        claim("shared", allocated=True, reserved=True),
        claim("pod-b-gpu-22222", pod_claim="claim-x-1-bbb-0", created="2026-01-01T00:00:02Z"),
        claim("pod-a-gpu-11111", pod_claim="claim-x-1-bbb-0", allocated=True,
              created="2026-01-01T00:00:01Z"),
        claim("someone-elses", pod_claim="claim-y-1-bbb-0"),
    ]
    assert dra_resource_statuses(pod_claims, claims) == [
        {
            "name": "claim-x-0-aaa-0",
            "resourceClaimStatus": {"name": "shared", "state": "allocated,reserved"},
        },
        {
            "name": "claim-x-1-bbb-0",
            "resourceClaimTemplateStatus": {
                "name": "single-gpu",
                "resourceClaimStatuses": [  # oldest first
                    {"name": "pod-a-gpu-11111", "state": "allocated"},
                    {"name": "pod-b-gpu-22222", "state": "pending"},
                ],
            },
        },
        {"name": "claim-x-1-ccc-0", "resourceClaimTemplateStatus": {"name": "no-pods-yet"}},
    ]


def test_compute_domain_status_is_copied() -> None:
    assert compute_domain_status(None) is None
    domain = {
        "metadata": {"name": "llm"},
        "status": {
            "status": "Ready",
            "nodes": [{"name": "gpu-0", "cliqueID": "abc.1", "status": "Ready", "ipAddress": "x"}],
        },
    }
    assert compute_domain_status(domain) == {
        "name": "llm",
        "status": "Ready",
        "nodes": [{"name": "gpu-0", "cliqueID": "abc.1", "status": "Ready"}],
    }


def test_readiness_details_use_the_rendered_pod_claim_names() -> None:
    svc = nimservice({"draResources": [{"resourceClaimTemplateName": "single-gpu"}]})
    objs = NIMServiceContract().render(svc, RenderContext())
    dep = next(o for o in objs if o["kind"] == "Deployment")
    (pod_claim,) = dep["spec"]["template"]["spec"]["resourceClaims"]
    made = claim("llm-pod-gpu-abcde", pod_claim=pod_claim["name"], allocated=True, reserved=True)
    details = dra_details(svc, RenderContext(resource_claims=(made,)))
    assert details == {
        "draResourceStatuses": [
            {
                "name": pod_claim["name"],
                "resourceClaimTemplateStatus": {
                    "name": "single-gpu",
                    "resourceClaimStatuses": [
                        {"name": "llm-pod-gpu-abcde", "state": "allocated,reserved"}
                    ],
                },
            }
        ]
    }
    assert dra_details(nimservice({}), RenderContext()) == {}
