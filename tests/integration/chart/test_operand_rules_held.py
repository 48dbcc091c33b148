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


def _openshift_kinds() -> dict[tuple[str, str], tuple[str, str]]:
    """(apiVersion, kind) -> (group, resource) of what only OpenShift serves."""
    from localcluster.openshift import openshift_crds

    out = {}
    for crd in openshift_crds():
        spec = crd["spec"]
        gvk = (f"{spec['group']}/{spec['versions'][0]['name']}", spec["names"]["kind"])
        out[gvk] = (spec["group"], spec["names"]["plural"])
    return out


def _openshift_needs() -> set[tuple[str, str, str, str]]:
    """(group, resource, verb, why) the GPU controllers use on OpenShift, read from them:
    the kinds they own there (watched, created, updated, pruned, read when a write
    races the cache) and the kinds their OpenShift detection caches (listed, watched)."""
    from controllers.gpu.openshift import cache_options
    from platforms.capabilities import OPENSHIFT_GVKS, Capabilities
    from platforms.gpu.contract import ClusterPolicyContract
    from platforms.gpu.nvidiadriver import NVIDIADriverContract

    caps = Capabilities.from_gvks(OPENSHIFT_GVKS)
    kinds = _openshift_kinds()
    out = set()
    for contract in (ClusterPolicyContract(), NVIDIADriverContract()):
        for gvk in contract.owned_kinds(caps):
            if gvk in kinds:
                for verb in ("get", "list", "watch", "create", "update", "delete"):
                    out.add((*kinds[gvk], verb, f"{type(contract).__name__} owns {gvk[1]}"))
    for gvk in cache_options(caps, driver=True):
        for verb in ("list", "watch"):
            out.add((*kinds[gvk], verb, f"cached: {gvk[1]}"))
    return out


@pytest.mark.parametrize("optional_apis", ["all", "detect"])
def test_the_operator_holds_what_it_does_with_openshift_kinds(optional_apis: str) -> None:
    """On OpenShift the controllers create the operands' SCCs and cache the ClusterVersion,
    Proxy and Driver Toolkit ImageStream; with ``rbac.optionalAPIs=detect`` on a cluster
    serving them the chart grants that, on one that does not it grants none of it beyond
    what the operand roles need (SCC ``use``, ClusterVersion get/list)."""
    require_helm()
    needs = _openshift_needs()
    # every OpenShift kind is used: SCCs owned, the other three cached
    assert {(g, r) for g, r, _, _ in needs} == set(_openshift_kinds().values()), needs
    values = {"rbac": {"optionalAPIs": optional_apis}}
    served = [f"{api}/{kind}" for api, kind in _openshift_kinds()] + [
        api for api, _ in _openshift_kinds()
    ]
    for api_versions in [served] if optional_apis == "all" else [served, []]:
        (cluster_role,) = [
            o
            for o in render(values, api_versions=api_versions)
            if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "nimctl"
        ]
        rules = cluster_role["rules"]
        missing = sorted(n for n in needs if not any(_covers(r, *n[:3], None) for r in rules))
        if api_versions:
            assert missing == [], f"the chart's ClusterRole lacks what OpenShift needs: {missing}"
        else:  # detect, not OpenShift: only what the driver ClusterRole hands on stays
            held = {(g, r, v) for g, r, v, _ in needs} - {(g, r, v) for g, r, v, _ in missing}
            assert held == {("config.openshift.io", "clusterversions", "list")}, held
