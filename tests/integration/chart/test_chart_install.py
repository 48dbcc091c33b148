"""The chart installed into a LocalCluster that enforces RBAC; the operator runs as
the chart's Deployment starts it and needs exactly the permissions the chart grants.

* the NIM docs examples reconcile to Ready, get updated and deleted, the
  webhooks (served with the chart's generated certificates) refuse a bad
  NIMService, and /metrics answers only callers allowed to read it;
* the audit log shows no 403 for the operator, and every permission the
  ClusterRole grants was used (the authorizer's decisions also count the
  escalation checks no request shows), documented exceptions aside;
* the ClusterRole covers every kind the controllers watch and own.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio

from localcluster.authz import Attributes, rule_allows, service_account_user
from localcluster.extensions import extensions_of
from nimctl_runtime.client import AlreadyExists, ApiError
from tests.integration.chart.helm import find
from tests.integration.chart.scenario import (
    API,
    OPENSHIFT_ONLY,
    OPTIONAL_RESOURCES,
    Installed,
    exercise_all,
    start_installed,
    stop_installed,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

# Granted but not necessarily used by the run, each for a reason docs/install.md gives:
# - update on */finalizers: checked only by the OwnerReferencesPermissionEnforcement
#   admission plugin (OpenShift), for the owner references we set;
# - get, update and delete on an owned kind: the skeleton reads the live object
#   when a write raced the cache, updates what a render changes and prunes what it
#   drops; the examples do not change or drop every kind (create is always used);
# - optional APIs (Gateway API routes, KServe, DRA claim templates, ...): granted
#   up front so the operator can use one installed later; where served, they
#   must be watched, writes need examples the docs do not all have;
# - the PodDisruptionBudgets a driver upgrade reads only while it drains workloads;
# - the Endpoints the OpenShift-only prometheus-k8s Role grants cluster monitoring;
# - OpenShift only: the operands' SCCs, the ClusterVersion watch, the Proxy and the
#   Driver Toolkit ImageStream (this cluster is not OpenShift).
NO_EXAMPLE = {
    ("policy", "poddisruptionbudgets"),  # read only while a driver upgrade drains workloads
    ("", "endpoints"),  # granted on OpenShift only (state-operator-metrics' prometheus-k8s Role)
}
# Held only because NVIDIA's NeMo Customizer Role (which the operator writes for the
# Customizer's training jobs) grants them, and RBAC lets nobody write a Role granting
# more than the writer holds. list/watch on a /status subresource is a request no
# client can make, so nothing but that escalation check ever "uses" these.
HELD_FOR_CUSTOMIZER_ROLE = {
    (verb, group, resource)
    for verb in ("list", "watch")
    for group, resource in (
        ("batch", "jobs/status"),
        ("batch.volcano.sh", "jobs/status"),
        ("scheduling.volcano.sh", "queues/status"),
        ("scheduling.incubator.k8s.io", "queues/status"),
        ("nvidia.com", "nemotrainingjobs/status"),
    )
}


def is_exception(atom: tuple[str, str, str, str], owned: set[tuple[str, str]], optional: set[tuple[str, str]]) -> bool:
    verb, group, resource, _name = atom
    if resource.endswith("/finalizers"):
        return verb == "update"
    if (
        (group, resource) in NO_EXAMPLE
        or (group, resource, verb) in OPENSHIFT_ONLY
        or (verb, group, resource) in HELD_FOR_CUSTOMIZER_ROLE
    ):
        return True
    if (group, resource) in OPTIONAL_RESOURCES:
        # granted up front (rbac.optionalAPIs=all); watched only where served
        return (group, resource) not in optional or verb not in ("list", "watch")
    return verb in ("get", "update", "delete") and (group, resource) in owned


async def optional_kinds(env: Installed) -> set[tuple[str, str]]:
    """(group, resource) of the optional (discovered) kinds this cluster serves."""
    from platforms.capabilities import OPTIONAL_GVKS

    out = set()
    for api_version, kind in OPTIONAL_GVKS:
        with contextlib.suppress(ApiError):
            mapping = await env.operator.client.mapper.rest_mapping(api_version, kind)
            out.add((mapping.group, mapping.resource))
    return out


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Installed]:
    installed = await start_installed(tmp_path_factory.mktemp("chart"), ecosystem=True)
    try:
        yield installed
    finally:
        await stop_installed(installed)


async def owned_kinds(env: Installed) -> set[tuple[str, str]]:
    """(group, resource) of every kind some controller owns (its Owns watches)."""
    from nimctl_runtime.handler import EnqueueRequestForOwner

    out = set()
    for ctrl in await controllers_of(env):
        for watch in ctrl.watches:
            if isinstance(unwrapped(watch.handler), EnqueueRequestForOwner):
                mapping = await env.operator.client.mapper.rest_mapping(watch.api_version, watch.kind)
                out.add((mapping.group, mapping.resource))
    return out


def unwrapped(handler: Any) -> Any:
    """The handler a wrapper (``controllers.gpu.coalesce.Coalesced``) delegates to."""
    while hasattr(handler, "inner"):
        handler = handler.inner
    return handler


async def controllers_of(env: Installed) -> list[Any]:
    """The controllers ``nimctl run`` sets up on this cluster (recorded, not started)."""
    from controllers.setup import SetupOptions, discover_capabilities, setup_controllers
    from nimctl_runtime.manager import Manager

    client = env.operator.client
    manager = Manager(client)
    added: list[Any] = []
    manager.add = added.append  # type: ignore[method-assign]
    capabilities = await discover_capabilities(client)
    options = SetupOptions(capabilities=capabilities, extra={"environ": dict(env.operator.env)})
    setup_controllers(manager, client, options)
    return [c for c in added if hasattr(c, "watches")]


def granted_atoms(objects: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(verb, group, resource, resourceName) for every grant of the operator's ClusterRole and Role."""
    return granted_atoms_of(
        [
            o
            for o in objects
            if not o["metadata"]["name"].endswith("-metrics-reader")  # for Prometheus
            # a hook's own ServiceAccount (the CRD upgrade Job): test_crd_hook.py
            and "helm.sh/hook" not in (o["metadata"].get("annotations") or {})
        ]
    )


def granted_atoms_of(objects: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(verb, group, resource, resourceName) for every grant of the ClusterRoles and Roles."""
    atoms = []
    for obj in objects:
        if obj["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in obj.get("rules") or []:
            for verb in rule["verbs"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for name in rule.get("resourceNames") or [""]:
                            atoms.append((verb, group, resource, name))
    return atoms


def used(atom: tuple[str, str, str, str], decisions: list[tuple[Attributes, bool]]) -> bool:
    verb, group, resource, name = atom
    rule = {"verbs": [verb], "apiGroups": [group], "resources": [resource]}
    if name:
        rule["resourceNames"] = [name]
    return any(allowed and rule_allows(rule, attrs) for attrs, allowed in decisions)


@pytest.mark.timeout(900)
async def test_installed_operator_reconciles_with_exactly_the_granted_permissions(env: Installed) -> None:
    audit = extensions_of(env.cluster).audit
    await exercise_all(env, platforms=True)
    user = env.operator.user
    denied = [r for r in audit.records(user=user, resource_requests_only=False) if r.code == 403]
    assert denied == [], [(r.verb, r.api_group, r.resource, r.subresource, r.namespace, r.name) for r in denied]
    decisions = env.authorizer.decisions(user)
    assert not [d for d in decisions if not d[1]], "the operator was refused something"
    # ... while it wrote every kind's status and the objects only some kinds make
    # (the exercises reached Ready, so these are proof the run covered them)
    writes = {(a.verb, f"{a.resource}/{a.subresource}" if a.subresource else a.resource) for a, _ in decisions}
    expected = {("patch", f"{kind}/status") for kind in (
        "nimservices", "nimcaches", "nimpipelines", "nimbuilds", "nemocustomizers", "nemodatastores",
        "nemoentitystores", "nemoevaluators", "nemoguardrails", "clusterpolicies", "nvidiadrivers",
        "gpuclusters")} | {
        ("create", "inferenceservices"),  # KServe NIMService
        ("create", "resourceclaimtemplates"),  # DRA NIMService
        ("create", "leaderworkersets"),  # multi-node NIMService
        ("delete", "pods"),  # the driver upgrade deletes the GPU pods (podDeletion)
        ("patch", "nodes"),  # upgrade states, cordon
    }
    assert expected - writes == set(), f"never done under the chart's RBAC: {expected - writes}"


async def test_every_granted_permission_was_used(env: Installed) -> None:
    """After the whole run (the examples above, the webhook and /metrics tests below)."""
    await test_metrics_answer_only_callers_allowed_to_read_them(env)
    decisions = env.authorizer.decisions(env.operator.user)
    owned = await owned_kinds(env)
    optional = await optional_kinds(env)
    unused = [a for a in granted_atoms(env.objects) if not is_exception(a, owned, optional) and not used(a, decisions)]
    assert unused == [], f"granted but never used: {unused}"


async def test_webhooks_are_served_with_the_charts_certificates(env: Installed) -> None:
    await env.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bad"}})
    bad = {
        "apiVersion": API,
        "kind": "NIMService",
        "metadata": {"name": "bad", "namespace": "bad"},
        # No storage: only the webhook knows one of nimCache/pvc/hostPath/emptyDir is needed.
        "spec": {"image": {"repository": "nvcr.io/nim/x", "tag": "1"}, "authSecret": "s", "expose": {"service": {"port": 8000}}},
    }
    with pytest.raises(ApiError) as err:
        await env.admin.create(bad)
    assert 'admission webhook "vnimservice-v1alpha1.kb.io" denied the request' in err.value.message
    assert "spec.storage" in err.value.message


async def test_metrics_answer_only_callers_allowed_to_read_them(env: Installed) -> None:
    url = f"http://127.0.0.1:{env.metrics_port}/metrics"
    reader = service_account_user("monitoring", "prometheus")
    binding = (
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "prometheus-reads-nimctl-metrics"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nimctl-metrics-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "monitoring"}],
        }
    )
    with contextlib.suppress(AlreadyExists):
        await env.admin.create(binding)
    async with aiohttp.ClientSession() as http:
        async with http.get(url) as resp:
            assert resp.status == 401
        stranger = env.cluster.token_for(service_account_user("monitoring", "stranger"))
        async with http.get(url, headers={"Authorization": f"Bearer {stranger}"}) as resp:
            assert resp.status == 403
        token = env.cluster.token_for(reader)
        async with http.get(url, headers={"Authorization": f"Bearer {token}"}) as resp:
            assert resp.status == 200
            assert "controller_runtime_reconcile_total" in await resp.text()


async def test_cluster_role_covers_every_kind_the_controllers_watch_and_own(env: Installed) -> None:
    """Derived from the controllers themselves: every watched kind is listed and watched,
    the custom resources reconciled get their status patched, owned kinds are created
    and pruned."""
    from nimctl_runtime.handler import EnqueueRequestForObject, EnqueueRequestForOwner

    client = env.operator.client
    rules = find(env.objects, "ClusterRole", "nimctl")["rules"]
    controllers = await controllers_of(env)
    assert controllers, "no controllers were set up"
    missing = []
    for ctrl in controllers:
        for watch in ctrl.watches:
            mapping = await client.mapper.rest_mapping(watch.api_version, watch.kind)
            verbs = {"": ["list", "watch"]}
            if isinstance(unwrapped(watch.handler), EnqueueRequestForOwner):
                verbs[""] += ["create", "delete"]  # updates: where the audit run shows them
            if isinstance(unwrapped(watch.handler), EnqueueRequestForObject) and mapping.group.endswith("nvidia.com"):
                verbs["status"] = ["patch"]  # our custom resources report status
            for sub, sub_verbs in verbs.items():
                for verb in sub_verbs:
                    attrs = Attributes("u", (), verb, mapping.group, mapping.resource, sub, "ns")
                    if not any(rule_allows(r, attrs) for r in rules):
                        missing.append((ctrl.name, verb, mapping.group, f"{mapping.resource}/{sub}".rstrip("/")))
    assert missing == [], f"the ClusterRole lacks {missing}"
