"""kubectl's protobuf bodies decode to the objects a real API server would store.

The hex fixtures are the exact bytes kubectl v1.32 sent for
``kubectl create namespace nim``, ``kubectl create secret generic ngc-api-secret
-n nim --from-literal=NGC_API_KEY=abc --from-literal=HF_TOKEN=x``,
``kubectl create rolebinding rb -n nim --role=r --serviceaccount=nim:sa`` and the
``create deployment|job|cronjob|service|ingress|pdb|priorityclass`` commands named
at each fixture below.
"""

from __future__ import annotations

import pytest

from localcluster.protobuf import (
    ProtobufError,
    UnsupportedKind,
    decode,
    encode,
    format_duration,
)

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

# kubectl create deployment web --image=nginx --replicas=0 --port=8080
DEPLOYMENT = bytes.fromhex(
    "6b3873000a150a07617070732f7631120a4465706c6f796d656e7412b9010a1f0a0377656212001a"
    "0022002a003200380042005a0a0a0361707012037765621287010800120c0a0a0a03617070120377"
    "65621a6d0a1c0a0012001a0022002a003200380042005a0a0a036170701203776562124d122f0a05"
    "6e67696e7812056e67696e782a00320b0a00100018903f22002a0042006a00720080010088010090"
    "0100a201001a00320042004a0052005800600068008201008a01009a0100c2010022020a00280038"
    "001a0c0800100018002000280038001a002200"
)
# kubectl create job j1 --image=busybox -- echo hi
JOB = bytes.fromhex(
    "6b3873000a0f0a0862617463682f763112034a6f621284010a120a026a3112001a0022002a003200"
    "38004200126432620a100a0012001a0022002a00320038004200124e122b0a026a31120762757379"
    "626f781a046563686f1a0268692a0042006a007200800100880100900100a201001a054e65766572"
    "320042004a0052005800600068008201008a01009a0100c201001a082000280030003a001a002200"
)
# kubectl create cronjob cj --image=busybox --schedule='*/1 * * * *'
CRONJOB = bytes.fromhex(
    "6b3873000a130a0862617463682f7631120743726f6e4a6f62129e010a120a02636a12001a002200"
    "2a003200380042001285010a0b2a2f31202a202a202a202a1a002a740a120a02636a12001a002200"
    "2a00320038004200125e325c0a100a0012001a0022002a00320038004200124812210a02636a1207"
    "62757379626f782a0042006a007200800100880100900100a201001a094f6e4661696c7572653200"
    "42004a0052005800600068008201008a01009a0100c201001a001a002200"
)
# kubectl create service clusterip s1 --tcp=80:8080
SERVICE = bytes.fromhex(
    "6b3873000a0d0a02763112075365727669636512660a1d0a02733112001a0022002a003200380042"
    "005a090a036170701202733112410a1b0a0738302d38303830120354435018502207080010903f1a"
    "00280012090a03617070120273311a002209436c757374657249503a00420052005a00600068001a"
    "020a001a002200"
)
# kubectl create ingress ing --rule=foo.com/bar=svc1:8080
INGRESS = bytes.fromhex(
    "6b3873000a1f0a146e6574776f726b696e672e6b38732e696f2f76311207496e6772657373124a0a"
    "130a03696e6712001a0022002a00320038004200122f1a2d0a07666f6f2e636f6d12220a200a1e0a"
    "042f626172120f220d0a047376633112050a0010903f1a0545786163741a020a001a002200"
)
# kubectl create poddisruptionbudget pdb --selector=app=web --min-available=1
PDB = bytes.fromhex(
    "6b3873000a200a09706f6c6963792f76311213506f6444697372757074696f6e4275646765741239"
    "0a130a0370646212001a0022002a0032003800420012160a06080010011a00120c0a0a0a03617070"
    "12037765621a0a080018002000280030001a002200"
)
# kubectl create priorityclass pc --value=0
PRIORITY_CLASS = bytes.fromhex(
    "6b3873000a250a147363686564756c696e672e6b38732e696f2f7631120d5072696f72697479436c"
    "61737312300a120a02706312001a0022002a003200380042001000180022002a14507265656d7074"
    "4c6f7765725072696f726974791a002200"
)


def test_namespace() -> None:
    assert decode(NAMESPACE) == {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "nim"},
        "spec": {},
        "status": {},
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


def test_deployment_keeps_a_zero_replica_count_and_drops_go_zero_values() -> None:
    assert decode(DEPLOYMENT) == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {
                    "containers": [
                        {
                            "name": "nginx",
                            "image": "nginx",
                            "ports": [{"containerPort": 8080}],
                            "resources": {},
                        }
                    ]
                },
            },
            "strategy": {},
        },
        "status": {},
    }


def test_job_and_cronjob_carry_command_restart_policy_and_schedule() -> None:
    job = decode(JOB)
    pod = job["spec"]["template"]["spec"]
    assert pod["containers"] == [
        {"name": "j1", "image": "busybox", "command": ["echo", "hi"], "resources": {}}
    ]
    assert pod["restartPolicy"] == "Never"
    cronjob = decode(CRONJOB)
    assert cronjob["spec"]["schedule"] == "*/1 * * * *"
    assert cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == (
        "OnFailure"
    )


def test_service_target_port_is_an_int_or_string() -> None:
    assert decode(SERVICE)["spec"] == {
        "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
        "selector": {"app": "s1"},
        "type": "ClusterIP",
    }


def test_ingress_rule_value_is_inlined_as_in_json() -> None:
    assert decode(INGRESS)["spec"] == {
        "rules": [
            {
                "host": "foo.com",
                "http": {
                    "paths": [
                        {
                            "path": "/bar",
                            "pathType": "Exact",
                            "backend": {"service": {"name": "svc1", "port": {"number": 8080}}},
                        }
                    ]
                },
            }
        ]
    }


def test_pdb_and_priority_class() -> None:
    assert decode(PDB)["spec"] == {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}
    assert decode(PRIORITY_CLASS)["value"] == 0  # not omitempty: zero is kept


RICH_DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "llm",
        "namespace": "nim",
        "labels": {"app": "llm", "empty": ""},
        "creationTimestamp": "2026-01-02T03:04:05Z",
        "ownerReferences": [
            {
                "apiVersion": "apps.nvidia.com/v1alpha1",
                "kind": "NIMService",
                "name": "llm",
                "uid": "u-1",
                "controller": True,
            }
        ],
    },
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "llm"}},
        "strategy": {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 0},
        },
        "template": {
            "metadata": {"labels": {"app": "llm"}},
            "spec": {
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 0,
                "securityContext": {"runAsUser": 0, "fsGroup": 1000},
                "containers": [
                    {
                        "name": "nim",
                        "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
                        "env": [
                            {"name": "A", "value": "1"},
                            {
                                "name": "NGC_API_KEY",
                                "valueFrom": {
                                    "secretKeyRef": {"name": "ngc-api", "key": "NGC_API_KEY"}
                                },
                            },
                        ],
                        "resources": {
                            "limits": {"nvidia.com/gpu": "1", "memory": "16Gi"},
                            "requests": {"cpu": "500m"},
                        },
                        "readinessProbe": {
                            "httpGet": {"path": "/v1/health/ready", "port": "api"},
                            "periodSeconds": 10,
                        },
                        "volumeMounts": [{"name": "cache", "mountPath": "/model-store"}],
                    }
                ],
                "volumes": [
                    {"name": "cache", "persistentVolumeClaim": {"claimName": "llm-pvc"}},
                    {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
                ],
            },
        },
    },
}


def test_encode_then_decode_is_the_same_object() -> None:
    assert decode(encode(RICH_DEPLOYMENT)) == RICH_DEPLOYMENT


def test_every_kubectl_fixture_round_trips_through_encode() -> None:
    for body in (DEPLOYMENT, JOB, CRONJOB, SERVICE, INGRESS, PDB, SECRET, ROLEBINDING):
        assert decode(encode(decode(body))) == decode(body)


def test_status_list_and_time_fields() -> None:
    status = {
        "apiVersion": "v1",
        "kind": "Status",
        "status": "Failure",
        "message": 'namespaces "x" not found',
        "reason": "NotFound",
        "details": {"name": "x", "kind": "namespaces"},
        "code": 404,
    }
    assert decode(encode(status)) == status
    events = {
        "apiVersion": "v1",
        "kind": "EventList",
        "metadata": {"resourceVersion": "7"},
        "items": [
            {
                "metadata": {"name": "e1", "namespace": "nim"},
                "involvedObject": {"kind": "Pod", "name": "p"},
                "reason": "Pulling",
                "eventTime": "2026-01-02T03:04:05.123456Z",
                "count": 1,
                "source": {},
            }
        ],
    }
    assert decode(encode(events)) == events


@pytest.mark.parametrize(
    ("nanos", "text"),
    [(0, "0s"), (3_600_000_000_000, "1h0m0s"), (90_000_000_000, "1m30s"), (500_000_000, "500ms")],
)
def test_durations_print_as_go_does(nanos: int, text: str) -> None:
    assert format_duration(nanos) == text


def test_custom_resources_have_no_protobuf_form() -> None:
    # typeMeta length: 2 + 24 + 2 + 10 = 38 (0x26)
    nimservice = (
        b"k8s\x00"
        + bytes([0x0A, 0x26, 0x0A, 0x18])
        + b"apps.nvidia.com/v1alpha1"
        + bytes([0x12, 0x0A])
        + b"NIMService"
    )
    with pytest.raises(UnsupportedKind, match="kubectl apply -f"):
        decode(nimservice)
    with pytest.raises(UnsupportedKind):
        encode({"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService"})


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


# kubectl create token robot --audience=vault --duration=48h (kubectl v1.32's request body)
TOKEN_REQUEST = bytes.fromhex(
    "6b3873000a280a1861757468656e7469636174696f6e2e6b38732e696f2f7631120c546f6b656e526571"
    "7565737412250a100a0012001a0022002a00320038004200120b0a057661756c742080c60a1a040a0012"
    "001a002200"
)


def test_token_request_from_kubectl_create_token() -> None:
    request = decode(TOKEN_REQUEST)
    assert request["kind"] == "TokenRequest"
    assert request["spec"] == {"audiences": ["vault"], "expirationSeconds": 172800}


def test_fields_whose_protobuf_name_is_not_their_json_name() -> None:
    bound = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "metadata": {"name": "robot"},
        "spec": {"boundObjectRef": {"kind": "Pod", "apiVersion": "v1", "name": "p", "uid": "u1"}},
    }
    assert decode(encode(bound)) == bound  # proto "uID" is JSON "uid"
    hooks = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "nimctl"},
        "webhooks": [{"name": "vnimservice.kb.io", "sideEffects": "None"}],
    }
    assert decode(encode(hooks)) == hooks  # proto "Webhooks" is JSON "webhooks"
