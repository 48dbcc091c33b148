"""ServiceAccount tokens authenticate only while valid: signature, lifetime, audience, owner."""

from __future__ import annotations

import base64
import json
from typing import Any

from localcluster.tokens import ISSUER, TokenIssuer

ACCOUNT = {"metadata": {"name": "robot", "namespace": "nim", "uid": "sa-1"}}
POD = {"metadata": {"name": "p", "namespace": "nim", "uid": "pod-1"}}


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def _claims(**changes: Any) -> dict[str, Any]:
    claims: dict[str, Any] = {
        "aud": [ISSUER],
        "exp": 1_000_000 + 600,
        "iat": 1_000_000,
        "nbf": 1_000_000,
        "iss": ISSUER,
        "sub": "system:serviceaccount:nim:robot",
        "kubernetes.io": {"namespace": "nim", "serviceaccount": {"name": "robot", "uid": "sa-1"}},
    }
    claims.update(changes)
    return claims


def _objects(*objs: dict[str, Any]) -> Any:
    kinds = {"sa-1": "ServiceAccount", "pod-1": "Pod"}
    table = {(kinds[o["metadata"]["uid"]], o["metadata"]["name"]): o for o in objs}
    return lambda kind, _ns, name: table.get((kind, name))


def test_a_valid_token_authenticates_as_its_service_account() -> None:
    issuer = TokenIssuer(clock=Clock())
    user = issuer.authenticate(issuer.sign(_claims()), _objects(ACCOUNT))
    assert user is not None
    assert user[0] == "system:serviceaccount:nim:robot"
    assert "system:serviceaccounts:nim" in user[1]


def test_expired_foreign_or_tampered_tokens_do_not_authenticate() -> None:
    clock = Clock()
    issuer = TokenIssuer(clock=clock)
    token = issuer.sign(_claims())
    lookup = _objects(ACCOUNT)
    clock.now += 601
    assert issuer.authenticate(token, lookup) is None  # expired
    clock.now -= 601
    assert TokenIssuer().authenticate(token, lookup) is None  # another cluster's key
    head, _body, sig = token.split(".")
    forged = json.dumps(_claims(sub="system:serviceaccount:nim:admin")).encode()
    forged_body = base64.urlsafe_b64encode(forged).rstrip(b"=").decode()
    assert issuer.authenticate(f"{head}.{forged_body}.{sig}", lookup) is None
    assert issuer.authenticate(issuer.sign(_claims(aud=["vault"])), lookup) is None


def test_a_token_dies_with_its_service_account_or_bound_pod() -> None:
    issuer = TokenIssuer(clock=Clock())
    token = issuer.sign(_claims())
    recreated = {"metadata": {**ACCOUNT["metadata"], "uid": "sa-2"}}
    assert issuer.authenticate(token, lambda *_: None) is None
    assert issuer.authenticate(token, lambda *_: recreated) is None
    private = {**_claims()["kubernetes.io"], "pod": {"name": "p", "uid": "pod-1"}}
    bound = issuer.sign(_claims(**{"kubernetes.io": private}))
    assert issuer.authenticate(bound, _objects(ACCOUNT, POD)) is not None
    assert issuer.authenticate(bound, _objects(ACCOUNT)) is None
