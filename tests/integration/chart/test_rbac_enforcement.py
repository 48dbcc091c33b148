"""localcluster enforces RBAC once ``enable_rbac`` is on: bindings, scopes, names,
subresources, non-resource URLs, escalation checks, access reviews and kubectl."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from localcluster.authz import enable_rbac, service_account_user
from localcluster.cluster import LocalCluster
from nimctl_runtime.client import Client, Forbidden, NotFound
from tests.conftest import Kubectl

RBAC = "rbac.authorization.k8s.io/v1"
SA_USER = service_account_user("team", "bot")


def role(name: str, rules: list[dict], namespace: str | None = None) -> dict:
    kind = "Role" if namespace else "ClusterRole"
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": RBAC, "kind": kind, "metadata": meta, "rules": rules}


def binding(name: str, role_kind: str, role_name: str, subjects: list[dict], namespace: str | None = None) -> dict:
    kind = "RoleBinding" if namespace else "ClusterRoleBinding"
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {
        "apiVersion": RBAC,
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": subjects,
    }


SA_SUBJECT = {"kind": "ServiceAccount", "name": "bot", "namespace": "team"}


@pytest.fixture
async def env(cluster: LocalCluster, tmp_path: Path) -> AsyncIterator[tuple[LocalCluster, Client, Client]]:
    enable_rbac(cluster)
    async with Client(str(cluster.kubeconfig_path)) as admin:
        for ns in ("team", "other"):
            await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        kubeconfig = cluster.write_kubeconfig(tmp_path / "bot.kubeconfig", user=SA_USER)
        async with Client(str(kubeconfig)) as bot:
            yield cluster, admin, bot


async def test_nothing_is_allowed_until_bound_and_the_message_is_kubernetes(env) -> None:
    _, admin, bot = env
    with pytest.raises(Forbidden) as err:
        await bot.list("v1", "ConfigMap", "team")
    assert err.value.message == (
        f'configmaps is forbidden: User "{SA_USER}" cannot list resource "configmaps" '
        'in API group "" in the namespace "team"'
    )
    with pytest.raises(Forbidden) as err:
        await bot.get("apps/v1", "Deployment", "web", "team")
    assert err.value.message == (
        f'deployments.apps "web" is forbidden: User "{SA_USER}" cannot get resource '
        '"deployments" in API group "apps" in the namespace "team"'
    )
    with pytest.raises(Forbidden) as err:
        await bot.list("v1", "Node")
    assert err.value.message.endswith('cannot list resource "nodes" in API group "" at the cluster scope')
    # The admin stays all-powerful.
    assert (await admin.list("v1", "Node"))["items"] is not None


async def test_role_binding_grants_only_in_its_namespace(env) -> None:
    _, admin, bot = env
    await admin.create(role("cm-reader", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}], "team"))
    await admin.create(binding("bot-cm", "Role", "cm-reader", [SA_SUBJECT], "team"))
    assert (await bot.list("v1", "ConfigMap", "team"))["items"] == []
    with pytest.raises(Forbidden):
        await bot.list("v1", "ConfigMap", "other")
    with pytest.raises(Forbidden):
        await bot.list("v1", "ConfigMap")  # all namespaces is cluster scope
    with pytest.raises(Forbidden):
        await bot.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x", "namespace": "team"}})
    # A ClusterRole bound by a ClusterRoleBinding grants everywhere.
    await admin.create(role("cm-all", [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]))
    await admin.create(binding("bot-cm-all", "ClusterRole", "cm-all", [SA_SUBJECT]))
    assert (await bot.list("v1", "ConfigMap"))["items"] == []
    # Revoking takes effect at once.
    await admin.delete(RBAC, "ClusterRoleBinding", "bot-cm-all")
    with pytest.raises(Forbidden):
        await bot.list("v1", "ConfigMap")


async def test_groups_resource_names_and_subresources(env) -> None:
    _, admin, bot = env
    await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "mine", "namespace": "team"}})
    await admin.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "theirs", "namespace": "team"}})
    await admin.create(
        role(
            "named",
            [
                {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["mine"], "verbs": ["get", "update"]},
                {"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["get"]},
            ],
        )
    )
    # Bound to the group every ServiceAccount of the namespace is in.
    await admin.create(
        binding("sa-group", "ClusterRole", "named", [{"kind": "Group", "name": "system:serviceaccounts:team"}], "team")
    )
    assert (await bot.get("v1", "ConfigMap", "mine", "team"))["metadata"]["name"] == "mine"
    with pytest.raises(Forbidden):
        await bot.get("v1", "ConfigMap", "theirs", "team")
    with pytest.raises(Forbidden):
        await bot.list("v1", "ConfigMap", "team")  # resourceNames never grant list
    # deployments/status is granted, deployments is not.
    with pytest.raises(NotFound):
        await bot.request("GET", "/apis/apps/v1/namespaces/team/deployments/web/status")
    with pytest.raises(Forbidden) as err:
        await bot.get("apps/v1", "Deployment", "web", "team")
    assert 'cannot get resource "deployments"' in err.value.message


async def test_non_resource_urls_come_from_cluster_role_bindings(env) -> None:
    _, admin, bot = env
    # Discovery and /version are public to authenticated users (bootstrap policy).
    await bot.request("GET", "/version")
    await bot.request("GET", "/apis")
    with pytest.raises(Forbidden) as err:
        await bot.request("GET", "/metrics")
    assert err.value.message == f'forbidden: User "{SA_USER}" cannot get path "/metrics"'
    await admin.create(role("metrics", [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]))
    await admin.create(binding("metrics", "ClusterRole", "metrics", [SA_SUBJECT], "team"))
    with pytest.raises(Forbidden):  # a RoleBinding cannot grant a path
        await bot.request("GET", "/metrics")
    await admin.create(binding("metrics", "ClusterRole", "metrics", [SA_SUBJECT]))
    with pytest.raises(NotFound):  # allowed now; localcluster serves no /metrics
        await bot.request("GET", "/metrics")


async def test_aggregated_cluster_roles(env) -> None:
    _, admin, bot = env
    await admin.create(
        {
            "apiVersion": RBAC,
            "kind": "ClusterRole",
            "metadata": {"name": "aggregate"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"team/aggregate": "true"}}]},
        }
    )
    await admin.create(binding("agg", "ClusterRole", "aggregate", [SA_SUBJECT]))
    with pytest.raises(Forbidden):
        await bot.list("v1", "Secret", "team")
    piece = role("piece", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["list"]}])
    piece["metadata"]["labels"] = {"team/aggregate": "true"}
    await admin.create(piece)
    assert (await bot.list("v1", "Secret", "team"))["items"] == []


async def test_escalation_is_prevented(env) -> None:
    _, admin, bot = env
    await admin.create(
        role(
            "role-writer",
            [
                {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create"]},
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
            ],
        )
    )
    await admin.create(binding("writer", "ClusterRole", "role-writer", [SA_SUBJECT], "team"))
    # A Role within what the writer holds is fine.
    await bot.create(role("pod-get", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}], "team"))
    with pytest.raises(Forbidden) as err:
        await bot.create(role("secrets", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}], "team"))
    assert "is attempting to grant RBAC permissions not currently held" in err.value.message
    assert '{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}' in err.value.message
    # Binding a role the writer could not grant itself is refused too.
    await admin.create(role("secrets", [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}], "team"))
    with pytest.raises(Forbidden):
        await bot.create(binding("b", "Role", "secrets", [SA_SUBJECT], "team"))
    await bot.create(binding("b", "Role", "pod-get", [SA_SUBJECT], "team"))


async def test_access_reviews_answer_from_the_policy(env) -> None:
    _, admin, bot = env
    await admin.create(role("pods", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], "team"))
    await admin.create(binding("pods", "Role", "pods", [SA_SUBJECT], "team"))

    def ssar(verb: str, ns: str) -> dict:
        return {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "metadata": {},
            "spec": {"resourceAttributes": {"verb": verb, "resource": "pods", "namespace": ns}},
        }

    assert (await bot.create(ssar("list", "team")))["status"]["allowed"] is True
    assert (await bot.create(ssar("delete", "team")))["status"]["allowed"] is False
    assert (await bot.create(ssar("list", "other")))["status"]["allowed"] is False
    sar = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "metadata": {},
        "spec": {"user": SA_USER, "groups": ["system:authenticated"], "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "team"}},
    }
    with pytest.raises(Forbidden):  # asking about others needs a grant
        await bot.create(sar)
    assert (await admin.create(sar))["status"]["allowed"] is True
    rules = await bot.create(
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "metadata": {}, "spec": {"namespace": "team"}}
    )
    assert {"verbs": ["list"], "apiGroups": [""], "resources": ["pods"]} in rules["status"]["resourceRules"]


@pytest.mark.kubectl
async def test_kubectl_auth_can_i_and_forbidden_output(env, kubectl_binary: str, tmp_path: Path) -> None:
    cluster, admin, _ = env
    await admin.create(role("pods", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}], "team"))
    await admin.create(binding("pods", "Role", "pods", [SA_SUBJECT], "team"))
    home = tmp_path / "home"
    home.mkdir()
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubectl-bot.kubeconfig", user=SA_USER)
    bot = Kubectl(kubectl_binary, kubeconfig, home)
    yes = await bot.run("auth", "can-i", "list", "pods", "-n", "team", check=False)
    assert (yes.returncode, yes.stdout.strip()) == (0, "yes")
    no = await bot.run("auth", "can-i", "delete", "pods", "-n", "team", check=False)
    assert (no.returncode, no.stdout.strip()) == (1, "no")
    no = await bot.run("auth", "can-i", "list", "pods", "-n", "other", check=False)
    assert no.stdout.strip() == "no"
    denied = await bot.run("get", "secrets", "-n", "team", check=False)
    assert denied.returncode == 1
    assert (
        f'Error from server (Forbidden): secrets is forbidden: User "{SA_USER}" cannot list '
        'resource "secrets" in API group "" in the namespace "team"'
    ) in denied.stderr
    admin_kubectl = Kubectl(kubectl_binary, cluster.kubeconfig_path, home)
    everything = await admin_kubectl.run("auth", "can-i", "*", "*", check=False)
    assert everything.stdout.strip() == "yes"
    who = await admin_kubectl.run("auth", "can-i", "list", "pods", "-n", "team", f"--as={SA_USER}", check=False)
    assert who.stdout.strip() == "yes"
