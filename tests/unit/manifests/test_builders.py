"""Shared builder rules: env/map precedence, hashes, and schema-valid objects per kind."""

from __future__ import annotations

import subprocess
import sys

import kubernetes_validate
import pytest

from manifests import (
    configmap,
    deployment,
    grpcroute,
    hpa,
    httproute,
    ingress,
    job,
    pod,
    pvc,
    role,
    rolebinding,
    service,
    serviceaccount,
    servicemonitor,
)
from manifests.hashing import (
    LAST_APPLIED_HASH_ANNOTATION,
    desired_hash,
    hash_changed,
    short_hash,
    stamp_hash,
)
from manifests.labels import merge_maps, standard_labels
from manifests.meta import object_meta, owner_reference


def test_merge_env_vars_override_wins_and_comes_first() -> None:
    base = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    override = [{"name": "B", "value": "x"}, {"name": "C", "value": "3"}]
    assert pod.merge_env_vars(base, override) == [
        {"name": "B", "value": "x"},
        {"name": "C", "value": "3"},
        {"name": "A", "value": "1"},
    ]


def test_add_env_defaults_keeps_existing_values() -> None:
    env = [{"name": "A", "value": "mine"}]
    out = pod.add_env_defaults(env, [{"name": "A", "value": "d"}, {"name": "B", "value": "d"}])
    assert out == [{"name": "A", "value": "mine"}, {"name": "B", "value": "d"}]


def test_merge_maps_first_wins() -> None:
    assert merge_maps({"a": "std"}, {"a": "user", "b": "user"}, None) == {"a": "std", "b": "user"}


def test_standard_labels() -> None:
    assert standard_labels("x", "nim-service", "v1") == {
        "app.kubernetes.io/name": "x",
        "app.kubernetes.io/instance": "x",
        "app.kubernetes.io/operator-version": "v1",
        "app.kubernetes.io/part-of": "nim-service",
        "app.kubernetes.io/managed-by": "k8s-nim-operator",
    }


def test_short_hash_matches_nvidias_names() -> None:
    # NVIDIA's test expects ComputeDomain RCT "cd-claimtemplate-6bb8bf548c".
    assert short_hash("test-nimservice") == "6bb8bf548c"


def test_stamp_hash_is_stable_and_ignores_itself() -> None:
    obj = configmap.build(object_meta("c", "ns"), {"k": "v"})
    stamped = stamp_hash(dict(obj))
    value = stamped["metadata"]["annotations"][LAST_APPLIED_HASH_ANNOTATION]
    assert desired_hash(stamped) == value == desired_hash(obj)
    assert not hash_changed(stamped, stamped)
    assert hash_changed(stamped, None)
    assert hash_changed(stamped, configmap.build(object_meta("c", "ns"), {"k": "v"}))
    other = stamp_hash(configmap.build(object_meta("c", "ns"), {"k": "w"}))
    assert hash_changed(other, stamped)


def test_hash_is_the_same_in_another_process() -> None:
    code = (
        "from manifests.hashing import hash_value;"
        "print(hash_value({'b': [1, {'y': 2, 'x': 1}], 'a': 'z'}))"
    )
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    from manifests.hashing import hash_value

    assert other == hash_value({"a": "z", "b": [1, {"x": 1, "y": 2}]})


def test_owner_reference() -> None:
    owner = {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": "n", "uid": "u"},
    }
    assert owner_reference(owner) == {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "name": "n",
        "uid": "u",
        "controller": True,
        "blockOwnerDeletion": True,
    }


META = object_meta("x", "ns", labels={"a": "b"}, annotations={"c": "d"})
CTR = pod.container(
    "c",
    "img:1",
    env=[
        pod.env_var("A", "1"),
        pod.secret_env_var("K", "s", "k", optional=True),
        pod.field_env_var("N", "metadata.name"),
    ],
    ports=[{"name": "api", "containerPort": 8000}],
    volume_mounts=[pod.volume_mount("v", "/v", sub_path="p", read_only=True)],
    readiness_probe=pod.http_get_probe("/ready", "api", initial_delay_seconds=5),
)
SPEC = pod.pod_spec(
    [CTR],
    volumes=[
        pod.pvc_volume("v", "claim", read_only=True),
        pod.empty_dir_volume("e", medium="Memory", size_limit="1Gi"),
        pod.host_path_volume("h", "/data"),
        pod.config_map_volume("cm", "cm", default_mode=0o555),
    ],
    image_pull_secrets=["pull"],
    restart_policy="Never",
)

BUILT_INS = {
    "ServiceAccount": serviceaccount.build(META, image_pull_secrets=["pull"]),
    "Role": role.build(META, [role.scc_rule("nonroot"), role.policy_rule([""], ["pods"], ["get"])]),
    "RoleBinding": rolebinding.build(META, role_name="r", service_account="sa", namespace="ns"),
    "Service": service.build(
        META,
        selector={"app": "x"},
        ports=[service.service_port("api", 8000, "api")],
        service_type="ClusterIP",
    ),
    "ConfigMap": configmap.build(META, {"k": "v"}),
    "PersistentVolumeClaim": pvc.build(
        META, access_modes=["ReadWriteOnce"], size="1Gi", storage_class="s"
    ),
    "Deployment": deployment.build(
        META,
        selector={"app": "x"},
        template=pod.pod_template(SPEC, labels={"app": "x"}),
        replicas=2,
        strategy=deployment.rolling_update(),
    ),
    "Job": job.build(
        META, template=pod.pod_template(SPEC), backoff_limit=5, ttl_seconds_after_finished=600
    ),
    "Pod": pod.build(META, SPEC),
    "HorizontalPodAutoscaler": hpa.build(
        META,
        scale_target_ref={"apiVersion": "apps/v1", "kind": "Deployment", "name": "x"},
        min_replicas=1,
        max_replicas=3,
        metrics=[
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80},
                },
            }
        ],
    ),
    "Ingress": ingress.build(
        META,
        ingress.router_spec(
            host="x.ns.example.com",
            service_name="x",
            service_port=8000,
            ingress_class="nginx",
            tls_secret_name="t",
        ),
    ),
}


@pytest.mark.parametrize("kind", sorted(BUILT_INS))
def test_built_in_kinds_validate_against_kubernetes_schema(kind: str) -> None:
    obj = BUILT_INS[kind]
    assert obj["kind"] == kind
    kubernetes_validate.validate(obj, "1.32.0", strict=True)


def test_crd_kinds_have_the_fields_their_controllers_need() -> None:
    parent = [httproute.parent_ref("gw", "gw-ns")]
    route = httproute.build(
        META,
        parent_refs=parent,
        hostnames=["h"],
        backend_refs=[httproute.service_backend_ref("x", 8000)],
    )
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["spec"]["parentRefs"] == [{"name": "gw", "namespace": "gw-ns"}]
    assert route["spec"]["rules"][0]["backendRefs"] == [{"name": "x", "port": 8000}]
    grpc = grpcroute.build(
        META,
        parent_refs=parent,
        hostnames=["h"],
        backend_refs=[httproute.service_backend_ref("x", 50051)],
    )
    assert (
        grpc["kind"] == "GRPCRoute" and grpc["spec"]["rules"][0]["backendRefs"][0]["port"] == 50051
    )
    sm = servicemonitor.build(
        META,
        selector={"app": "x"},
        namespace="ns",
        endpoints=[servicemonitor.endpoint("api", "/v1/metrics", interval="30s")],
    )
    assert sm["spec"]["endpoints"] == [{"port": "api", "path": "/v1/metrics", "interval": "30s"}]


@pytest.mark.parametrize(
    "annotations", [None, {}, {"a": "b"}], ids=["no-annotations", "empty", "some"]
)
def test_stamped_copy_agrees_with_stamp_hash(annotations: dict[str, str] | None) -> None:
    from manifests.hashing import stamped_copy

    obj = configmap.build(object_meta("c", "ns"), {"k": "v"})
    if annotations is not None:
        obj["metadata"]["annotations"] = dict(annotations)
    copied = stamped_copy(obj)
    value = copied["metadata"]["annotations"][LAST_APPLIED_HASH_ANNOTATION]
    assert value == desired_hash(copied) == desired_hash(obj)
    assert LAST_APPLIED_HASH_ANNOTATION not in (obj["metadata"].get("annotations") or {})
    assert copied["data"] is not obj["data"]
