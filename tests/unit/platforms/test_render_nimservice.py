"""Rendering rules of a single-node NIMService on the standalone platform (nim-operator.md §2)."""

from __future__ import annotations

from typing import Any

import pytest

from manifests.hashing import LAST_APPLIED_HASH_ANNOTATION, PARENT_SPEC_HASH_ANNOTATION
from platforms.standalone import (
    Capabilities,
    NIMCacheFailed,
    NIMCacheNotFound,
    NIMCacheNotReady,
    RenderContext,
    RenderError,
    UnsupportedSpec,
    render,
)
from platforms.standalone.context import GRPC_ROUTE, HTTP_ROUTE, SERVICE_MONITOR
from tests.unit.platforms.helpers import (
    NAME,
    NS,
    assert_valid_k8s,
    by_kind,
    env_of,
    kinds,
    main_container,
    nimcache,
    nimservice,
    pod_spec,
)

MANAGED_BY = {"app.kubernetes.io/managed-by": "k8s-nim-operator"}


# -- objects, names, labels, owners ---------------------------------------------------


def test_minimal_service_renders_the_core_objects_in_apply_order() -> None:
    objs = render(nimservice())
    assert kinds(objs) == ["ServiceAccount", "Role", "RoleBinding", "Service", "Deployment"]
    assert all(o["metadata"]["name"] == NAME and o["metadata"]["namespace"] == NS for o in objs)
    assert main_container(objs)["name"] == f"{NAME}-ctr"
    assert_valid_k8s(objs)


def test_every_object_has_standard_labels_controller_owner_and_hash() -> None:
    objs = render(_svc_without_replicas({"scale": {"enabled": True, "hpa": {"maxReplicas": 3}}}))
    for obj in objs:
        meta = obj["metadata"]
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "k8s-nim-operator"
        assert meta["labels"]["app.kubernetes.io/part-of"] == "nim-service"
        assert meta["labels"]["app.kubernetes.io/name"] == NAME
        (owner,) = meta["ownerReferences"]
        assert owner == {
            "apiVersion": "apps.nvidia.com/v1alpha1",
            "kind": "NIMService",
            "name": NAME,
            "uid": "1234-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
        assert meta["annotations"][LAST_APPLIED_HASH_ANNOTATION]


def test_standard_labels_and_annotations_win_over_user_ones() -> None:
    objs = render(
        nimservice(
            {
                "labels": {"app.kubernetes.io/managed-by": "me", "team": "ai"},
                "annotations": {"openshift.io/required-scc": "privileged", "owner": "bob"},
            }
        )
    )
    dep = by_kind(objs, "Deployment")
    assert dep["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-nim-operator"
    assert dep["metadata"]["labels"]["team"] == "ai"
    assert dep["metadata"]["annotations"]["openshift.io/required-scc"] == "nonroot"
    assert dep["metadata"]["annotations"]["owner"] == "bob"
    template = dep["spec"]["template"]["metadata"]
    assert template["labels"]["app"] == NAME and template["labels"]["team"] == "ai"
    assert template["annotations"]["owner"] == "bob"


def test_service_labels_go_on_the_service_only() -> None:
    objs = render(
        nimservice(
            {
                "expose": {
                    "service": {
                        "labels": {"label-key-specific": "v"},
                        "annotations": {"svc-note": "x"},
                    }
                }
            }
        )
    )
    svc, dep = by_kind(objs, "Service"), by_kind(objs, "Deployment")
    assert svc["metadata"]["labels"]["label-key-specific"] == "v"
    assert svc["spec"]["type"] == "ClusterIP"
    assert svc["metadata"]["annotations"]["svc-note"] == "x"
    assert "label-key-specific" not in dep["metadata"]["labels"]
    assert "svc-note" not in dep["metadata"]["annotations"]


def test_parent_spec_hash_on_objects_but_not_pod_template() -> None:
    dep = by_kind(render(nimservice()), "Deployment")
    assert PARENT_SPEC_HASH_ANNOTATION in dep["metadata"]["annotations"]
    assert PARENT_SPEC_HASH_ANNOTATION not in dep["spec"]["template"]["metadata"]["annotations"]


def test_hash_is_stable_and_follows_the_spec() -> None:
    first = render(nimservice({"env": [{"name": "A", "value": "1"}]}))
    again = render(nimservice({"env": [{"name": "A", "value": "1"}]}))
    assert first == again
    changed = render(nimservice({"env": [{"name": "A", "value": "2"}]}))

    def dep_hash(objs: list[dict[str, Any]]) -> str:
        value: str = by_kind(objs, "Deployment")["metadata"]["annotations"][
            LAST_APPLIED_HASH_ANNOTATION
        ]
        return value

    assert dep_hash(first) != dep_hash(changed)


def test_hash_does_not_depend_on_key_order() -> None:
    a = nimservice({"labels": {"a": "1", "b": "2"}})
    b = nimservice({"labels": {"b": "2", "a": "1"}})
    ha = [o["metadata"]["annotations"][LAST_APPLIED_HASH_ANNOTATION] for o in render(a)]
    hb = [o["metadata"]["annotations"][LAST_APPLIED_HASH_ANNOTATION] for o in render(b)]
    assert ha == hb


def test_selector_and_service_account() -> None:
    objs = render(nimservice())
    dep, svc = by_kind(objs, "Deployment"), by_kind(objs, "Service")
    assert dep["spec"]["selector"] == {"matchLabels": {"app": NAME}}
    assert svc["spec"]["selector"] == {"app": NAME}
    assert pod_spec(objs)["serviceAccountName"] == NAME
    binding = by_kind(objs, "RoleBinding")
    assert binding["roleRef"]["name"] == NAME
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NS}]
    assert dep["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0},
    }


@pytest.mark.parametrize(
    ("spec", "scc_role", "scc_annotation"),
    [
        ({}, "nonroot", "nonroot"),
        ({"storage": {"hostPath": "/data/models"}}, "hostmount-anyuid", "hostmount-anyuid"),
        ({"proxy": {"httpsProxy": "http://proxy:3128"}}, "anyuid", "nonroot"),
        ({"proxy": {"certConfigMap": "ca"}}, "anyuid", "anyuid"),
    ],
)
def test_openshift_scc_in_role_and_annotation(
    spec: dict[str, Any], scc_role: str, scc_annotation: str
) -> None:
    objs = render(nimservice(spec))
    assert by_kind(objs, "Role")["rules"][0]["resourceNames"] == [scc_role]
    annotations = by_kind(objs, "Deployment")["metadata"]["annotations"]
    assert annotations["openshift.io/required-scc"] == scc_annotation


# -- ports and Service ------------------------------------------------------------------


def test_extra_ports_on_service_container_and_env() -> None:
    objs = render(
        nimservice({"expose": {"service": {"port": 9000, "grpcPort": 50051, "metricsPort": 8002}}})
    )
    svc_ports = {
        p["name"]: (p["port"], p["targetPort"]) for p in by_kind(objs, "Service")["spec"]["ports"]
    }
    assert svc_ports == {
        "api": (9000, "api"),
        "grpc": (50051, "grpc"),
        "metrics": (8002, "metrics"),
    }
    ctr = main_container(objs)
    assert {p["name"]: p["containerPort"] for p in ctr["ports"]} == {
        "api": 9000,
        "grpc": 50051,
        "metrics": 8002,
    }
    env = env_of(ctr)
    assert env["NIM_SERVER_PORT"] == env["NIM_HTTP_API_PORT"] == "9000"
    assert env["NIM_GRPC_API_PORT"] == env["NIM_TRITON_GRPC_PORT"] == "50051"
    assert env["NIM_TRITON_METRICS_PORT"] == "8002"
    assert_valid_k8s(objs)


def test_default_port_is_8000_and_service_type_passes_through() -> None:
    spec = nimservice({"expose": {"service": {"type": "LoadBalancer"}}})
    del spec["spec"]["expose"]["service"]["port"]
    svc = by_kind(render(spec), "Service")
    assert svc["spec"]["ports"][0]["port"] == 8000
    assert svc["spec"]["type"] == "LoadBalancer"


# -- ingress and gateway routes -----------------------------------------------------------

ROUTER_INGRESS = {
    "expose": {
        "router": {
            "hostDomainName": "example.com",
            "annotations": {"router-note": "r"},
            "ingress": {"ingressClass": "nginx", "tlsSecretName": "tls"},
        }
    }
}
GATEWAY = {
    "expose": {
        "service": {"grpcPort": 50051},
        "router": {
            "hostDomainName": "example.com",
            "annotations": {"router-note": "r"},
            "gateway": {
                "namespace": "gw-ns",
                "name": "gw",
                "httpRoutesEnabled": True,
                "grpcRoutesEnabled": True,
            },
        },
    }
}
DEPRECATED_INGRESS = {
    "expose": {
        "ingress": {
            "enabled": True,
            "annotations": {"legacy": "y"},
            "spec": {
                "ingressClassName": "nginx",
                "rules": [
                    {
                        "host": "llama.example.com",
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {
                                        "service": {"name": NAME, "port": {"number": 8000}}
                                    },
                                }
                            ]
                        },
                    }
                ],
            },
        }
    }
}


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({}, set()),
        (ROUTER_INGRESS, {"Ingress"}),
        (DEPRECATED_INGRESS, {"Ingress"}),
        (GATEWAY, {"HTTPRoute", "GRPCRoute"}),
        (
            {
                "expose": {
                    "router": {"hostDomainName": "a.b", "gateway": {"namespace": "n", "name": "g"}}
                }
            },
            {"HTTPRoute"},
        ),
        (
            {
                "expose": {
                    "router": {
                        "hostDomainName": "a.b",
                        "gateway": {"namespace": "n", "name": "g", "httpRoutesEnabled": False},
                    }
                }
            },
            set(),
        ),
        ({"expose": {"ingress": {"enabled": False}}}, set()),
    ],
    ids=[
        "none",
        "router-ingress",
        "deprecated-ingress",
        "gateway-both",
        "gateway-default",
        "gateway-off",
        "ingress-off",
    ],
)
def test_which_entry_points_are_rendered(spec: dict[str, Any], expected: set[str]) -> None:
    objs = render(nimservice(spec))
    assert set(kinds(objs)) & {"Ingress", "HTTPRoute", "GRPCRoute"} == expected
    assert_valid_k8s(objs)


def test_router_ingress_host_class_tls_and_annotations() -> None:
    ing = by_kind(render(nimservice(ROUTER_INGRESS)), "Ingress")
    host = f"{NAME}.{NS}.example.com"
    assert ing["spec"]["ingressClassName"] == "nginx"
    (rule,) = ing["spec"]["rules"]
    assert rule["host"] == host
    (path,) = rule["http"]["paths"]
    assert path["path"] == "/" and path["pathType"] == "Prefix"
    assert path["backend"]["service"] == {"name": NAME, "port": {"name": "api"}}
    assert ing["spec"]["tls"] == [{"hosts": [host], "secretName": "tls"}]
    assert ing["metadata"]["annotations"]["router-note"] == "r"


def test_deprecated_ingress_uses_the_users_spec_verbatim() -> None:
    ing = by_kind(render(nimservice(DEPRECATED_INGRESS)), "Ingress")
    assert ing["spec"] == DEPRECATED_INGRESS["expose"]["ingress"]["spec"]
    assert ing["metadata"]["annotations"]["legacy"] == "y"


def test_gateway_routes_point_at_the_gateway_and_service_ports() -> None:
    objs = render(nimservice(GATEWAY))
    http, grpc = by_kind(objs, "HTTPRoute"), by_kind(objs, "GRPCRoute")
    for route in (http, grpc):
        assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
        assert route["spec"]["parentRefs"][0]["name"] == "gw"
        assert route["spec"]["parentRefs"][0]["namespace"] == "gw-ns"
        assert route["spec"]["hostnames"] == [f"{NAME}.{NS}.example.com"]
        assert route["metadata"]["annotations"]["router-note"] == "r"
    assert http["spec"]["rules"][0]["backendRefs"][0]["port"] == 8000
    assert http["spec"]["rules"][0]["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert grpc["spec"]["rules"][0]["backendRefs"][0]["port"] == 50051


def test_gateway_backend_ref_override() -> None:
    spec = {
        "expose": {
            "router": {
                "hostDomainName": "a.b",
                "gateway": {
                    "namespace": "n",
                    "name": "g",
                    "backendRef": {
                        "group": "inference.networking.k8s.io",
                        "kind": "InferencePool",
                        "name": NAME,
                    },
                },
            }
        }
    }
    route = by_kind(render(nimservice(spec)), "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"] == [
        {"group": "inference.networking.k8s.io", "kind": "InferencePool", "name": NAME}
    ]


def test_routes_left_out_when_the_cluster_lacks_gateway_api() -> None:
    ctx = RenderContext(capabilities=Capabilities.from_gvks({SERVICE_MONITOR}))
    objs = render(nimservice(GATEWAY), ctx)
    assert "HTTPRoute" not in kinds(objs) and "GRPCRoute" not in kinds(objs)
    ctx = RenderContext(capabilities=Capabilities.from_gvks({HTTP_ROUTE, GRPC_ROUTE}))
    assert {"HTTPRoute", "GRPCRoute"} <= set(kinds(render(nimservice(GATEWAY), ctx)))


# -- autoscaling and monitoring -----------------------------------------------------------

HPA = {
    "replicas": None,
    "scale": {
        "enabled": True,
        "annotations": {"hpa-note": "h"},
        "hpa": {
            "minReplicas": 2,
            "maxReplicas": 5,
            "metrics": [
                {
                    "type": "Object",
                    "object": {
                        "metric": {"name": "gpu_cache_usage_perc"},
                        "describedObject": {"apiVersion": "v1", "kind": "Service", "name": NAME},
                        "target": {"type": "Value", "value": "0.5"},
                    },
                }
            ],
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300}},
        },
    },
}


def _svc_without_replicas(spec: dict[str, Any]) -> dict[str, Any]:
    svc = nimservice(spec)
    svc["spec"].pop("replicas", None)
    return svc


def test_hpa_targets_the_deployment_with_the_users_metrics() -> None:
    objs = render(_svc_without_replicas(HPA))
    hpa = by_kind(objs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": NAME,
    }
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["maxReplicas"] == 5
    assert hpa["spec"]["metrics"] == HPA["scale"]["hpa"]["metrics"]
    assert hpa["spec"]["behavior"] == HPA["scale"]["hpa"]["behavior"]
    assert hpa["metadata"]["annotations"]["hpa-note"] == "h"
    assert by_kind(objs, "Deployment")["spec"]["replicas"] == 2
    assert_valid_k8s(objs)


def test_replicas_without_autoscaling_and_no_hpa() -> None:
    objs = render(nimservice({"replicas": 3}))
    assert "HorizontalPodAutoscaler" not in kinds(objs)
    assert by_kind(objs, "Deployment")["spec"]["replicas"] == 3


METRICS = {
    "metrics": {
        "enabled": True,
        "serviceMonitor": {
            "additionalLabels": {"release": "prom", "app.kubernetes.io/part-of": "mine"},
            "annotations": {"sm-note": "s"},
            "interval": "30s",
            "scrapeTimeout": "10s",
        },
    }
}


def test_service_monitor_scrapes_the_service() -> None:
    objs = render(nimservice(METRICS))
    sm = by_kind(objs, "ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    # additionalLabels win over the standard labels on the ServiceMonitor
    assert sm["metadata"]["labels"]["release"] == "prom"
    assert sm["metadata"]["labels"]["app.kubernetes.io/part-of"] == "mine"
    assert sm["metadata"]["annotations"]["sm-note"] == "s"
    assert sm["spec"]["namespaceSelector"] == {"matchNames": [NS]}
    (ep,) = sm["spec"]["endpoints"]
    assert ep == {"port": "api", "path": "/v1/metrics", "interval": "30s", "scrapeTimeout": "10s"}
    svc_labels = by_kind(objs, "Service")["metadata"]["labels"]
    assert sm["spec"]["selector"]["matchLabels"] == svc_labels


def test_service_monitor_also_scrapes_the_metrics_port_when_set() -> None:
    spec = {**METRICS, "expose": {"service": {"metricsPort": 8002}}}
    endpoints = by_kind(render(nimservice(spec)), "ServiceMonitor")["spec"]["endpoints"]
    assert [(e["port"], e["path"]) for e in endpoints] == [
        ("api", "/v1/metrics"),
        ("metrics", "/metrics"),
    ]


def test_service_monitor_absent_when_disabled_or_crd_missing() -> None:
    assert "ServiceMonitor" not in kinds(render(nimservice({"metrics": {"enabled": False}})))
    ctx = RenderContext(capabilities=Capabilities.nothing())
    assert "ServiceMonitor" not in kinds(render(nimservice(METRICS), ctx))


# -- storage --------------------------------------------------------------------------------


def _model_store(objs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    volume = next(v for v in pod_spec(objs)["volumes"] if v["name"] == "model-store")
    mount = next(m for m in main_container(objs)["volumeMounts"] if m["name"] == "model-store")
    return volume, mount


@pytest.mark.parametrize(
    ("storage", "volume_source", "sub_path"),
    [
        (
            {"pvc": {"name": "mine", "subPath": "llama"}},
            {"persistentVolumeClaim": {"claimName": "mine"}},
            "llama",
        ),
        (
            {"pvc": {"name": "mine"}, "readOnly": True},
            {"persistentVolumeClaim": {"claimName": "mine", "readOnly": True}},
            None,
        ),
        (
            {"pvc": {"create": True, "size": "10Gi", "volumeAccessMode": "ReadWriteMany"}},
            {"persistentVolumeClaim": {"claimName": f"{NAME}-pvc"}},
            None,
        ),
        ({"emptyDir": {"sizeLimit": "20Gi"}}, {"emptyDir": {"sizeLimit": "20Gi"}}, None),
        ({"emptyDir": {}}, {"emptyDir": {}}, None),
        (
            {"hostPath": "/data/nim"},
            {"hostPath": {"path": "/data/nim", "type": "DirectoryOrCreate"}},
            None,
        ),
    ],
    ids=["pvc", "pvc-readonly", "pvc-create", "emptydir", "emptydir-unsized", "hostpath"],
)
def test_storage_sources(
    storage: dict[str, Any], volume_source: dict[str, Any], sub_path: str | None
) -> None:
    objs = render(nimservice({"storage": storage}))
    volume, mount = _model_store(objs)
    assert {k: v for k, v in volume.items() if k != "name"} == volume_source
    assert mount["mountPath"] == "/model-store"
    assert mount.get("subPath") == sub_path
    assert_valid_k8s(objs)


def test_pvc_create_renders_the_pvc() -> None:
    storage = {
        "pvc": {
            "create": True,
            "name": "nim-pvc",
            "size": "10Gi",
            "storageClass": "fast",
            "volumeAccessMode": "ReadWriteMany",
            "annotations": {"keep": "yes"},
        }
    }
    claim = by_kind(render(nimservice({"storage": storage})), "PersistentVolumeClaim")
    assert claim["metadata"]["name"] == "nim-pvc"
    assert claim["metadata"]["labels"] == {
        "app": "k8s-nim-operator",
        "app.kubernetes.io/name": NAME,
        "app.kubernetes.io/managed-by": "k8s-nim-operator",
    }
    assert claim["metadata"]["annotations"]["keep"] == "yes"
    assert claim["metadata"]["ownerReferences"][0]["controller"] is True
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "10Gi"
    assert claim["spec"]["storageClassName"] == "fast"


def test_pvc_create_without_size_is_an_error() -> None:
    with pytest.raises(RenderError, match="failed to parse size for pvc creation llama-pvc"):
        render(nimservice({"storage": {"pvc": {"create": True}}}))


def test_no_storage_is_an_error() -> None:
    with pytest.raises(RenderError, match="neither external PVC name"):
        render(nimservice({"storage": {}}))


def test_nimcache_storage_uses_the_cache_pvc_and_subpath() -> None:
    cache = nimcache(spec={"storage": {"pvc": {"subPath": "models"}}}, status={"pvc": "cache-pvc"})
    objs = render(
        nimservice({"storage": {"nimCache": {"name": "cache"}}}), RenderContext(nimcache=cache)
    )
    volume, mount = _model_store(objs)
    assert volume["persistentVolumeClaim"] == {"claimName": "cache-pvc"}
    assert mount["subPath"] == "models"
    assert "PersistentVolumeClaim" not in kinds(objs)


@pytest.mark.parametrize(
    ("cache", "error", "message"),
    [
        (None, NIMCacheNotFound, "NIMCache cache not found"),
        (nimcache(name="other"), NIMCacheNotFound, "NIMCache cache not found"),
        (nimcache(state="InProgress"), NIMCacheNotReady, "NIMCache cache not ready"),
        (nimcache(state="PVC-Created"), NIMCacheNotReady, "NIMCache cache not ready"),
        (nimcache(state="Failed"), NIMCacheFailed, "NIMCache cache failed"),
    ],
    ids=["missing", "other-name", "in-progress", "pvc-created", "failed"],
)
def test_nimcache_not_usable(
    cache: dict[str, Any] | None, error: type[RenderError], message: str
) -> None:
    with pytest.raises(error) as info:
        render(
            nimservice({"storage": {"nimCache": {"name": "cache"}}}), RenderContext(nimcache=cache)
        )
    assert info.value.message == message
    assert (
        info.value.reason
        == {
            NIMCacheNotFound: "NIMCacheNotFound",
            NIMCacheNotReady: "NIMCacheNotReady",
            NIMCacheFailed: "NIMCacheFailed",
        }[error]
    )


def test_shared_memory_volume() -> None:
    objs = render(nimservice({"storage": {"pvc": {"name": "p"}, "sharedMemorySizeLimit": "16Gi"}}))
    dshm = next(v for v in pod_spec(objs)["volumes"] if v["name"] == "dshm")
    assert dshm["emptyDir"] == {"medium": "Memory", "sizeLimit": "16Gi"}
    assert {"name": "dshm", "mountPath": "/dev/shm"} in main_container(objs)["volumeMounts"]


# -- probes --------------------------------------------------------------------------------


def test_default_probes() -> None:
    ctr = main_container(render(nimservice()))
    assert ctr["livenessProbe"] == {
        "httpGet": {"path": "/v1/health/live", "port": "api"},
        "initialDelaySeconds": 15,
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert ctr["readinessProbe"]["httpGet"] == {"path": "/v1/health/ready", "port": "api"}
    assert ctr["readinessProbe"]["initialDelaySeconds"] == 15
    assert ctr["startupProbe"]["httpGet"] == {"path": "/v1/health/ready", "port": "api"}
    assert ctr["startupProbe"]["initialDelaySeconds"] == 30
    assert ctr["startupProbe"]["failureThreshold"] == 120


def test_custom_and_disabled_probes() -> None:
    custom = {"exec": {"command": ["true"]}, "periodSeconds": 5}
    ctr = main_container(
        render(
            nimservice(
                {
                    "livenessProbe": {"enabled": False},
                    "readinessProbe": {"probe": custom},
                    "startupProbe": {"enabled": True},
                }
            )
        )
    )
    assert "livenessProbe" not in ctr
    assert ctr["readinessProbe"] == custom
    assert ctr["startupProbe"]["failureThreshold"] == 120


# -- env precedence -----------------------------------------------------------------------


def test_standard_env() -> None:
    env = env_of(main_container(render(nimservice())))
    assert env == {
        "NIM_CACHE_PATH": "/model-store",
        "OUTLINES_CACHE_DIR": "/tmp/outlines",
        "NIM_SERVER_PORT": "8000",
        "NIM_HTTP_API_PORT": "8000",
        "NIM_JSONL_LOGGING": "1",
        "NIM_LOG_LEVEL": "INFO",
        "NGC_API_KEY": {"secretKeyRef": {"name": "ngc-api-secret", "key": "NGC_API_KEY"}},
    }


def test_no_auth_secret_means_no_ngc_api_key() -> None:
    svc = nimservice()
    del svc["spec"]["authSecret"]
    assert "NGC_API_KEY" not in env_of(main_container(render(svc)))


def test_user_env_replaces_every_standard_variable() -> None:
    user = [
        {"name": "NIM_CACHE_PATH", "value": "/cache"},
        {"name": "OUTLINES_CACHE_DIR", "value": "/o"},
        {"name": "NIM_SERVER_PORT", "value": "9000"},
        {"name": "NIM_HTTP_API_PORT", "value": "9000"},
        {"name": "NIM_JSONL_LOGGING", "value": "0"},
        {"name": "NIM_LOG_LEVEL", "value": "info"},
    ]
    svc = nimservice({"env": user})
    del svc["spec"]["authSecret"]
    env = main_container(render(svc))["env"]
    assert sorted(env, key=lambda e: e["name"]) == sorted(user, key=lambda e: e["name"])


def test_proxy_env_wins_over_user_env() -> None:
    spec = {
        "env": [{"name": "HTTPS_PROXY", "value": "http://user:1"}, {"name": "MINE", "value": "x"}],
        "proxy": {
            "httpsProxy": "http://proxy:3128",
            "httpProxy": "http://proxy:3128",
            "noProxy": "localhost",
        },
    }
    env = env_of(main_container(render(nimservice(spec))))
    assert env["HTTPS_PROXY"] == env["https_proxy"] == "http://proxy:3128"
    assert env["HTTP_PROXY"] == env["http_proxy"] == "http://proxy:3128"
    assert env["NO_PROXY"] == env["no_proxy"] == "localhost"
    assert env["NIM_SDK_USE_NATIVE_TLS"] == "1"
    assert env["MINE"] == "x"


def _cached(
    source: dict[str, Any], spec: dict[str, Any] | None = None, **cache_kw: Any
) -> dict[str, Any]:
    cache = nimcache(source, **cache_kw)
    storage = {"storage": {"nimCache": {"name": "cache"}}}
    objs = render(nimservice({**storage, **(spec or {})}), RenderContext(nimcache=cache))
    return main_container(objs)


HF_SOURCE = {
    "hf": {
        "endpoint": "https://huggingface.co",
        "namespace": "Qwen",
        "modelName": "Qwen2.5-0.5B",
        "authSecret": "hf-secret",
        "modelPuller": "nvcr.io/nim/nvidia/llm-nim:1.12.0",
        "pullSecret": "ngc-secret",
    }
}


def test_universal_hf_cache_env() -> None:
    env = env_of(_cached(HF_SOURCE, {"env": [{"name": "HF_HOME", "value": "/mine"}]}))
    assert env["NIM_MODEL_NAME"] == "/model-store"
    assert env["HF_HOME"] == "/mine"  # the user's value wins over these defaults
    assert env["NIM_MODEL_PATH"] == "hf://Qwen/Qwen2.5-0.5B"
    assert env["NGC_API_KEY"] == {
        "secretKeyRef": {"name": "ngc-api-secret", "key": "NGC_API_KEY", "optional": True}
    }
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "ngc-api-secret", "key": "HF_TOKEN"}}


def test_universal_ngc_endpoint_env() -> None:
    source = {
        "ngc": {
            "modelPuller": "nvcr.io/nim/nvidia/llm-nim:1.12.0",
            "pullSecret": "s",
            "authSecret": "a",
            "modelEndpoint": "ngc://nim/meta/llama-3.1-8b-instruct:hf",
        }
    }
    env = env_of(_cached(source))
    assert env["NIM_MODEL_NAME"] == "/model-store"
    assert env["NIM_MODEL_PATH"] == ""
    assert env["NGC_API_KEY"] == {"secretKeyRef": {"name": "ngc-api-secret", "key": "NGC_API_KEY"}}


def test_hf_model_by_env_removes_the_ngc_key() -> None:
    spec = {
        "env": [
            {"name": "NIM_MODEL_NAME", "value": "hf://Qwen/Qwen2.5-0.5B"},
            {"name": "NGC_API_KEY", "value": "user-set"},
        ]
    }
    env = env_of(main_container(render(nimservice(spec))))
    assert env["NIM_MODEL_NAME"] == "hf://Qwen/Qwen2.5-0.5B"
    assert env["NGC_API_KEY"]["secretKeyRef"]["optional"] is True
    assert env["HF_TOKEN"] == {"secretKeyRef": {"name": "ngc-api-secret", "key": "HF_TOKEN"}}


def test_native_cache_env_and_mounts() -> None:
    ctr = _cached(
        {"ngc": {"modelPuller": "nvcr.io/nim/x:1", "pullSecret": "s", "authSecret": "a"}},
        {"env": [{"name": "NIM_ENGINE_MODEL_PATH", "value": "/user"}]},
        status={"type": "native"},
    )
    env = env_of(ctr)
    assert env["NIM_ENGINE_MODEL_PATH"] == "/model/cache"
    assert env["NGC_API_KEY"]["secretKeyRef"]["optional"] is True
    assert env["HF_TOKEN"]["secretKeyRef"]["optional"] is True
    paths = [m["mountPath"] for m in ctr["volumeMounts"] if m["name"] == "model-store"]
    assert paths == ["/model", "/opt/cache"]


def test_native_image_without_cache() -> None:
    ctr = main_container(render(nimservice(), RenderContext(native_image=True)))
    assert env_of(ctr)["NIM_ENGINE_MODEL_PATH"] == "/model"


def test_profile_env_defaults_to_the_selected_profile() -> None:
    spec = {"storage": {"nimCache": {"name": "cache", "profile": "abc123"}}}
    env = env_of(main_container(render(nimservice(spec), RenderContext(nimcache=nimcache()))))
    assert env["NIM_MODEL_PROFILE"] == "abc123"
    spec["env"] = [{"name": "NIM_MODEL_PROFILE", "value": "mine"}]
    env = env_of(main_container(render(nimservice(spec), RenderContext(nimcache=nimcache()))))
    assert env["NIM_MODEL_PROFILE"] == "mine"


# -- GPU auto-assignment -------------------------------------------------------------------

PROFILES = [
    {"name": "tp2", "model": "m", "release": "1", "config": {"tensorParallelism": "2"}},
    {"name": "tp4", "config": {"tp": "4"}},
    {"name": "none", "config": {}},
]


@pytest.mark.parametrize(
    ("profile", "resources", "expected"),
    [
        ("tp2", {}, 2),
        ("tp4", {}, 4),
        ("none", {}, 1),
        ("tp2", {"limits": {"nvidia.com/gpu": 8}}, None),
        ("missing", {}, None),
        ("", {}, None),
    ],
    ids=["tensorParallelism", "tp", "default-1", "user-set", "unknown-profile", "no-profile"],
)
def test_gpu_auto_assignment(profile: str, resources: dict[str, Any], expected: int | None) -> None:
    spec: dict[str, Any] = {"storage": {"nimCache": {"name": "cache", "profile": profile}}}
    spec["resources"] = {"requests": {"cpu": "1"}, **resources}
    cache = nimcache(status={"profiles": PROFILES})
    res = main_container(render(nimservice(spec), RenderContext(nimcache=cache)))["resources"]
    if expected is None:
        assert res.get("requests", {}).get("nvidia.com/gpu") is None or resources
        assert res.get("limits", {}).get("nvidia.com/gpu") == resources.get("limits", {}).get(
            "nvidia.com/gpu"
        )
    else:
        assert res["requests"]["nvidia.com/gpu"] == expected
        assert res["limits"]["nvidia.com/gpu"] == expected
        assert res["requests"]["cpu"] == "1"  # the user's other resources stay


def test_no_gpu_auto_assignment_for_universal_caches() -> None:
    spec = {"storage": {"nimCache": {"name": "cache", "profile": "tp2"}}}
    cache = nimcache(HF_SOURCE, status={"profiles": PROFILES})
    ctr = main_container(render(nimservice(spec), RenderContext(nimcache=cache)))
    assert "nvidia.com/gpu" not in ctr.get("resources", {}).get("limits", {})


def test_non_numeric_tp_is_an_error() -> None:
    spec = {"storage": {"nimCache": {"name": "cache", "profile": "bad"}}}
    cache = nimcache(status={"profiles": [{"name": "bad", "config": {"tp": "two"}}]})
    with pytest.raises(RenderError, match="tensor parallelism"):
        render(nimservice(spec), RenderContext(nimcache=cache))


# -- proxy CA, init containers and sidecars ------------------------------------------------


def test_custom_ca_init_container_and_volumes() -> None:
    objs = render(
        nimservice({"proxy": {"certConfigMap": "corp-ca"}, "image": {"pullPolicy": "Always"}})
    )
    spec = pod_spec(objs)
    (init,) = spec["initContainers"]
    assert init["name"] == "update-ca-certificates"
    assert init["image"] == "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4"
    assert init["imagePullPolicy"] == "Always"
    assert init["securityContext"] == {"runAsUser": 0, "runAsNonRoot": False}
    assert (
        init["command"][:2] == ["/bin/sh", "-c"] and "update-ca-certificates" in init["command"][2]
    )
    mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert mounts["ca-cert-volume"] == "/ca-certs" and mounts["custom-ca"] == "/custom"
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["custom-ca"]["configMap"]["name"] == "corp-ca"
    assert "emptyDir" in volumes["ca-cert-volume"]
    assert {"name": "ca-cert-volume", "mountPath": "/etc/ssl"} in main_container(objs)[
        "volumeMounts"
    ]
    assert "scratch" not in volumes  # the CA init container alone does not add scratch
    assert_valid_k8s(objs)


def test_user_init_and_sidecar_containers() -> None:
    spec = {
        "image": {"pullPolicy": "IfNotPresent"},
        "proxy": {"certConfigMap": "corp-ca"},
        "initContainers": [
            {
                "name": "fetch",
                "image": {"repository": "busybox", "tag": "1.36"},
                "command": ["sh", "-c", "true"],
                "env": [
                    {"name": "INIT_ENV", "value": "1"},
                    {"name": "NIM_LOG_LEVEL", "value": "DEBUG"},
                ],
                "workingDir": "/work",
            }
        ],
        "sidecarContainers": [
            {"name": "side-a", "image": {"repository": "a", "tag": "1", "pullPolicy": "Always"}},
            {"name": "side-b", "image": {"repository": "b", "tag": "2"}, "args": ["--x"]},
        ],
    }
    objs = render(nimservice(spec))
    podspec = pod_spec(objs)
    assert [c["name"] for c in podspec["initContainers"]] == ["update-ca-certificates", "fetch"]
    assert [c["name"] for c in podspec["containers"]] == [f"{NAME}-ctr", "side-a", "side-b"]
    fetch = podspec["initContainers"][1]
    env = env_of(fetch)
    assert env["INIT_ENV"] == "1" and env["NIM_CACHE_PATH"] == "/model-store"
    assert env["NIM_LOG_LEVEL"] == "DEBUG"  # its own env wins
    assert fetch["workingDir"] == "/work" and fetch["image"] == "busybox:1.36"
    assert fetch["imagePullPolicy"] == "IfNotPresent"  # inherited from the NIMService
    assert {m["name"] for m in fetch["volumeMounts"]} == {
        "model-store",
        "scratch",
        "ca-cert-volume",
    }
    side_a, side_b = podspec["containers"][1:]
    assert side_a["imagePullPolicy"] == "Always" and side_b["args"] == ["--x"]
    assert side_a["volumeMounts"] == main_container(objs)["volumeMounts"]
    assert any(v["name"] == "scratch" for v in podspec["volumes"])
    assert {"name": "scratch", "mountPath": "/scratch"} in main_container(objs)["volumeMounts"]
    assert_valid_k8s(objs)


# -- pod settings ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "orchestrator", "expected"),
    [
        ({}, "Kubernetes", {"runAsUser": 1000, "runAsGroup": 2000, "fsGroup": 2000}),
        (
            {"userID": 0, "groupID": 0},
            "Kubernetes",
            {"runAsUser": 0, "runAsGroup": 0, "fsGroup": 0},
        ),
        (
            {},
            "TKGS",
            {
                "runAsUser": 1000,
                "runAsGroup": 2000,
                "fsGroup": 2000,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
        ),
    ],
)
def test_pod_security_context(
    spec: dict[str, Any], orchestrator: str, expected: dict[str, Any]
) -> None:
    objs = render(nimservice(spec), RenderContext(orchestrator=orchestrator))
    assert pod_spec(objs)["securityContext"] == expected
    assert "securityContext" not in main_container(objs)


def test_scheduling_fields_pass_through() -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}
                ]
            }
        }
    }
    toleration = {
        "key": "nvidia.com/gpu",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 30,
    }
    spec = {
        "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "tolerations": [toleration],
        "affinity": affinity,
        "schedulerName": "volcano",
        "priorityClassName": "high",
        "runtimeClassName": "nvidia",
        "image": {"pullSecrets": ["ngc-secret", "other"]},
        "command": ["/opt/start"],
        "args": ["--fast"],
        "resources": {"limits": {"nvidia.com/gpu": 1, "memory": "32Gi"}},
    }
    objs = render(nimservice(spec))
    podspec, ctr = pod_spec(objs), main_container(objs)
    assert podspec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert podspec["tolerations"] == [toleration]  # tolerationSeconds kept (NVIDIA drops it)
    assert podspec["affinity"] == affinity
    assert podspec["schedulerName"] == "volcano"
    assert podspec["priorityClassName"] == "high"
    assert podspec["runtimeClassName"] == "nvidia"
    assert podspec["imagePullSecrets"] == [{"name": "ngc-secret"}, {"name": "other"}]
    assert ctr["command"] == ["/opt/start"] and ctr["args"] == ["--fast"]
    assert ctr["resources"] == {"limits": {"nvidia.com/gpu": 1, "memory": "32Gi"}}
    assert_valid_k8s(objs)


# -- DRA ------------------------------------------------------------------------------------------


def test_dra_claims_from_names_templates_and_creation_specs() -> None:
    spec = {
        "draResources": [
            {"resourceClaimTemplateName": "single-gpu", "requests": ["gpu", "nic"]},
            {
                "claimCreationSpec": {
                    "generateName": "h100",
                    "devices": [
                        {
                            "name": "gpu",
                            "count": 2,
                            "attributeSelectors": [
                                {
                                    "key": "productName",
                                    "op": "Equal",
                                    "value": {"stringValue": "H100"},
                                }
                            ],
                            "capacitySelectors": [
                                {"key": "memory", "op": "GreaterThanOrEqual", "value": "40Gi"}
                            ],
                        }
                    ],
                }
            },
        ]
    }
    objs = render(nimservice(spec))
    rct = by_kind(objs, "ResourceClaimTemplate")
    assert rct["metadata"]["name"].startswith("h100-") and rct["metadata"]["name"].endswith("-1")
    assert rct["spec"]["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-nim-operator"
    (request,) = rct["spec"]["spec"]["devices"]["requests"]
    assert request["name"] == "gpu" and request["exactly"]["count"] == 2
    assert request["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    exprs = [s["cel"]["expression"] for s in request["exactly"]["selectors"]]
    assert exprs == [
        'device.driver == "gpu.nvidia.com"',
        'device.attributes["gpu.nvidia.com"].productName == "H100"',
        '(device.capacity["gpu.nvidia.com"].memory).compareTo(quantity("40Gi")) >= 0',
    ]
    claims = pod_spec(objs)["resourceClaims"]
    assert claims[0]["resourceClaimTemplateName"] == "single-gpu"
    assert claims[1]["resourceClaimTemplateName"] == rct["metadata"]["name"]
    assert main_container(objs)["resources"]["claims"] == [
        {"name": claims[0]["name"], "request": "gpu"},
        {"name": claims[0]["name"], "request": "nic"},
        {"name": claims[1]["name"]},
    ]
    assert_valid_k8s(objs)


def test_dra_disables_gpu_auto_assignment() -> None:
    spec = {
        "storage": {"nimCache": {"name": "cache", "profile": "tp2"}},
        "draResources": [{"resourceClaimName": "my-claim"}],
    }
    cache = nimcache(status={"profiles": PROFILES})
    res = main_container(render(nimservice(spec), RenderContext(nimcache=cache)))["resources"]
    assert "limits" not in res and len(res["claims"]) == 1


# -- other platforms ---------------------------------------------------------------------------


def test_kserve_is_not_rendered_by_standalone() -> None:
    with pytest.raises(UnsupportedSpec, match="inferencePlatform"):
        render(nimservice({"inferencePlatform": "kserve"}))


def test_typed_model_and_dict_render_the_same() -> None:
    from api.serialize import load

    svc = nimservice(
        {
            "expose": {
                "router": {"hostDomainName": "example.com", "ingress": {"ingressClass": "nginx"}}
            },
            "metrics": {"enabled": True, "serviceMonitor": {"interval": "30s"}},
        }
    )
    model = load(svc)
    assert kinds(render(model)) == kinds(render(svc))
    assert main_container(render(model)) == main_container(render(svc))


def test_operator_upgrade_does_not_change_pod_templates() -> None:
    old = render(nimservice(), RenderContext(operator_version="v1.0.0"))
    new = render(nimservice(), RenderContext(operator_version="v1.1.0"))
    assert (
        by_kind(new, "Deployment")["metadata"]["labels"]["app.kubernetes.io/operator-version"]
        == "v1.1.0"
    )
    assert (
        by_kind(old, "Deployment")["spec"]["template"]
        == by_kind(new, "Deployment")["spec"]["template"]
    )


def test_every_optional_object_is_of_a_kind_the_contract_prunes() -> None:
    from platforms.nimservice import NIMServiceContract
    from tests.unit.platforms.test_render_multinode_epp import _epp

    full = render(
        nimservice({**GATEWAY, **METRICS, **_epp(), "scale": HPA["scale"], "replicas": None})
    )
    base = render(nimservice())
    base_ids = {(o["apiVersion"], o["kind"], o["metadata"]["name"]) for o in base}
    optional = {(o["apiVersion"], o["kind"]) for o in full if
                (o["apiVersion"], o["kind"], o["metadata"]["name"]) not in base_ids}
    owned = set(NIMServiceContract().owned_kinds(Capabilities.everything()))
    assert optional and optional <= owned
    assert ("networking.k8s.io/v1", "Ingress") in owned


def test_service_labels_also_label_ingress_routes_hpa_and_monitor() -> None:
    spec = {
        **ROUTER_INGRESS,
        **METRICS,
        "scale": HPA["scale"],
        "replicas": None,
    }
    spec["expose"] = {**ROUTER_INGRESS["expose"], "service": {"labels": {"tier": "api"}}}
    objs = render(nimservice(spec))
    for kind in ("Service", "Ingress", "HorizontalPodAutoscaler", "ServiceMonitor"):
        assert by_kind(objs, kind)["metadata"]["labels"]["tier"] == "api", kind
    assert "tier" not in by_kind(objs, "Deployment")["metadata"]["labels"]
    routes = render(
        nimservice(
            {
                "expose": {
                    **GATEWAY["expose"],
                    "service": {"grpcPort": 50051, "labels": {"tier": "api"}},
                }
            }
        )
    )
    assert by_kind(routes, "HTTPRoute")["metadata"]["labels"]["tier"] == "api"
