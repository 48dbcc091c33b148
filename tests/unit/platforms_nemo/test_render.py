"""The NeMo renders, offline: what each kind's objects carry (nim-operator.md §5, nemo.md)."""

from __future__ import annotations

import base64
import copy
import hashlib
from typing import Any

import pytest
from ruamel.yaml import YAML

from api.serialize import dump, load
from platforms.capabilities import Capabilities
from platforms.nemo.common import RenderFailed
from platforms.nemo.contract import CONTRACTS, deployment_readiness, requirements
from platforms.nemo.demo import sample_crs
from platforms.nemo.facts import NemoFacts

PASSWORD = "s3cr3t-pw"
MODELS = "meta/llama-3.2-1b:\n  enabled: true\n"
CONFIG_MAPS = {
    "nemo-model-config": {"models": MODELS, "customizationTargets": "t: {}\n"},
    "nemo-training-config": {"training": "extra_key: 7\nimage: overridden\n"},
}


def sample(kind: str) -> dict[str, Any]:
    return dump(next(c for c in sample_crs() if c.kind == kind))


def render(obj: dict[str, Any], **facts: Any) -> dict[tuple[str, str], dict[str, Any]]:
    cr = load(obj)
    base = {
        "capabilities": Capabilities.everything(),
        "db_password": PASSWORD,
        "config_maps": CONFIG_MAPS,
    }
    base.update(facts)
    objs = CONTRACTS[obj["kind"]].render(cr, NemoFacts(**base))
    return {(o["kind"], o["metadata"]["name"]): o for o in objs}


def deployment(objs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    return next(o for (k, _), o in objs.items() if k == "Deployment")


def ctr(objs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    c: dict[str, Any] = deployment(objs)["spec"]["template"]["spec"]["containers"][0]
    return c


def env(objs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in ctr(objs)["env"]}


def test_every_kind_renders_the_common_objects_with_standard_labels() -> None:
    for kind, part_of in (
        ("NemoCustomizer", "nemo-customizer-service"),
        ("NemoDatastore", "nemo-datastore-service"),
        ("NemoEntitystore", "nemo-entitystore-service"),
        ("NemoEvaluator", "nemo-evaluator-service"),
        ("NemoGuardrail", "nemo-guardrail-service"),
    ):
        obj = sample(kind)
        name = obj["metadata"]["name"]
        objs = render(obj)
        for owned in ("ServiceAccount", "Role", "RoleBinding", "Service", "Deployment"):
            o = objs[(owned, name)]
            labels = o["metadata"]["labels"]
            assert labels["app.kubernetes.io/part-of"] == part_of, (kind, owned)
            assert labels["app.kubernetes.io/managed-by"] == "k8s-nim-operator"
            assert o["metadata"]["ownerReferences"][0]["kind"] == kind
        assert ctr(objs)["name"] == f"{name}-ctr"
        annotations = deployment(objs)["metadata"]["annotations"]
        assert annotations["openshift.io/required-scc"] == "nonroot"
        assert "nvidia.com/parent-spec-hash" in annotations
        pod_annotations = deployment(objs)["spec"]["template"]["metadata"]["annotations"]
        assert "nvidia.com/parent-spec-hash" not in pod_annotations


def test_entitystore_env_and_init_containers() -> None:
    objs = render(sample("NemoEntitystore"))
    e = env(objs)
    assert e["APP_VERSION"] == "25.08"
    assert e["POSTGRES_HOST"] == "entity-store-pg-postgresql.nemo.svc.cluster.local"
    assert e["POSTGRES_PORT"] == "5432"
    assert e["POSTGRES_PASSWORD"] == {
        "secretKeyRef": {"name": "entity-store-pg-existing-secret", "key": "password"}
    }
    inits = deployment(objs)["spec"]["template"]["spec"]["initContainers"]
    assert inits[0]["name"] == "wait-for-postgres" and inits[0]["image"] == "busybox"
    assert (
        "until nc -z entity-store-pg-postgresql.nemo.svc.cluster.local 5432"
        in (inits[0]["command"][2])
    )
    assert inits[1]["name"] == "entitystore-db-migration"
    assert inits[1]["workingDir"] == "/app/services/entity-store"
    assert inits[1]["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"}}
    assert ctr(objs)["readinessProbe"]["httpGet"] == {"path": "/health", "port": "api"}


def test_evaluator_writes_the_uri_secret_and_points_the_pod_at_it() -> None:
    obj = sample("NemoEvaluator")
    objs = render(obj)
    secret = objs[("Secret", "nemoevaluator-sample")]
    uri = base64.b64decode(secret["data"]["uri"]).decode()
    assert uri == (
        f"postgresql://evaluser:{PASSWORD}@evaluator-pg-postgresql.nemo.svc.cluster.local:5432/"
        "evaldb"
    )
    e = env(objs)
    assert e["POSTGRES_URI"] == {"secretKeyRef": {"name": "nemoevaluator-sample", "key": "uri"}}
    assert e["EVALUATOR_PORT"] == "7331" and e["EVAL_ENABLE_VALIDATION"] == "True"
    assert e["MILVUS_URL"] == "http://milvus.nemo.svc.cluster.local:19530"
    assert e["OTEL_METRICS_EXPORTER"] == "none"
    assert e["OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED"] == "true"
    # The password is in the Secret only.
    for (kind, _), o in objs.items():
        if kind != "Secret":
            assert PASSWORD not in str(o), kind
    obj["spec"]["enableValidation"] = False
    obj["spec"]["otel"] = {"enabled": False}
    e = env(render(obj))
    assert "EVAL_ENABLE_VALIDATION" not in e and e["OTEL_SDK_DISABLED"] == "true"


def test_evaluator_and_customizer_refuse_to_render_without_the_password() -> None:
    for kind in ("NemoEvaluator", "NemoCustomizer"):
        with pytest.raises(RenderFailed, match="password has not been read"):
            render(sample(kind), db_password=None)


def test_guardrail_config_store_as_config_map_or_pvc() -> None:
    obj = sample("NemoGuardrail")
    objs = render(obj)
    dep = deployment(objs)
    assert dep["spec"]["template"]["spec"]["volumes"] == [
        {"name": "config-store", "configMap": {"name": "gr-config"}}
    ]
    assert ctr(objs)["volumeMounts"] == [{"name": "config-store", "mountPath": "/config-store"}]
    assert dep["spec"]["selector"]["matchLabels"] == {"app": "nemoguardrail-sample"}
    assert objs[("Service", "nemoguardrail-sample")]["spec"]["selector"] == {
        "app": "nemoguardrail-sample",
        "app.kubernetes.io/name": "nemoguardrail-sample",
        "app.kubernetes.io/instance": "nemoguardrail-sample",
    }
    assert "replicas" not in dep["spec"]  # scale.enabled: the HPA owns it
    assert ("HorizontalPodAutoscaler", "nemoguardrail-sample") in objs
    assert ("HTTPRoute", "nemoguardrail-sample") in objs
    sm = objs[("ServiceMonitor", "nemoguardrail-sample")]
    assert sm["spec"]["endpoints"] == [{"port": "api", "interval": "30s", "scrapeTimeout": "10s"}]
    e = env(objs)
    assert e["NIM_ENDPOINT_API_KEY"] == {
        "secretKeyRef": {"name": "nim-endpoint-api-key", "key": "NIM_ENDPOINT_API_KEY"}
    }
    assert "POSTGRES_URI" not in e  # no databaseConfig

    obj["spec"]["configStore"] = {
        "pvc": {"create": True, "size": "1Gi", "volumeAccessMode": "ReadWriteOnce"}
    }
    objs = render(obj)
    pvc = objs[("PersistentVolumeClaim", "nemoguardrail-sample-pvc")]
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert ctr(objs)["volumeMounts"][0]["subPath"] == "guardrails-config-store"

    obj["spec"]["configStore"] = {"pvc": {"create": True}}
    with pytest.raises(RenderFailed, match=r"spec.configStore.pvc.size: Required value"):
        render(obj)


def test_guardrail_with_a_database_gets_the_uri_secret_and_migration() -> None:
    obj = sample("NemoGuardrail")
    obj["spec"]["databaseConfig"] = {
        "host": "pg",
        "databaseName": "gr",
        "credentials": {"user": "u", "secretName": "pg"},
    }
    objs = render(obj)
    assert base64.b64decode(objs[("Secret", "nemoguardrail-sample")]["data"]["uri"]).decode() == (
        f"postgresql://u:{PASSWORD}@pg:5432/gr"
    )
    e = env(objs)
    assert e["DB_URI"] == {"secretKeyRef": {"name": "nemoguardrail-sample", "key": "uri"}}
    inits = deployment(objs)["spec"]["template"]["spec"]["initContainers"]
    assert [i["name"] for i in inits] == ["wait-for-postgres", "guardrail-db-migration"]
    assert inits[1]["args"] == ["upgrade", "head"]


def test_datastore_gitea_env_volumes_and_pvc() -> None:
    obj = sample("NemoDatastore")
    objs = render(obj)
    e = env(objs)
    assert e["GITEA__DATABASE__PASSWD"] == {
        "secretKeyRef": {"name": "datastore-pg-existing-secret", "key": "password"}
    }
    assert e["GITEA__SERVER__LFS_JWT_SECRET"] == {
        "secretKeyRef": {"name": "nemo-ms-nemo-datastore--lfs-jwt", "key": "jwtSecret"}
    }
    assert e["SSH_LISTEN_PORT"] == "2222" and e["GITEA_WORK_DIR"] == "/data"
    spec = deployment(objs)["spec"]["template"]["spec"]
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["init"]["secret"] == {
        "secretName": "nemo-ms-nemo-datastore-init",
        "defaultMode": 110,
    }
    assert vols["inline-config-sources"]["secret"]["defaultMode"] == 420
    assert vols["data"] == {
        "name": "data",
        "persistentVolumeClaim": {"claimName": "pvc-shared-data"},
    }
    assert [i["name"] for i in spec["initContainers"]] == [
        "init-directories",
        "init-app-ini",
        "configure-datastore",
    ]
    init_env = {x["name"]: x.get("value") for x in spec["initContainers"][0]["env"]}
    assert (
        init_env["GITEA__DATABASE__HOST"] == "datastore-pg-postgresql.nemo.svc.cluster.local:5432"
    )
    assert init_env["GITEA__LFS__MINIO_BUCKET"] == "datastore"
    assert ("PersistentVolumeClaim", "pvc-shared-data") in objs
    assert ctr(objs)["ports"] == [{"name": "api", "containerPort": 3000, "protocol": "TCP"}]

    obj["spec"].pop("pvc")
    vols = {v["name"]: v for v in deployment(render(obj))["spec"]["template"]["spec"]["volumes"]}
    assert vols["data"] == {"name": "data", "emptyDir": {}}


def test_customizer_config_yaml_and_its_hash() -> None:
    obj = sample("NemoCustomizer")
    objs = render(obj)
    name = "nemocustomizer-sample"
    text = objs[("ConfigMap", name)]["data"]["config.yaml"]
    config = YAML(typ="safe").load(text)
    assert config["namespace"] == "nemo"
    assert config["mlflow_tracking_url"] == "http://mlflow-tracking.nemo.svc.cluster.local:80"
    assert config["models"] == {"meta/llama-3.2-1b": {"enabled": True}}
    assert config["customizationTargets"] == {"t": {}}
    training = config["training"]
    assert training["extra_key"] == 7  # from the training ConfigMap
    assert training["image"] == "nvcr.io/nvidia/nemo-microservices/customizer:25.08"  # spec wins
    assert training["workspace_dir"] == "/pvc/workspace"
    assert training["use_run_ai_executor"] is False
    assert (
        training["volumes"][0]["persistentVolumeClaim"]["claimName"] == "finetuning-ms-models-pvc"
    )
    assert training["volumes"][1]["emptyDir"] == {"medium": "Memory", "sizeLimit": "8Gi"}
    assert config["model_download_jobs"]["ngcAPISecret"] == "ngc-api-secret"
    assert config["wandb"] == {"project": "nvidia-nemo-customizer", "entity": "null"}
    assert PASSWORD not in text
    pod_annotations = deployment(objs)["spec"]["template"]["metadata"]["annotations"]
    assert pod_annotations["apps.nvidia.com/training-config-hash"] == (
        hashlib.sha256(text.encode()).hexdigest()
    )
    dsn = base64.b64decode(objs[("Secret", name)]["data"]["dsn"]).decode()
    assert dsn.startswith(f"postgresql://ncsuser:{PASSWORD}@customizer-pg-postgresql")
    e = env(objs)
    assert e["WANDB_SECRET_KEY"] == "apiKey"
    assert e["CUSTOMIZATIONS_CALLBACK_URL"] == (
        "http://nemocustomizer-sample.nemo.svc.cluster.local:9009"
    )
    assert {"name": "internal", "port": 9009, "targetPort": "internal", "protocol": "TCP"} in (
        objs[("Service", name)]["spec"]["ports"]
    )

    # A change in a referenced ConfigMap changes the config and the pod's hash.
    changed = copy.deepcopy(CONFIG_MAPS)
    changed["nemo-model-config"]["models"] = "other: {}\n"
    again = render(obj, config_maps=changed)
    assert (
        deployment(again)["spec"]["template"]["metadata"]["annotations"][
            "apps.nvidia.com/training-config-hash"
        ]
        != pod_annotations["apps.nvidia.com/training-config-hash"]
    )


def test_customizer_scheduler_rbac() -> None:
    obj = sample("NemoCustomizer")
    groups = {
        g for r in render(obj)[("Role", "nemocustomizer-sample")]["rules"] for g in r["apiGroups"]
    }
    assert {"batch.volcano.sh", "scheduling.volcano.sh", "nvidia.com"} <= groups
    assert "run.ai" not in groups
    obj["spec"]["scheduler"] = {"type": "runai"}
    objs = render(obj)
    groups = {g for r in objs[("Role", "nemocustomizer-sample")]["rules"] for g in r["apiGroups"]}
    assert "run.ai" in groups and "batch.volcano.sh" not in groups
    config = YAML(typ="safe").load(
        objs[("ConfigMap", "nemocustomizer-sample")]["data"]["config.yaml"]
    )
    assert config["training"]["use_run_ai_executor"] is True
    assert "queue" not in config["training"]  # NVIDIA's config has none


def test_customizer_config_errors_name_the_config_map_and_key() -> None:
    obj = sample("NemoCustomizer")
    with pytest.raises(RenderFailed, match="ConfigMap nemo-model-config key 'models': not valid"):
        render(obj, config_maps={**CONFIG_MAPS, "nemo-model-config": {"models": "a: [b"}})
    with pytest.raises(RenderFailed, match="ConfigMap nemo-training-config not found"):
        render(obj, config_maps={"nemo-model-config": {"models": MODELS}})


def test_requirements_name_what_must_exist() -> None:
    cu = load(sample("NemoCustomizer"))
    req = requirements(cu)
    assert req.password is not None and req.password.read
    assert req.config_maps == ("nemo-model-config", "nemo-training-config")
    assert req.pvcs == ()  # modelPVC.create: true
    es = requirements(load(sample("NemoEntitystore")))
    assert es.password is not None and not es.password.read
    ds = sample("NemoDatastore")
    ds["spec"]["pvc"] = {"name": "mine"}
    assert requirements(load(ds)).pvcs == (("mine", "pvc"),)


def test_deployment_readiness_words() -> None:
    dep = {
        "metadata": {"name": "d", "generation": 2},
        "spec": {"replicas": 1},
        "status": {
            "observedGeneration": 2,
            "replicas": 2,
            "updatedReplicas": 1,
            "availableReplicas": 1,
        },
    }
    msg, ready = deployment_readiness(dep, "d")
    assert not ready and "1 old replicas are pending termination" in msg
    dep["status"]["replicas"] = 1
    assert deployment_readiness(dep, "d") == ('deployment "d" successfully rolled out\n', True)


def test_spec_and_per_object_annotations_are_merged_and_labels_win() -> None:
    obj = sample("NemoEvaluator")
    obj["spec"]["annotations"] = {"annotation-key": "generic"}
    obj["spec"]["labels"] = {"app.kubernetes.io/part-of": "mine", "team": "a"}
    obj["spec"]["expose"]["service"]["annotations"] = {"annotation-key-specific": "svc"}
    obj["spec"]["expose"]["router"]["annotations"] = {"annotation-key-specific": "router"}
    obj["spec"].pop("replicas")
    obj["spec"]["scale"] = {
        "enabled": True,
        "annotations": {"annotation-key-specific": "hpa"},
        "hpa": {"minReplicas": 1, "maxReplicas": 2},
    }
    obj["spec"]["metrics"] = {
        "enabled": True,
        "serviceMonitor": {"annotations": {"annotation-key-specific": "sm"}, "interval": "1m"},
    }
    objs = render(obj)
    name = "nemoevaluator-sample"
    for kind in ("Service", "Ingress", "HorizontalPodAutoscaler", "ServiceMonitor"):
        annotations = objs[(kind, name)]["metadata"]["annotations"]
        assert annotations["annotation-key"] == "generic", kind
        assert "annotation-key-specific" in annotations, kind
        labels = objs[(kind, name)]["metadata"]["labels"]
        assert labels["app.kubernetes.io/part-of"] == "nemo-evaluator-service", kind
        assert labels["team"] == "a", kind
    hpa = objs[("HorizontalPodAutoscaler", name)]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (1, 2)
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    rule = objs[("Ingress", name)]["spec"]["rules"][0]
    assert rule["host"] == f"{name}.nemo.example.com"
    assert rule["http"]["paths"][0]["backend"]["service"] == {"name": name, "port": {"name": "api"}}


# -- NVIDIA's values, field by field (k8s-nim-operator api/apps/v1alpha1/nemo_*_types.go,
# -- internal/controller/nemo*_controller.go, manifests/deployment.yaml) ----------------


def _pod(objs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    spec: dict[str, Any] = deployment(objs)["spec"]["template"]["spec"]
    return spec


def _init(objs: dict[tuple[str, str], dict[str, Any]], name: str) -> dict[str, Any]:
    return next(c for c in _pod(objs)["initContainers"] if c["name"] == name)


def _rules(objs: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    role = next(o for (k, _), o in objs.items() if k == "Role")
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def _config(objs: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    cm = next(o for (k, _), o in objs.items() if k == "ConfigMap")
    loaded: dict[str, Any] = YAML(typ="safe").load(cm["data"]["config.yaml"])
    return loaded


def _probe(which: str) -> Any:
    return lambda objs: {k: v for k, v in ctr(objs)[which].items() if k != "httpGet"}


WAIT = 'until nc -z {} 5432; do echo "Waiting for Postgres to start "; sleep 5; done'
NVIDIA_VALUES: list[tuple[str, str, Any, Any]] = [
    # (kind, what, extractor, NVIDIA's value)
    *(
        (kind, "Deployment selector", lambda o: deployment(o)["spec"]["selector"], None)
        for kind in ("NemoCustomizer", "NemoDatastore", "NemoEntitystore", "NemoEvaluator")
    ),
    (
        "NemoGuardrail",
        "rolling update without surge",
        lambda o: deployment(o)["spec"]["strategy"],
        {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0}},
    ),
    (
        "NemoDatastore",
        "pod securityContext",
        lambda o: _pod(o)["securityContext"],
        {"fsGroup": 1000},
    ),
    (
        "NemoDatastore",
        "configure-datastore command",
        lambda o: (
            _init(o, "configure-datastore")["command"],
            _init(o, "configure-datastore")["args"],
        ),
        (["/bin/sh", "-c"], ["/usr/sbin/init/configure_gitea.sh"]),
    ),
    (
        "NemoDatastore",
        "configure-datastore env and mounts",
        lambda o: (
            [e["name"] for e in _init(o, "configure-datastore")["env"]][6:14],
            [m["mountPath"] for m in _init(o, "configure-datastore")["volumeMounts"]],
        ),
        (
            [
                "GITEA__SERVER__LFS_JWT_SECRET",
                "GITEA__DATABASE__PASSWD",
                "GITEA_ADMIN_USERNAME",
                "GITEA_ADMIN_PASSWORD",
                "GITEA__DATABASE__SSL_MODE",
                "GITEA__DATABASE__NAME",
                "GITEA__DATABASE__HOST",
                "GITEA__DATABASE__USER",
            ],
            ["/usr/sbin", "/tmp", "/env-to-ini-mounts/inlines/", "/usr/sbin/init", "/data"],
        ),
    ),
    (
        "NemoEvaluator",
        "Role rules",
        _rules,
        [
            {
                "apiGroups": ["security.openshift.io"],
                "resources": ["securitycontextconstraints"],
                "resourceNames": ["nonroot"],
                "verbs": ["use"],
            },
            {
                "apiGroups": [""],
                "resources": ["secrets", "pods"],
                "verbs": ["get", "watch", "list", "create"],
            },
        ],
    ),
    (
        "NemoEvaluator",
        "liveness probe",
        _probe("livenessProbe"),
        {"failureThreshold": 3, "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1},
    ),
    (
        "NemoEvaluator",
        "readiness probe",
        _probe("readinessProbe"),
        {"failureThreshold": 3, "periodSeconds": 10, "successThreshold": 1, "timeoutSeconds": 1},
    ),
    (
        "NemoEntitystore",
        "liveness probe",
        _probe("livenessProbe"),
        {
            "initialDelaySeconds": 3,
            "timeoutSeconds": 20,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 10,
        },
    ),
    (
        "NemoEntitystore",
        "readiness probe",
        _probe("readinessProbe"),
        {
            "initialDelaySeconds": 10,
            "timeoutSeconds": 20,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": 20,
        },
    ),
    (
        "NemoEntitystore",
        "wait-for-postgres",
        lambda o: _init(o, "wait-for-postgres")["command"][2],
        WAIT.format("entity-store-pg-postgresql.nemo.svc.cluster.local") + ";",
    ),
    (
        "NemoEvaluator",
        "wait-for-postgres",
        lambda o: _init(o, "wait-for-postgres")["command"][2],
        WAIT.format("evaluator-pg-postgresql.nemo.svc.cluster.local"),
    ),
    (
        "NemoCustomizer",
        "model download jobs",
        lambda o: {
            k: v
            for k, v in _config(o)["model_download_jobs"].items()
            if k.startswith(("ngc", "imagePull"))
        },
        {
            "imagePullPolicy": "IfNotPresent",
            "imagePullSecrets": [{"name": "ngc-secret"}],
            "ngcAPISecret": "ngc-api-secret",
            "ngcAPISecretKey": "NGC_API_KEY",
            "ngcSecretName": "ngc-api-secret",
            "ngcSecretKey": "NGC_API_KEY",
        },
    ),
    (
        "NemoCustomizer",
        "Role rule on events",
        lambda o: next(r for r in _rules(o) if r["resources"] == ["events"])["verbs"],
        ["create", "get", "list", "watch"],
    ),
    *(
        (
            kind,
            "Service selector",
            lambda o: next(v for (k, _), v in o.items() if k == "Service")["spec"]["selector"],
            selector,
        )
        for kind, selector in (
            ("NemoCustomizer", {"app.kubernetes.io/name": "nemocustomizer-sample"}),
            ("NemoEvaluator", {"app.kubernetes.io/name": "nemoevaluator-sample"}),
            (
                "NemoDatastore",
                {
                    "app.kubernetes.io/name": "nemodatastore-sample",
                    "app.kubernetes.io/instance": "nemodatastore-sample",
                },
            ),
            (
                "NemoEntitystore",
                {
                    "app": "nemoentitystore-sample",
                    "app.kubernetes.io/name": "nemoentitystore-sample",
                    "app.kubernetes.io/instance": "nemoentitystore-sample",
                },
            ),
        )
    ),
]


@pytest.mark.parametrize(
    ("kind", "what", "extract", "expected"),
    NVIDIA_VALUES,
    ids=[f"{k}-{w}".replace(" ", "_") for k, w, _, _ in NVIDIA_VALUES],
)
def test_nvidias_values(kind: str, what: str, extract: Any, expected: Any) -> None:
    obj = sample(kind)
    objs = render(obj)
    if expected is None:  # the selector: {app: <name>}
        expected = {"matchLabels": {"app": obj["metadata"]["name"]}}
    assert extract(objs) == expected


def test_guardrail_without_otel_disables_the_sdk() -> None:
    obj = sample("NemoGuardrail")
    obj["spec"].pop("otel", None)
    assert env(render(obj))["OTEL_SDK_DISABLED"] == "true"


def test_customizer_skips_missing_model_config_keys_as_nvidia_does() -> None:
    from platforms.nemo.customizer import missing_model_config_keys

    obj = sample("NemoCustomizer")
    only_targets = {**CONFIG_MAPS, "nemo-model-config": {"customizationTargets": "t: {}\n"}}
    config = _config(render(obj, config_maps=only_targets))
    assert "models" not in config and "customizationConfigTemplates" not in config
    assert config["customizationTargets"] == {"t": {}}
    assert missing_model_config_keys(load(obj), only_targets) == [
        "models",
        "customizationConfigTemplates",
    ]
