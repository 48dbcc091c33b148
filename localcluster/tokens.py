"""ServiceAccount tokens: the ``serviceaccounts/token`` subresource and their authentication.

``POST /api/v1/namespaces/{ns}/serviceaccounts/{name}/token`` with an
``authentication.k8s.io/v1`` ``TokenRequest`` (JSON or protobuf, which is what
``kubectl create token`` sends) answers as kube-apiserver's ``TokenREST`` does:

- the ServiceAccount must exist (404 ``serviceaccounts "x" not found``);
  ``metadata.name``/``namespace``/``uid`` in the body, when set, must match it;
- ``spec.expirationSeconds`` defaults to 3600 and must be between 600 and 2^32
  (422 with kube-apiserver's messages); ``spec.audiences`` defaults to the API
  server's audience, ``https://kubernetes.default.svc.cluster.local``;
- ``spec.boundObjectRef`` may name a Pod (running as that ServiceAccount), a
  Secret or a Node; the object must exist and match the given uid (409);
- the answer (201) carries ``status.token``, a JWT signed with the cluster's
  ES256 key (``iss``, ``sub``, ``aud``, ``exp``, ``iat``, ``nbf``, ``jti`` and
  the ``kubernetes.io`` claims naming the namespace, ServiceAccount and bound
  objects), and ``status.expirationTimestamp``.

:class:`TokenIssuer` also authenticates such tokens, as kube-apiserver's
ServiceAccount token authenticator does: the signature, ``nbf``/``exp``, an
audience of the API server, and the ServiceAccount (and bound objects) still
existing with the same uid. A token authenticates as
``system:serviceaccount:<ns>:<name>``. The signing key lives as long as the
cluster process: a restarted cluster does not accept the old tokens.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import (
    decode_dss_signature,
    encode_dss_signature,
)

from nimctl_runtime import field
from nimctl_runtime.meta import Obj

from . import errors
from .storage import Storage

ISSUER: Final = "https://kubernetes.default.svc.cluster.local"
API_AUDIENCES: Final = (ISSUER,)
DEFAULT_EXPIRATION: Final = 3600
MIN_EXPIRATION: Final = 600
MAX_EXPIRATION: Final = 1 << 32
GROUP: Final = "authentication.k8s.io"
API_VERSION: Final = f"{GROUP}/v1"
SERVICE_ACCOUNT_PREFIX: Final = "system:serviceaccount:"
# What a token may be bound to: kind -> (apiVersion of its resource, namespaced).
_BINDABLE: Final = {"Pod": True, "Secret": True, "Node": False}

__all__ = ["API_AUDIENCES", "ISSUER", "TokenIssuer", "token_request"]

Lookup = Callable[[str, str, str], "Obj | None"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TokenIssuer:
    """Signs and verifies the cluster's ServiceAccount tokens (ES256 JWTs)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        public = self._key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.key_id = _b64(hashlib.sha256(public).digest())
        self.clock = clock
        # token -> its verified claims: the signature of a given text never changes, and an
        # ECDSA verify per request was the most of authenticating a ServiceAccount. Expiry,
        # audience and the bound objects are still checked on every request.
        self._verified: dict[str, Obj] = {}
        # token -> (user and groups, nbf, exp, bound objects as (kind, namespace, name,
        # uid)): what authenticate read from the claims, so a request reads them once
        self._authenticated: dict[
            str,
            tuple[tuple[str, tuple[str, ...]], float, float, tuple[tuple[str, str, str, Any], ...]],
        ] = {}
        self.verifications = 0  # signatures checked (a counting test reads it)

    def sign(self, claims: Mapping[str, Any]) -> str:
        header = {"alg": "ES256", "kid": self.key_id}
        signing_input = (
            _b64(json.dumps(header, separators=(",", ":")).encode())
            + "."
            + _b64(json.dumps(claims, separators=(",", ":")).encode())
        )
        der = self._key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256()))
        r, s = decode_dss_signature(der)
        return signing_input + "." + _b64(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    def claims(self, token: str) -> Obj | None:
        """The claims of a token this issuer signed, or None (bad shape or signature)."""
        known = self._verified.get(token)
        if known is not None:
            return known
        parts = token.split(".")
        if len(parts) != 3:
            return None
        self.verifications += 1
        try:
            header = json.loads(_unb64(parts[0]))
            raw = _unb64(parts[2])
            if not isinstance(header, dict) or header.get("kid") != self.key_id or len(raw) != 64:
                return None
            signature = encode_dss_signature(
                int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")
            )
            self._key.public_key().verify(
                signature, f"{parts[0]}.{parts[1]}".encode(), ec.ECDSA(hashes.SHA256())
            )
            claims = json.loads(_unb64(parts[1]))
        except (ValueError, binascii.Error, InvalidSignature):
            return None
        if not isinstance(claims, dict):
            return None
        if len(self._verified) >= 10_000:
            self._verified.clear()
        self._verified[token] = claims
        return claims

    def authenticate(self, token: str, lookup: Lookup) -> tuple[str, tuple[str, ...]] | None:
        """(user, groups) of a valid, unexpired ServiceAccount token; None otherwise.

        *lookup(kind, namespace, name)* reads the current object: the token stops
        authenticating when its ServiceAccount or a bound object is deleted or
        re-created (another uid).
        """
        now = self.clock()
        known = self._authenticated.get(token)
        if known is not None:
            # the claims were read before: only the time window and the bound objects
            # (which a write may have deleted or re-created) are looked at again
            found, nbf, exp, bound = known
            if not nbf <= now + 60 or now > exp:
                return None
            for kind, ns, name, uid in bound:
                current = lookup(kind, ns, name)
                if current is None:
                    return None
                meta = current.get("metadata") or {}
                if meta.get("uid") != uid or meta.get("deletionTimestamp"):
                    return None
            return found
        claims = self.claims(token)
        if claims is None or claims.get("iss") != ISSUER:
            return None
        if not _number(claims.get("nbf")) <= now + 60 or now > _number(claims.get("exp")):
            return None
        audiences = claims.get("aud")
        if not isinstance(audiences, list) or not set(audiences) & set(API_AUDIENCES):
            return None
        private = claims.get("kubernetes.io")
        if not isinstance(private, dict):
            return None
        namespace = str(private.get("namespace", ""))
        account = private.get("serviceaccount")
        if not namespace or not isinstance(account, dict):
            return None
        refs: list[tuple[str, str, Any]] = [("ServiceAccount", namespace, account)]
        for kind, namespaced in _BINDABLE.items():
            ref = private.get(kind.lower())
            # A pod-bound token names the pod's node only for information.
            if ref is not None and not (kind == "Node" and "pod" in private):
                refs.append((kind, namespace if namespaced else "", ref))
        for kind, ns, ref in refs:
            if not isinstance(ref, dict):
                return None
            current = lookup(kind, ns, str(ref.get("name", "")))
            meta = (current or {}).get("metadata") or {}
            if current is None or meta.get("uid") != ref.get("uid"):
                return None
            if meta.get("deletionTimestamp"):
                return None
        user = f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{account.get('name', '')}"
        groups = ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
        answer = (user, (*groups, "system:authenticated"))
        if len(self._authenticated) >= 10_000:
            self._authenticated.clear()
        self._authenticated[token] = (
            answer,
            _number(claims.get("nbf")),
            _number(claims.get("exp")),
            tuple((kind, ns, str(ref.get("name", "")), ref.get("uid")) for kind, ns, ref in refs),
        )
        return answer


def _number(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


# --------------------------------------------------------------------------- the subresource


def _invalid(name: str, path: str, value: Any, detail: str) -> errors.StatusError:
    return errors.invalid(GROUP, "TokenRequest", name, [field.invalid(path, value, detail).cause()])


def _check_body(body: Any) -> Obj:
    if not isinstance(body, dict) or body.get("kind") not in (None, "TokenRequest"):
        raise errors.bad_request("the body of a token request must be a TokenRequest object")
    if body.get("apiVersion") not in (None, API_VERSION):
        raise errors.bad_request(
            f"the API version in the data ({body.get('apiVersion')}) does not match the "
            f"expected API version ({API_VERSION})"
        )
    return body


def _ref(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {"name": meta.get("name", ""), "uid": meta.get("uid", "")}


def _bound_objects(storage: Storage, ref: Mapping[str, Any], account: str, namespace: str) -> Obj:
    """The ``kubernetes.io`` claims of the bound object (400/404/409 as kube-apiserver)."""
    api_version, kind = str(ref.get("apiVersion", "")), str(ref.get("kind", ""))
    name = str(ref.get("name", ""))
    group = api_version.rpartition("/")[0]
    if group or kind not in _BINDABLE:
        shown = f"{group}/{api_version.rpartition('/')[2]}, Kind={kind}"
        raise errors.bad_request(f"cannot bind token to object of type {shown}")
    info = storage.resolve("v1", kind)
    obj = storage.read_object(info, namespace if _BINDABLE[kind] else "", name)
    out: Obj = {kind.lower(): _ref(obj)}
    if kind == "Pod":
        if (obj.get("spec") or {}).get("serviceAccountName") != account:
            raise errors.bad_request(
                f"cannot bind token for serviceaccount {field.go_quote(account)} to pod running "
                "with different serviceaccount name."
            )
        node_name = str((obj.get("spec") or {}).get("nodeName") or "")
        if node_name:
            node = storage.get_entry(storage.resolve("v1", "Node"), "", node_name)
            out["node"] = _ref(node.decode()) if node is not None else {"name": node_name}
    uid = ref.get("uid")
    if uid and uid != out[kind.lower()]["uid"]:
        raise errors.conflict(
            "",
            kind,
            name,
            f"the UID in the bound object reference ({uid}) does not match the UID in record. "
            "The object might have been deleted and then recreated",
        )
    return out


def token_request(
    storage: Storage, issuer: TokenIssuer, namespace: str, name: str, body: Any
) -> Obj:
    """The answer to ``POST serviceaccounts/{name}/token`` (see the module docstring)."""
    req = _check_body(body)
    meta = dict(req.get("metadata") or {})
    if meta.get("name") and meta["name"] != name:
        raise _invalid(
            name, "metadata.name", meta["name"], "must match the service account name if specified"
        )
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise _invalid(
            name,
            "metadata.namespace",
            meta["namespace"],
            "must match the service account namespace if specified",
        )
    account = storage.read_object(storage.resolve("v1", "ServiceAccount"), namespace, name)
    account_uid = str((account.get("metadata") or {}).get("uid", ""))
    if meta.get("uid") and meta["uid"] != account_uid:
        raise errors.conflict(
            GROUP,
            "TokenRequest",
            name,
            f"the UID in the token request ({meta['uid']}) does not match the UID of the service "
            f"account ({account_uid})",
        )
    spec = dict(req.get("spec") or {})
    audiences = [str(a) for a in spec.get("audiences") or []] or list(API_AUDIENCES)
    seconds = spec.get("expirationSeconds")
    seconds = DEFAULT_EXPIRATION if seconds is None else seconds
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        raise errors.bad_request("spec.expirationSeconds must be an integer")
    if seconds < MIN_EXPIRATION:
        raise _invalid(
            "", "spec.expirationSeconds", seconds, "may not specify a duration less than 10 minutes"
        )
    if seconds > MAX_EXPIRATION:
        raise _invalid(
            "",
            "spec.expirationSeconds",
            seconds,
            "may not specify a duration larger than 2^32 seconds",
        )
    private: Obj = {"namespace": namespace, "serviceaccount": {"name": name, "uid": account_uid}}
    bound = spec.get("boundObjectRef")
    if isinstance(bound, Mapping):
        private.update(_bound_objects(storage, bound, name, namespace))
    now = int(issuer.clock())
    claims = {
        "aud": audiences,
        "exp": now + seconds,
        "iat": now,
        "iss": ISSUER,
        "jti": str(uuid.uuid4()),
        "kubernetes.io": private,
        "nbf": now,
        "sub": f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}",
    }
    spec["audiences"] = audiences
    spec["expirationSeconds"] = seconds
    spec.setdefault("boundObjectRef", None)  # no omitempty on this field
    return {
        "kind": "TokenRequest",
        "apiVersion": API_VERSION,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": account_uid,
            "creationTimestamp": _rfc3339(now),
        },
        "spec": spec,
        "status": {
            "token": issuer.sign(claims),
            "expirationTimestamp": _rfc3339(now + seconds),
        },
    }
