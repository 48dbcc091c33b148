"""``--authorization-mode RBAC`` and impersonation, driven by kubectl v1.32.

``kubectl --as``, ``kubectl auth can-i --as`` and ``kubectl auth whoami --as``
behave as on a real cluster: the request is served as the impersonated user
once the requester may ``impersonate`` it, and refused with kube-apiserver's
403 otherwise. The audit log keeps the requester as ``user`` and the
impersonated one beside it.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import ClientSession

from localcluster import extensions_of
from localcluster.cluster import LocalCluster
from tests.conftest import Kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]

READER = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: pod-reader}
rules:
- {apiGroups: [""], resources: [pods], verbs: [get, list]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: carol-reads-pods}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pod-reader}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: impersonate-carol}
rules:
- {apiGroups: [""], resources: [users], verbs: [impersonate], resourceNames: [carol]}
- {apiGroups: [""], resources: [groups], verbs: [impersonate], resourceNames: [dev]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: bob-impersonates-carol}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: impersonate-carol}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
"""


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(simulator=False, authorization_mode="RBAC") as c:
        yield c


def _kubectl(binary: str, kubeconfig: Path, tmp_path: Path, who: str) -> Kubectl:
    home = tmp_path / f"home-{who}"
    home.mkdir()
    return Kubectl(binary, kubeconfig, home)


@pytest.fixture
async def admin(cluster: LocalCluster, kubectl_binary: str, tmp_path: Path) -> Kubectl:
    kc = _kubectl(kubectl_binary, cluster.kubeconfig_path, tmp_path, "admin")
    await kc.run("apply", "-f", "-", input=READER)
    return kc


@pytest.fixture
def bob(cluster: LocalCluster, kubectl_binary: str, tmp_path: Path) -> Kubectl:
    kubeconfig = cluster.write_kubeconfig(tmp_path / "bob.kubeconfig", user="bob")
    return _kubectl(kubectl_binary, kubeconfig, tmp_path, "bob")


async def test_admin_acts_as_users_service_accounts_and_groups(admin: Kubectl) -> None:
    who = await admin.run("auth", "whoami", "--as", "carol", "-o", "json")
    assert json.loads(who.stdout)["status"]["userInfo"] == {
        "username": "carol",
        "groups": ["system:authenticated"],
    }
    sa = await admin.run(
        "auth", "whoami", "--as", "system:serviceaccount:nim:robot", "--as-uid", "42", "-o", "json"
    )
    assert json.loads(sa.stdout)["status"]["userInfo"] == {
        "username": "system:serviceaccount:nim:robot",
        "uid": "42",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:nim", "system:authenticated"],
    }
    # with RBAC on, the answers are the impersonated user's, not the admin's
    assert (await admin.run("auth", "can-i", "list", "pods", "--as", "carol")).stdout == "yes\n"
    no = await admin.run("auth", "can-i", "delete", "pods", "--as", "carol", check=False)
    assert (no.returncode, no.stdout) == (1, "no\n")
    no = await admin.run("auth", "can-i", "list", "pods", "--as", "dave", check=False)
    assert (no.returncode, no.stdout) == (1, "no\n")
    # a group can grant what the user alone lacks; system:masters grants everything
    masters = await admin.run(
        "auth", "can-i", "delete", "nodes", "--as", "dave", "--as-group", "system:masters"
    )
    assert masters.stdout == "yes\n"
    listed = await admin.run("auth", "can-i", "--list", "--as", "carol")
    assert any(line.split()[:1] == ["pods"] for line in listed.stdout.splitlines())
    refused = await admin.run("get", "secrets", "--as", "carol", check=False)
    assert refused.returncode == 1
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): secrets is forbidden: User "carol" cannot list '
        'resource "secrets" in API group "" in the namespace "default"'
    )


async def test_impersonate_verb_is_checked_for_each_thing_asked(
    cluster: LocalCluster, admin: Kubectl, bob: Kubectl
) -> None:
    # bob holds nothing but impersonate on user carol and group dev
    assert (await bob.run("get", "pods", "--as", "carol")).stderr.strip() == (
        "No resources found in default namespace."
    )
    who = await bob.run("auth", "whoami", "--as", "carol", "--as-group", "dev", "-o", "json")
    assert json.loads(who.stdout)["status"]["userInfo"] == {
        "username": "carol",
        "groups": ["dev", "system:authenticated"],
    }
    denied = await bob.run("get", "pods", "--as", "dave", check=False)
    assert denied.stderr.strip() == (
        'Error from server (Forbidden): users "dave" is forbidden: User "bob" cannot '
        'impersonate resource "users" in API group "" at the cluster scope'
    )
    denied = await bob.run("get", "pods", "--as", "carol", "--as-group", "ops", check=False)
    assert denied.stderr.strip() == (
        'Error from server (Forbidden): groups "ops" is forbidden: User "bob" cannot '
        'impersonate resource "groups" in API group "" at the cluster scope'
    )
    denied = await bob.run("get", "pods", "--as", "carol", "--as-uid", "7", check=False)
    assert denied.stderr.strip() == (
        'Error from server (Forbidden): uids.authentication.k8s.io "7" is forbidden: User '
        '"bob" cannot impersonate resource "uids" in API group "authentication.k8s.io" '
        "at the cluster scope"
    )
    denied = await bob.run("get", "pods", "--as", "system:serviceaccount:nim:robot", check=False)
    assert denied.stderr.strip() == (
        'Error from server (Forbidden): serviceaccounts "robot" is forbidden: User "bob" '
        'cannot impersonate resource "serviceaccounts" in API group "" in the namespace "nim"'
    )
    # without --as, bob is bob: no rights of his own
    own = await bob.run("get", "pods", check=False)
    assert 'User "bob" cannot list resource "pods"' in own.stderr
    # kubectl auth can-i --as by a user who may not impersonate: the 403, as kubectl prints it
    can_i = await bob.run("auth", "can-i", "list", "pods", "--as", "dave", check=False)
    assert can_i.returncode == 1
    assert 'users "dave" is forbidden: User "bob" cannot impersonate' in can_i.stderr
    # the audit log keeps who asked and who was served
    served = [
        (r.verb, r.resource, r.code, r.impersonated_user)
        for r in extensions_of(cluster).audit.records(user="bob", resource="pods")
    ]
    assert ("list", "pods", 200, "carol") in served
    assert ("list", "pods", 403, "") in served  # refused before anyone was impersonated
    # the impersonated request was authorized for carol, the impersonation for bob
    assert cluster.authorizer is not None
    verbs = {(a.user, a.verb, a.resource, ok) for a, ok in cluster.authorizer.decisions()}
    assert ("bob", "impersonate", "users", True) in verbs
    assert ("bob", "impersonate", "users", False) in verbs
    assert ("carol", "list", "pods", True) in verbs


async def test_user_extra_headers_and_groups_without_a_user(cluster: LocalCluster) -> None:
    """kubectl has no flag for extras (a kubeconfig's as-user-extra sets them): raw headers."""
    token = cluster.token_for("admin")
    url = f"{cluster.url}/apis/authentication.k8s.io/v1/selfsubjectreviews"
    review = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    async with ClientSession() as http:
        headers = {
            "Authorization": f"Bearer {token}",
            "Impersonate-User": "carol",
            "Impersonate-Extra-Scopes": "view",
            "Impersonate-Extra-Acme.com%2Fteam": "gpu",
        }
        async with http.post(
            url, json=review, headers=headers, ssl=cluster.client_ssl_context()
        ) as resp:
            assert resp.status == 201
            user = (await resp.json())["status"]["userInfo"]
        assert user["extra"] == {"scopes": ["view"], "acme.com/team": ["gpu"]}
        headers = {"Authorization": f"Bearer {token}", "Impersonate-Group": "dev"}
        async with http.post(
            url, json=review, headers=headers, ssl=cluster.client_ssl_context()
        ) as resp:
            assert resp.status == 500
            text = await resp.text()
    assert text.startswith('Internal Server Error: "/apis/authentication.k8s.io/v1/')
    assert text.rstrip().endswith("without impersonating a user")


async def test_nimctl_localcluster_takes_authorization_mode(
    kubectl_binary: str, tmp_path: Path
) -> None:
    kubeconfig = tmp_path / ".nimctl" / "kubeconfig"
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "nimctl",
        "localcluster",
        "--no-simulator",
        "--authorization-mode",
        "RBAC",
        "--kubeconfig",
        str(kubeconfig),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert proc.stdout is not None
        lines = []
        while not lines or not lines[-1].startswith("try: "):
            line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert line, f"nimctl localcluster exited early: {lines}"
            lines.append(line)
        assert any(line.startswith("authorization: RBAC") for line in lines)
        kc = _kubectl(kubectl_binary, kubeconfig, tmp_path, "cli")
        no = await kc.run("auth", "can-i", "get", "pods", "--as", "someone", check=False)
        assert (no.returncode, no.stdout) == (1, "no\n")
        assert (await kc.run("auth", "can-i", "get", "pods")).stdout == "yes\n"  # admin
    finally:
        proc.terminate()
        await proc.wait()
