"""kubectl's protobuf bodies decode to the objects a real API server would store.

The hex fixtures are the exact bytes kubectl v1.32 sent for
``kubectl create namespace nim``, ``kubectl create secret generic ngc-api-secret
-n nim --from-literal=NGC_API_KEY=abc --from-literal=HF_TOKEN=x`` and
``kubectl create rolebinding rb -n nim --role=r --serviceaccount=nim:sa``.
"""

from __future__ import annotations

import pytest

from nimctl_runtime.localcluster.protobuf import ProtobufError, UnsupportedKind, decode

NAMESPACE = bytes.fromhex(
    "6b3873000a0f0a02763112094e616d657370616365121b0a130a036e696d12001a0022002a003200"
    "3800420012001a020a001a002200"
)
SECRET = bytes.fromhex(
    "6b3873000a0c0a027631120653656372657412480a210a0e6e67632d6170692d73656372657412"
    "001a036e696d22002a00320038004200120d0a0848465f544f4b454e12017812120a0b4e47435f"
    "4150495f4b455912036162631a001a002200"
)
ROLEBINDING = bytes.fromhex(
    "6b3873000a2b0a1c726261632e617574686f72697a6174696f6e2e6b38732e696f2f7631120b52"
    "6f6c6542696e64696e67125a0a150a02726212001a036e696d22002a00320038004200121b0a0e"
    "536572766963654163636f756e7412001a02736122036e696d1a240a19726261632e617574686f"
    "72697a6174696f6e2e6b38732e696f1204526f6c651a01721a002200"
)


def test_namespace() -> None:
    assert decode(NAMESPACE) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "nim"},
        "spec": {},
    }


def test_secret_data_is_base64_like_the_json_api() -> None:
    assert decode(SECRET) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "ngc-api-secret", "namespace": "nim"},
        "data": {"HF_TOKEN": "eA==", "NGC_API_KEY": "YWJj"},
    }


def test_rolebinding_keeps_required_empty_fields_and_drops_omitempty_ones() -> None:
    assert decode(ROLEBINDING) == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "rb", "namespace": "nim"},
        "subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "nim"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
    }


def test_unknown_kind_says_what_to_do() -> None:
    # typeMeta length: 2 + 7 + 2 + 10 = 21 (0x15)
    deployment = (
        b"k8s\x00"
        + bytes([0x0A, 0x15, 0x0A, 0x07])
        + b"apps/v1"
        + bytes([0x12, 0x0A])
        + b"Deployment"
    )
    with pytest.raises(UnsupportedKind, match="kubectl apply -f"):
        decode(deployment)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not protobuf", "magic"),
        (SECRET[:-20], "runs past|truncated"),
        (b"k8s\x00\x0a\x05ab", "runs past"),
        (b"k8s\x00\x08\xff", "truncated varint"),
        (b"k8s\x00\x00\x01", "field number 0"),
        (b"k8s\x00\x0b", "wire type 3"),
    ],
)
def test_malformed_bodies_are_rejected(body: bytes, message: str) -> None:
    with pytest.raises(ProtobufError, match=message):
        decode(body)
