"""The chart's ClusterRole holds every rule the GPU operands' Roles and ClusterRoles grant:
Kubernetes refuses to let the operator write a role granting what it does not hold
itself (no ``escalate``), so a rule missing here breaks that state on a real cluster.
Every state is rendered, in every mode that enables it (sandbox, kata, OpenShift), not
just the default ClusterPolicy the RBAC-enforced run exercises."""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.chart.helm import render, require_helm
from tests.unit.platforms_gpu.helpers import facts, node, objects

VARIANTS: dict[str, dict[str, Any]] = {
    "default, every optional state": {
        "dcgm": {"enabled": True},
        "dcgmExporter": {"enablePodLabels": True},
        "nodeStatusExporter": {"enabled": True},
    },
    "kubevirt": {
        "sandboxWorkloads": {"enabled": True, "mode": "kubevirt"},
        "vgpuManager": {
            "enabled": True,
            "repository": "r.example",
            "image": "vgpu",
            "version": "1",
        },
    },
    "kata": {
        "sandboxWorkloads": {"enabled": True, "mode": "kata"},
        "kataSandboxDevicePlugin": {"enabled": True},
        "ccManager": {"enabled": True},
    },
}


def _covers(held: dict[str, Any], group: str, resource: str, verb: str, name: str | None) -> bool:
    names = held.get("resourceNames") or []
    return (
        group in held["apiGroups"]
        and resource in held["resources"]
        and (verb in held["verbs"] or "*" in held["verbs"])
        and (not names or (name is not None and name in names))
    )


def _granted(
    variant: dict[str, Any], openshift: bool
) -> list[tuple[str, str, str, str | None, str]]:
    cluster = facts(node(os_id="rhcos", version="4.16"), openshift="4.16.3") if openshift else None
    out = []
    for obj in objects(variant, cluster):
        if obj["kind"] not in ("Role", "ClusterRole"):
            continue
        where = f"{obj['kind']}/{obj['metadata']['name']}"
        for rule in obj["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        for name in rule.get("resourceNames") or [None]:
                            out.append((group, resource, verb, name, where))
    return out


@pytest.mark.parametrize("openshift", [False, True], ids=["kubernetes", "openshift"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_the_operator_holds_what_each_operand_role_grants(variant: str, openshift: bool) -> None:
    require_helm()
    (cluster_role,) = [
        o for o in render({}) if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "nimctl"
    ]
    missing = sorted(
        {
            (group, resource, verb, name, where)
            for group, resource, verb, name, where in _granted(VARIANTS[variant], openshift)
            if not any(_covers(r, group, resource, verb, name) for r in cluster_role["rules"])
        }
    )
    assert missing == [], f"the chart's ClusterRole lacks what these roles grant: {missing}"
