"""``kubectl create token`` on localcluster: the serviceaccounts/token subresource.

kubectl sends the TokenRequest as protobuf and asks for protobuf back. The token
it prints authenticates as the ServiceAccount (RBAC applies to it) until the
ServiceAccount is deleted; refusals read as kube-apiserver's.
"""

from __future__ import annotations

import base64
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.authz import enable_rbac
from localcluster.cluster import LocalCluster
from tests.conftest import Kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed"),
]


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster(simulator=False) as c:
        enable_rbac(c)
        yield c


@pytest.fixture
def kc(cluster: LocalCluster, kubectl_binary: str, tmp_path: Path) -> Kubectl:
    home = tmp_path / "home"
    home.mkdir()
    return Kubectl(kubectl_binary, cluster.kubeconfig_path, home)


def _claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


async def test_create_token_for_a_missing_service_account_is_404(kc: Kubectl) -> None:
    out = await kc.run("create", "token", "robot", check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == 'error: failed to create token: serviceaccounts "robot" not found'


async def test_token_authenticates_as_the_service_account(kc: Kubectl) -> None:
    await kc.run("create", "serviceaccount", "robot")
    token = (await kc.run("create", "token", "robot")).stdout.strip()
    claims = _claims(token)
    assert claims["sub"] == "system:serviceaccount:default:robot"
    assert claims["aud"] == ["https://kubernetes.default.svc.cluster.local"]
    assert claims["exp"] - claims["iat"] == 3600  # the default lifetime
    assert claims["kubernetes.io"]["serviceaccount"]["name"] == "robot"
    who = await kc.run("--token", token, "auth", "whoami", "-o", "json")
    user = json.loads(who.stdout)["status"]["userInfo"]
    assert user["username"] == "system:serviceaccount:default:robot"
    assert "system:serviceaccounts:default" in user["groups"]
    denied = await kc.run("--token", token, "get", "pods", check=False)
    assert (
        'pods is forbidden: User "system:serviceaccount:default:robot" cannot list resource '
        '"pods" in API group "" in the namespace "default"'
    ) in denied.stderr
    minted = await kc.run("--token", token, "create", "token", "robot", check=False)
    assert minted.stderr.strip() == (
        'error: failed to create token: serviceaccounts "robot" is forbidden: User '
        '"system:serviceaccount:default:robot" cannot create resource "serviceaccounts/token" '
        'in API group "" in the namespace "default"'
    )
    await kc.run("delete", "serviceaccount", "robot")
    gone = await kc.run("--token", token, "auth", "whoami", check=False)
    assert gone.returncode != 0
    assert "Unauthorized" in gone.stderr  # a deleted ServiceAccount's token stops working


async def test_token_audience_duration_and_bound_objects(kc: Kubectl) -> None:
    await kc.run("create", "serviceaccount", "robot")
    out = await kc.run(
        "create", "token", "robot", "--audience=vault", "--duration=48h", "-o", "json"
    )
    request = json.loads(out.stdout)
    assert request["kind"] == "TokenRequest"
    assert request["spec"]["audiences"] == ["vault"]
    assert request["spec"]["expirationSeconds"] == 172800
    assert request["status"]["expirationTimestamp"].endswith("Z")
    claims = _claims(request["status"]["token"])
    assert claims["exp"] - claims["iat"] == 172800
    other = await kc.run("--token", request["status"]["token"], "auth", "whoami", check=False)
    assert other.returncode != 0  # not an audience of the API server
    short = await kc.run("create", "token", "robot", "--duration=5m", check=False)
    assert short.stderr.strip() == (
        'error: failed to create token: TokenRequest.authentication.k8s.io "" is invalid: '
        "spec.expirationSeconds: Invalid value: 300: may not specify a duration less than "
        "10 minutes"
    )
    missing = await kc.run(
        "create",
        "token",
        "robot",
        "--bound-object-kind=Secret",
        "--bound-object-name=s",
        check=False,
    )
    assert missing.stderr.strip() == 'error: failed to create token: secrets "s" not found'
    await kc.run("create", "secret", "generic", "s", "--from-literal=a=b")
    uid = (await kc.run("get", "secret", "s", "-o", "jsonpath={.metadata.uid}")).stdout
    bound = await kc.run(
        "create", "token", "robot", "--bound-object-kind=Secret", "--bound-object-name=s"
    )
    assert _claims(bound.stdout.strip())["kubernetes.io"]["secret"] == {"name": "s", "uid": uid}
    await kc.run("--token", bound.stdout.strip(), "auth", "whoami")
    await kc.run("delete", "secret", "s")
    revoked = await kc.run("--token", bound.stdout.strip(), "auth", "whoami", check=False)
    assert revoked.returncode != 0  # deleting the bound object revokes the token
    wrong_uid = await kc.run(
        "create",
        "token",
        "robot",
        "--bound-object-kind=Node",
        "--bound-object-name=n1",
        "--bound-object-uid=123",
        check=False,
    )
    assert wrong_uid.stderr.strip() == 'error: failed to create token: nodes "n1" not found'


def _pod(name: str, account: str) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "serviceAccountName": account,
                "nodeName": "gpu-node-1",
                "containers": [{"name": "c", "image": "nginx"}],
            },
        }
    )


async def test_pod_bound_tokens(kc: Kubectl) -> None:
    await kc.run("create", "serviceaccount", "robot")
    await kc.run("create", "serviceaccount", "other")
    await kc.run("apply", "-f", "-", input=_pod("theirs", "other"))
    theirs = await kc.run(
        "create",
        "token",
        "robot",
        "--bound-object-kind=Pod",
        "--bound-object-name=theirs",
        check=False,
    )
    assert theirs.stderr.strip() == (
        'error: failed to create token: cannot bind token for serviceaccount "robot" to pod '
        "running with different serviceaccount name."
    )
    await kc.run("apply", "-f", "-", input=_pod("mine", "robot"))
    stale = await kc.run(
        "create",
        "token",
        "robot",
        "--bound-object-kind=Pod",
        "--bound-object-name=mine",
        "--bound-object-uid=0000",
        check=False,
    )
    assert stale.stderr.strip() == (
        'error: failed to create token: Operation cannot be fulfilled on Pod "mine": the UID in '
        "the bound object reference (0000) does not match the UID in record. The object might "
        "have been deleted and then recreated"
    )
    uid = (await kc.run("get", "pod", "mine", "-o", "jsonpath={.metadata.uid}")).stdout
    token = await kc.run(
        "create", "token", "robot", "--bound-object-kind=Pod", "--bound-object-name=mine"
    )
    private = _claims(token.stdout.strip())["kubernetes.io"]
    assert private["pod"] == {"name": "mine", "uid": uid}
    assert private["node"] == {"name": "gpu-node-1"}  # no such Node object: the name only
    await kc.run("--token", token.stdout.strip(), "auth", "whoami")
