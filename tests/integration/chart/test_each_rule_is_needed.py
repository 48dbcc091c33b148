"""Every rule of the chart's ClusterRole and leader-election Role is needed: with any
one of them removed, the operator (run as the chart's pod, on the same examples)
is refused something that rule grants, with a 403 or an escalation refusal.

Documented exceptions (docs/install.md): the */finalizers rules (only the
OwnerReferencesPermissionEnforcement admission plugin checks them), the
PodDisruptionBudgets a driver upgrade reads only while it drains workloads, the
Endpoints the OpenShift-only ``prometheus-k8s`` Role grants, rules for optional
APIs this cluster does not serve (granted up front for when they are installed),
and leader-election Role rules the ClusterRole also grants cluster-wide (the GPU
group's leases).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import time
from pathlib import Path
from typing import Any

import pytest

from localcluster.authz import rule_allows
from tests.integration.chart.helm import render, require_helm
from tests.integration.chart.install import served_api_versions
from tests.integration.chart.scenario import (
    OPTIONAL_RESOURCES,
    Installed,
    exercise_all,
    scrape_metrics,
    start_installed,
    stop_installed,
)

EXEMPT = ("/finalizers", "poddisruptionbudgets", "endpoints")
# The rules are split over this many tests (every SHARDS-th rule each), so that
# pytest-xdist spreads the minutes of one cluster per rule over the cores.
SHARDS = 4
ROLES = ("nimctl", "nimctl-leader-election")


def _rules(objects: list[dict[str, Any]], served: set[tuple[str, str]]) -> list[tuple[str, int, dict[str, Any]]]:
    """The rules to remove one by one: not the exceptions, not resources this cluster
    does not serve (optional APIs granted up front)."""
    out = []
    cluster_wide = {
        (g, r, v)
        for obj in objects
        if obj["kind"] == "ClusterRole" and obj["metadata"]["name"] == ROLES[0]
        for rule in obj["rules"]
        for g in rule.get("apiGroups", [])
        for r in rule.get("resources", [])
        for v in rule.get("verbs", [])
    }
    for obj in objects:
        if obj["kind"] in ("ClusterRole", "Role") and obj["metadata"]["name"] in ROLES:
            for i, rule in enumerate(obj["rules"]):
                resources = rule.get("resources", [])
                if any(r.endswith(EXEMPT) for r in resources):
                    continue
                grants = {(g, r, v) for g in rule.get("apiGroups", []) for r in resources
                          for v in rule.get("verbs", [])}  # fmt: skip
                if obj["metadata"]["name"] == ROLES[1] and grants <= cluster_wide:
                    # The leader-election Role is redundant while the ClusterRole holds the
                    # same grants everywhere (the GPU group does: the DRA driver's controller
                    # ClusterRole hands on leases); it is what remains with gpu.enabled=false.
                    continue
                base = {(g, r.split("/")[0]) for g in rule.get("apiGroups", []) for r in resources}
                if base & OPTIONAL_RESOURCES and not base <= served:
                    continue
                out.append((obj["metadata"]["name"], i, rule))
    return out


async def served_resources(env: Installed) -> set[tuple[str, str]]:
    """(group, resource) of everything the cluster serves, from discovery."""
    out = set()
    core = await env.admin.request("GET", "/api/v1")
    out |= {("", r["name"]) for r in core["resources"]}
    for group in (await env.admin.request("GET", "/apis"))["groups"]:
        for version in group["versions"]:
            listing = await env.admin.request("GET", f"/apis/{version['groupVersion']}")
            out |= {(group["name"], r["name"].split("/")[0]) for r in listing["resources"]}
    return out


def _without(role: str, index: int) -> Any:
    def edit(objects: list[dict[str, Any]]) -> None:
        for obj in objects:
            if obj["kind"] in ("ClusterRole", "Role") and obj["metadata"]["name"] == role:
                del obj["rules"][index]

    return edit


async def _refused(env: Installed, rule: dict[str, Any], timeout: float) -> str | None:
    """Run the examples until the operator is refused something *rule* grants."""
    user = env.operator.user

    async def watch() -> str:
        while True:
            for attrs, allowed in env.authorizer.decisions(user):
                if not allowed and rule_allows(rule, attrs):
                    where = attrs.namespace or "cluster"
                    sub = f"/{attrs.subresource}" if attrs.subresource else ""
                    return f"{attrs.verb} {attrs.resource}{sub} {attrs.name} ({where})"
            await asyncio.sleep(0.1)

    async def drive() -> None:
        with contextlib.suppress(Exception):
            await scrape_metrics(env)
        with contextlib.suppress(Exception):
            await exercise_all(env)
        await asyncio.sleep(timeout)

    watcher = asyncio.create_task(watch())
    driver = asyncio.create_task(drive())
    done, _ = await asyncio.wait({watcher, driver}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    for task in (watcher, driver):
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
    return watcher.result() if watcher in done and not watcher.cancelled() else None


@pytest.mark.timeout(3600)
@pytest.mark.parametrize("shard", range(SHARDS))
async def test_removing_any_rule_gets_the_operator_refused(tmp_path: Path, shard: int) -> None:
    require_helm()
    probe = await start_installed(tmp_path / "probe", wait_for_leader=False)
    try:
        api_versions = await served_api_versions(probe.admin)
        served = await served_resources(probe)
    finally:
        await stop_installed(probe, graceful=False)
    objects = render({}, namespace="nimctl-system", api_versions=api_versions)
    rules = _rules(objects, served)
    assert len(rules) > 20, rules
    not_needed = []
    figures = []
    for n, (role, index, rule) in enumerate(rules):
        if n % SHARDS != shard:
            continue
        started = time.monotonic()
        env = await start_installed(tmp_path / f"r{n}", edit=_without(role, index), wait_for_leader=False)
        try:
            refusal = await _refused(env, copy.deepcopy(rule), timeout=120)
        finally:
            await stop_installed(env, graceful=False)
        figures.append((time.monotonic() - started, rule.get("resources"), refusal))
        if refusal is None:
            not_needed.append((role, rule))
    for seconds, resources, refusal in figures:
        print(f"{seconds:6.1f}s  without {resources}: refused {refusal}")
    assert not_needed == [], f"rules nothing was refused without: {not_needed}"
