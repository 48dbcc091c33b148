"""The five NeMo controllers against a LocalCluster, through real HTTP.

NVIDIA's NeMo samples (docs/examples/nemo-*.yaml) are applied unchanged, with
the Secrets, ConfigMaps and dependency Services ``platforms.nemo.demo``
derives from them. One cluster and one operator serve the module; each test
works in its own namespace (the samples' dependency hosts live in ``nemo``).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import hashlib
import io
import json
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from api.serialize import dump, load
from nimctl.demo import apply_objects
from nimctl_runtime.client import Client, NotFound
from nimctl_runtime.logsetup import configure_logging
from platforms.nemo.demo import DEMO_PASSWORD, dependency_objects, sample_crs, secret
from tests.integration.controllers.harness import (
    API,
    Operator,
    cluster_with_crds,
    quiet,
    reconciled_and_settled,
    reconciles,
    start_operator,
    wait_for,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

KINDS = ("NemoDatastore", "NemoEntitystore", "NemoEvaluator", "NemoGuardrail", "NemoCustomizer")
CONFIG_HASH = "apps.nvidia.com/training-config-hash"
GUARDRAIL_DB = {
    "host": "guardrail-pg-postgresql.nemo.svc.cluster.local",
    "port": 5432,
    "databaseName": "guardrail",
    "credentials": {"user": "grduser", "secretName": "guardrail-pg-secret"},
}
STORAGE_CLASS: dict[str, Any] = {
    "apiVersion": "storage.k8s.io/v1",
    "kind": "StorageClass",
    "metadata": {
        "name": "standard",
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
    },
    "provisioner": "localcluster.nimctl.io/hostpath",
    "volumeBindingMode": "Immediate",
}


class Env:
    def __init__(self, cluster: Any, admin: Client, operator: Operator) -> None:
        self.cluster = cluster
        self.admin = admin
        self.operator = operator


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def env(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    tmp: Path = tmp_path_factory.mktemp("nemo")
    async with cluster_with_crds(tmp) as (cluster, admin):
        await apply_objects(admin, [STORAGE_CLASS])
        kubeconfig = cluster.write_kubeconfig(tmp / "operator.kubeconfig", user="nimctl-operator")
        operator = await start_operator(kubeconfig)
        try:
            yield Env(cluster, admin, operator)
        finally:
            await operator.shutdown()


def sample(
    kind: str, namespace: str, edit: Callable[[dict[str, Any]], None] | None = None
) -> dict[str, Any]:
    """NVIDIA's sample of ``kind`` as applied by a user, moved to ``namespace``."""
    cr = next(c for c in sample_crs() if c.kind == kind)
    obj = dump(cr)
    obj["metadata"]["namespace"] = namespace
    if edit is not None:
        edit(obj)
    return obj


async def apply(
    env: Env, obj: dict[str, Any], *, skip: Callable[[dict[str, Any]], bool] = lambda o: False
) -> None:
    """The CR's prerequisites (minus ``skip``), then the CR."""
    deps = [o for o in dependency_objects([load(obj)]) if not skip(o)]
    await apply_objects(env.admin, deps)
    await env.admin.create(copy.deepcopy(obj))


async def status_of(env: Env, kind: str, name: str, ns: str) -> dict[str, Any]:
    obj = await env.admin.get(API, kind, name, ns)
    return dict(obj.get("status") or {})


async def wait_state(
    env: Env, kind: str, name: str, ns: str, state: str, timeout: float = 60
) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        st = await status_of(env, kind, name, ns)
        return st if st.get("state") == state else None

    result: dict[str, Any] = await wait_for(check, timeout=timeout)
    return result


def failed_condition(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status.get("conditions", []) if c["type"] == "Failed")


async def events_for(env: Env, ns: str, name: str) -> list[dict[str, Any]]:
    items = (await env.admin.list("v1", "Event", ns))["items"]
    return [e for e in items if (e.get("involvedObject") or {}).get("name") == name]


def container(dep: dict[str, Any]) -> dict[str, Any]:
    ctrs: list[dict[str, Any]] = dep["spec"]["template"]["spec"]["containers"]
    return ctrs[0]


def env_map(ctr: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in ctr.get("env", [])}


def fresh_ns(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# -- every sample reaches Ready with the reference Deployment ---------------------------

EXPECTED = {
    # kind: (API container port, probe path, env that must be there, volumes)
    "NemoDatastore": (
        3000,
        "/v1/health",
        {"GITEA__DATABASE__PASSWD", "GITEA_APP_INI", "GITEA__LFS__MINIO_ACCESS_KEY_ID"},
        {"init", "config", "inline-config-sources", "temp", "data"},
    ),
    "NemoEntitystore": (
        8000,
        "/health",
        {"APP_VERSION", "BASE_URL_DATASTORE", "POSTGRES_PASSWORD", "POSTGRES_HOST"},
        set(),
    ),
    "NemoEvaluator": (
        7331,
        "/health",
        {
            "ARGO_HOST",
            "MILVUS_URL",
            "POSTGRES_URI",
            "EVAL_ENABLE_VALIDATION",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "BIGCODE_EVALUATION_HARNESS",
        },
        set(),
    ),
    "NemoGuardrail": (
        8000,
        "/v1/health",
        {"CONFIG_STORE_PATH", "NIM_ENDPOINT_URL", "NIM_ENDPOINT_API_KEY"},
        {"config-store"},
    ),
    "NemoCustomizer": (
        8000,
        "/v1/health/ready",
        {"CONFIG_PATH", "POSTGRES_DB_DSN", "WANDB_SECRET_KEY", "CUSTOMIZATIONS_CALLBACK_URL"},
        {"config"},
    ),
}


@pytest.mark.parametrize("kind", KINDS)
async def test_nvidias_sample_reaches_ready_with_the_reference_deployment(
    env: Env, kind: str
) -> None:
    ns = fresh_ns(kind.lower())
    obj = sample(kind, ns)
    name = obj["metadata"]["name"]
    await apply(env, obj)
    st = await wait_state(env, kind, name, ns, "Ready")
    ready = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "True" and "successfully rolled out" in ready["message"]
    assert st.get("availableReplicas") == 1

    dep = await env.admin.get("apps/v1", "Deployment", name, ns)
    ctr = container(dep)
    port, probe, env_names, volumes = EXPECTED[kind]
    assert ctr["name"] == f"{name}-ctr"
    assert {"name": "api", "containerPort": port, "protocol": "TCP"} in ctr["ports"]
    assert (
        ctr["readinessProbe"]["httpGet"] == {"path": probe, "port": "api", "scheme": "HTTP"}
        or ctr["readinessProbe"]["httpGet"]["path"] == probe
    )
    assert ctr["livenessProbe"] and ctr["startupProbe"]
    assert env_names <= set(env_map(ctr))
    assert volumes <= {v["name"] for v in dep["spec"]["template"]["spec"].get("volumes", [])}
    pod_sc = dep["spec"]["template"]["spec"]["securityContext"]
    if kind == "NemoDatastore":
        assert pod_sc == {"fsGroup": 1000}  # NVIDIA's Datastore: fsGroup only
    else:
        assert (pod_sc["runAsUser"], pod_sc["fsGroup"]) == (1000, 2000)
    assert dep["spec"]["selector"] == {"matchLabels": {"app": name}}
    assert dep["spec"]["template"]["metadata"]["labels"]["app"] == name
    assert dep["spec"]["strategy"]["rollingUpdate"]["maxSurge"] == 0
    svc = await env.admin.get("v1", "Service", name, ns)
    assert svc["spec"]["ports"][0]["name"] == "api" and svc["spec"]["ports"][0]["port"] == 8000
    for api_version, owned in (
        ("v1", "ServiceAccount"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
    ):
        await env.admin.get(api_version, owned, name, ns)  # NotFound fails the test
    if kind in ("NemoEntitystore", "NemoEvaluator"):
        inits = [c["name"] for c in dep["spec"]["template"]["spec"]["initContainers"]]
        assert inits[0] == "wait-for-postgres" and inits[1].endswith("-db-migration")


# -- a missing password Secret is reported, and the CR recovers -------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_missing_password_secret_is_reported_and_recovers(env: Env, kind: str) -> None:
    ns = fresh_ns("nopw")

    def with_db(o: dict[str, Any]) -> None:
        if kind == "NemoGuardrail":
            o["spec"]["databaseConfig"] = copy.deepcopy(GUARDRAIL_DB)

    obj = sample(kind, ns, with_db)
    name = obj["metadata"]["name"]
    creds = obj["spec"]["databaseConfig"]["credentials"]
    pw_secret = creds["secretName"]
    await apply(
        env, obj, skip=lambda o: o["kind"] == "Secret" and o["metadata"]["name"] == pw_secret
    )

    st = await wait_state(env, kind, name, ns, "Failed")
    cond = failed_condition(st)
    assert cond["status"] == "True" and cond["reason"] == "SecretNotFound"
    assert pw_secret in cond["message"]
    events = await wait_for(lambda: events_for(env, ns, name))
    assert any(e["reason"] == "SecretNotFound" and e["type"] == "Warning" for e in events)
    with pytest.raises(NotFound):
        await env.admin.get("apps/v1", "Deployment", name, ns)

    await env.admin.create(
        secret(pw_secret, ns, {creds.get("passwordKey", "password"): DEMO_PASSWORD})
    )
    await wait_state(env, kind, name, ns, "Ready")


# -- the Customizer's config follows its ConfigMaps -------------------------------------


async def test_customizer_config_and_pod_hash_follow_the_model_config_map(env: Env) -> None:
    ns = fresh_ns("cfg")
    obj = sample("NemoCustomizer", ns)
    name = obj["metadata"]["name"]
    await apply(env, obj)
    await wait_state(env, "NemoCustomizer", name, ns, "Ready")

    cm = await env.admin.get("v1", "ConfigMap", name, ns)
    before = cm["data"]["config.yaml"]
    dep = await env.admin.get("apps/v1", "Deployment", name, ns)
    hash_before = dep["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH]
    assert hash_before == hashlib.sha256(before.encode()).hexdigest()
    assert "llama32_1b-instruct" in before and "mlflow_tracking_url" in before

    model_cm = obj["spec"]["modelConfig"]["name"]
    new_models = "meta/llama-3.1-8b-instruct:\n  enabled: true\n  model_path: l31-8b\n"
    await env.admin.patch(
        "v1", "ConfigMap", model_cm, {"data": {"models": new_models}}, namespace=ns
    )

    async def changed() -> dict[str, Any] | None:
        cm = await env.admin.get("v1", "ConfigMap", name, ns)
        text = cm["data"]["config.yaml"]
        return cm if "l31-8b" in text else None

    cm = await wait_for(changed)
    after = cm["data"]["config.yaml"]
    assert "llama32_1b-instruct" not in after

    async def rolled() -> str | None:
        dep = await env.admin.get("apps/v1", "Deployment", name, ns)
        value = dep["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH]
        return value if value != hash_before else None

    assert await wait_for(rolled) == hashlib.sha256(after.encode()).hexdigest()

    training_cm = obj["spec"]["trainingConfig"]["configMap"]["name"]
    await env.admin.patch(
        "v1",
        "ConfigMap",
        training_cm,
        {"data": {"training": "queue_hint: from-training-cm\n"}},
        namespace=ns,
    )
    await wait_for(lambda: _config_contains(env, ns, name, "from-training-cm"))


async def _config_contains(env: Env, ns: str, name: str, text: str) -> bool:
    cm = await env.admin.get("v1", "ConfigMap", name, ns)
    return text in cm["data"]["config.yaml"]


# -- Guardrail config stores, Datastore PVCs --------------------------------------------


async def test_guardrail_with_a_config_map_store(env: Env) -> None:
    ns = fresh_ns("grcm")
    obj = sample("NemoGuardrail", ns)
    name = obj["metadata"]["name"]
    await apply(env, obj)
    await wait_state(env, "NemoGuardrail", name, ns, "Ready")
    dep = await env.admin.get("apps/v1", "Deployment", name, ns)
    vols = dep["spec"]["template"]["spec"]["volumes"]
    assert {
        "name": "config-store",
        "configMap": {"name": "gr-config", "defaultMode": 420},
    } in vols or any(v.get("configMap", {}).get("name") == "gr-config" for v in vols)
    mount = container(dep)["volumeMounts"][0]
    assert (mount["name"], mount["mountPath"]) == ("config-store", "/config-store")


async def test_guardrail_with_a_pvc_store_created_or_existing(env: Env) -> None:
    ns = fresh_ns("grpvc")

    def created(o: dict[str, Any]) -> None:
        o["spec"]["configStore"] = {
            "pvc": {
                "name": "gr-store",
                "create": True,
                "size": "1Gi",
                "volumeAccessMode": "ReadWriteOnce",
            }
        }

    obj = sample("NemoGuardrail", ns, created)
    name = obj["metadata"]["name"]
    await apply(env, obj)
    await wait_state(env, "NemoGuardrail", name, ns, "Ready")
    pvc = await env.admin.get("v1", "PersistentVolumeClaim", "gr-store", ns)
    assert pvc["spec"]["resources"]["requests"]["storage"] == "1Gi"
    dep = await env.admin.get("apps/v1", "Deployment", name, ns)
    assert {"name": "config-store", "persistentVolumeClaim": {"claimName": "gr-store"}} in dep[
        "spec"
    ]["template"]["spec"]["volumes"]
    assert container(dep)["volumeMounts"][0]["subPath"] == "guardrails-config-store"

    # An existing PVC: missing at first (reported), then created by the user.
    def existing(o: dict[str, Any]) -> None:
        o["metadata"]["name"] = "gr-existing"
        o["spec"]["configStore"] = {"pvc": {"name": "user-store", "subPath": "cfg"}}

    obj2 = sample("NemoGuardrail", ns, existing)
    await env.admin.create(obj2)
    st = await wait_state(env, "NemoGuardrail", "gr-existing", ns, "Failed")
    assert failed_condition(st)["reason"] == "PVCNotFound"
    await env.admin.create(_pvc("user-store", ns))
    await wait_state(env, "NemoGuardrail", "gr-existing", ns, "Ready")
    dep = await env.admin.get("apps/v1", "Deployment", "gr-existing", ns)
    assert container(dep)["volumeMounts"][0]["subPath"] == "cfg"


def _pvc(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


async def test_datastore_with_a_created_and_with_an_existing_pvc(env: Env) -> None:
    ns = fresh_ns("dspvc")
    obj = sample("NemoDatastore", ns)  # the sample creates pvc-shared-data
    name = obj["metadata"]["name"]
    await apply(env, obj)
    await wait_state(env, "NemoDatastore", name, ns, "Ready")
    pvc = await env.admin.get("v1", "PersistentVolumeClaim", "pvc-shared-data", ns)
    assert pvc["metadata"]["ownerReferences"][0]["name"] == name

    def existing(o: dict[str, Any]) -> None:
        o["metadata"]["name"] = "ds-existing"
        o["spec"]["pvc"] = {"name": "ds-user-data"}

    obj2 = sample("NemoDatastore", ns, existing)
    await env.admin.create(obj2)
    st = await wait_state(env, "NemoDatastore", "ds-existing", ns, "Failed")
    assert failed_condition(st)["reason"] == "PVCNotFound"
    assert "ds-user-data" in failed_condition(st)["message"]
    await env.admin.create(_pvc("ds-user-data", ns))
    await wait_state(env, "NemoDatastore", "ds-existing", ns, "Ready")
    dep = await env.admin.get("apps/v1", "Deployment", "ds-existing", ns)
    assert {"name": "data", "persistentVolumeClaim": {"claimName": "ds-user-data"}} in dep["spec"][
        "template"
    ]["spec"]["volumes"]
    user_pvc = await env.admin.get("v1", "PersistentVolumeClaim", "ds-user-data", ns)
    assert not user_pvc["metadata"].get("ownerReferences")


# -- idempotence and deletion -------------------------------------------------------------


async def test_a_second_reconcile_writes_nothing_and_delete_removes_everything(env: Env) -> None:
    ns = fresh_ns("idem")
    objs = [sample(kind, ns) for kind in KINDS]
    # A CR NVIDIA's operator reconciled before carries its no-op finalizer.
    nvidia_finalizer = "finalizer.nemodatastore.apps.nvidia.com"
    objs[0]["metadata"]["finalizers"] = [nvidia_finalizer]
    for obj in objs:
        await apply(env, obj)
    for obj in objs:
        await wait_state(env, obj["kind"], obj["metadata"]["name"], ns, "Ready")
    assert await quiet(env.operator.client, 2.0) == []
    for obj in objs:
        live = await env.admin.get(API, obj["kind"], obj["metadata"]["name"], ns)
        assert not live["metadata"].get("finalizers"), obj["kind"]

    for obj in objs:
        await env.admin.delete(API, obj["kind"], obj["metadata"]["name"], ns)

    async def gone() -> bool:
        for kind_api, kind in (
            ("apps/v1", "Deployment"),
            ("v1", "Service"),
            ("v1", "ServiceAccount"),
            ("rbac.authorization.k8s.io/v1", "Role"),
            ("rbac.authorization.k8s.io/v1", "RoleBinding"),
            ("v1", "ConfigMap"),
            ("v1", "Secret"),
            ("networking.k8s.io/v1", "Ingress"),
            ("autoscaling/v2", "HorizontalPodAutoscaler"),
        ):
            for obj in objs:
                with contextlib.suppress(NotFound):
                    await env.admin.get(kind_api, kind, obj["metadata"]["name"], ns)
                    return False
        for obj in objs:
            with contextlib.suppress(NotFound):
                await env.admin.get(API, obj["kind"], obj["metadata"]["name"], ns)
                return False
        return True

    await wait_for(gone, timeout=60)


# -- the DB password stays in the Secret the operator writes --------------------------


async def test_the_db_password_never_reaches_logs_events_status_or_config_maps(env: Env) -> None:
    ns = fresh_ns("leak")
    password = f"pw-{uuid.uuid4().hex}"
    stderr = io.StringIO()
    configure_logging("json", "debug")
    try:
        # Loggers bound before this test keep the stream of their time (stdout or stderr).
        with contextlib.redirect_stderr(stderr), contextlib.redirect_stdout(stderr):
            objs = []
            for kind in ("NemoCustomizer", "NemoEvaluator", "NemoGuardrail"):

                def with_db(o: dict[str, Any], kind: str = kind) -> None:
                    if kind == "NemoGuardrail":
                        o["spec"]["databaseConfig"] = copy.deepcopy(GUARDRAIL_DB)

                obj = sample(kind, ns, with_db)
                creds = obj["spec"]["databaseConfig"]["credentials"]
                pw_secret = creds["secretName"]
                await apply(
                    env,
                    obj,
                    skip=lambda o, s=pw_secret: (
                        o["kind"] == "Secret" and o["metadata"]["name"] == s
                    ),
                )
                await env.admin.create(
                    secret(pw_secret, ns, {creds.get("passwordKey", "password"): password})
                )
                objs.append(obj)
            # A render failure: the operator logs the reconcile error (and reports it).
            model_cm = objs[0]["spec"]["modelConfig"]["name"]
            await env.admin.patch(
                "v1", "ConfigMap", model_cm, {"data": {"models": "a: [b"}}, namespace=ns
            )
            st = await wait_state(env, "NemoCustomizer", objs[0]["metadata"]["name"], ns, "Failed")
            assert "not valid YAML" in failed_condition(st)["message"]
            await env.admin.patch(
                "v1", "ConfigMap", model_cm, {"data": {"models": "a: {}\n"}}, namespace=ns
            )
            for obj in objs:
                await wait_state(env, obj["kind"], obj["metadata"]["name"], ns, "Ready")
            # A change that re-renders (and re-reads the password) while we listen.
            before = reconciles("nemoevaluator")
            await env.admin.patch(
                API,
                "NemoEvaluator",
                "nemoevaluator-sample",
                {"spec": {"evalLogLevel": "DEBUG"}},
                namespace=ns,
            )
            await reconciled_and_settled(env.operator, "nemoevaluator", before)
    finally:
        configure_logging("json", "info")

    logs = stderr.getvalue()
    assert "not valid YAML" in logs, "the operator's reconcile error was not captured"
    assert password not in logs
    encoded = base64.b64encode(password.encode()).decode()
    assert encoded not in logs

    # Positive control: the operator's own Secrets hold the connection strings.
    for obj in objs:
        key = "dsn" if obj["kind"] == "NemoCustomizer" else "uri"
        written = await env.admin.get("v1", "Secret", obj["metadata"]["name"], ns)
        assert password in base64.b64decode(written["data"][key]).decode()

    for obj in objs:
        cr = await env.admin.get(API, obj["kind"], obj["metadata"]["name"], ns)
        assert password not in json.dumps(cr)
    events = (await env.admin.list("v1", "Event", ns))["items"]
    assert events and password not in json.dumps(events)
    for kind_api, kind in (
        ("v1", "ConfigMap"),
        ("apps/v1", "Deployment"),
        ("v1", "Service"),
        ("v1", "Pod"),
    ):
        items = (await env.admin.list(kind_api, kind, ns))["items"]
        assert password not in json.dumps(items), kind


# -- ConfigMaps the Customizer reads; autoscaling turned off -----------------------------


async def test_missing_customizer_config_map_is_reported_and_recovers(env: Env) -> None:
    ns = fresh_ns("nocm")
    obj = sample("NemoCustomizer", ns)
    name = obj["metadata"]["name"]
    model_cm = obj["spec"]["modelConfig"]["name"]
    await apply(
        env, obj, skip=lambda o: o["kind"] == "ConfigMap" and o["metadata"]["name"] == model_cm
    )
    st = await wait_state(env, "NemoCustomizer", name, ns, "Failed")
    cond = failed_condition(st)
    assert (cond["reason"], cond["message"]) == (
        "ConfigMapNotFound",
        f"ConfigMap {model_cm} not found",
    )
    await env.admin.create(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": model_cm, "namespace": ns},
            "data": {"models": "m: {}\n"},
        }
    )
    await wait_state(env, "NemoCustomizer", name, ns, "Ready")


async def test_turning_autoscaling_off_deletes_the_hpa_and_sets_replicas(env: Env) -> None:
    ns = fresh_ns("hpa")
    obj = sample("NemoGuardrail", ns)  # scale.enabled with an HPA of 1..3
    name = obj["metadata"]["name"]
    await apply(env, obj)
    await wait_state(env, "NemoGuardrail", name, ns, "Ready")
    await env.admin.get("autoscaling/v2", "HorizontalPodAutoscaler", name, ns)
    await env.admin.patch(
        API,
        "NemoGuardrail",
        name,
        {"spec": {"scale": {"enabled": False}, "replicas": 2}},
        namespace=ns,
    )

    async def hpa_gone() -> bool:
        try:
            await env.admin.get("autoscaling/v2", "HorizontalPodAutoscaler", name, ns)
        except NotFound:
            return True
        return False

    await wait_for(hpa_gone)

    async def two_replicas() -> bool:
        dep = await env.admin.get("apps/v1", "Deployment", name, ns)
        return bool(dep["spec"].get("replicas") == 2)

    await wait_for(two_replicas)


async def test_pods_wait_for_their_postgres_service_to_have_ready_endpoints(env: Env) -> None:
    ns = fresh_ns("waitpg")

    def own_postgres(o: dict[str, Any]) -> None:
        o["spec"]["databaseConfig"]["host"] = f"late-pg.{ns}.svc.cluster.local"

    obj = sample("NemoEntitystore", ns, own_postgres)
    name = obj["metadata"]["name"]
    # Everything but the Postgres Deployment and Service.
    await apply(env, obj, skip=lambda o: o["metadata"]["name"] == "late-pg")

    async def waiting_pod() -> dict[str, Any] | None:
        pods = (await env.admin.list("v1", "Pod", ns))["items"]
        for pod in pods:
            statuses = (pod.get("status") or {}).get("initContainerStatuses") or []
            first = next((s for s in statuses if s["name"] == "wait-for-postgres"), None)
            if first is not None and "waiting" in first["state"]:
                return pod
        return None

    await wait_for(waiting_pod)
    await asyncio.sleep(1.0)
    assert await waiting_pod() is not None  # still waiting: no Postgres yet
    assert (await status_of(env, "NemoEntitystore", name, ns))["state"] == "NotReady"

    deps = dependency_objects([load(obj)])
    await apply_objects(env.admin, [o for o in deps if o["metadata"]["name"] == "late-pg"])
    await wait_state(env, "NemoEntitystore", name, ns, "Ready")


# -- NVIDIA's own Customizer sample (no `models` key) -------------------------------------


def nvidia_inputs(case: str) -> Path:
    """``<shared>/nvidia-samples/nemo-kserve-build-inputs/<case>/_inputs/input.yaml``."""
    root = Path(__file__).resolve().parents[3]
    for base in (root, *root.parents):
        found = base / "shared" / "nvidia-samples" / "nemo-kserve-build-inputs" / case
        if found.is_dir():
            return found / "_inputs" / "input.yaml"
    pytest.skip(f"NVIDIA's sample inputs ({case}) are not in a shared/ directory above {root}")


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def load_inputs(case: str, namespace: str) -> list[dict[str, Any]]:
    from ruamel.yaml import YAML

    docs = [d for d in YAML(typ="safe").load_all(nvidia_inputs(case).read_text()) if d]
    for d in docs:
        d["metadata"]["namespace"] = namespace
    return docs


async def test_customizer_from_nvidias_sample_creates_its_eight_objects(env: Env) -> None:
    ns = fresh_ns("nvcust")
    docs = load_inputs("nemo-latest-nemocustomizer", ns)
    cr = next(d for d in docs if d["kind"] == "NemoCustomizer")
    name = cr["metadata"]["name"]
    model_cm = next(d for d in docs if d["metadata"]["name"] == cr["spec"]["modelConfig"]["name"])
    assert "models" not in model_cm["data"]  # what made nimctl fail before
    await apply_objects(env.admin, [namespace(ns), *(d for d in docs if d is not cr)])
    await apply(env, cr)

    wanted = [
        ("v1", "ConfigMap", name),
        ("v1", "Secret", name),
        ("v1", "PersistentVolumeClaim", "finetuning-ms-models-pvc"),
        ("apps/v1", "Deployment", name),
        ("v1", "Service", name),
        ("v1", "ServiceAccount", name),
        ("rbac.authorization.k8s.io/v1", "Role", name),
        ("rbac.authorization.k8s.io/v1", "RoleBinding", name),
    ]

    async def all_there() -> list[dict[str, Any]]:
        return [await env.admin.get(a, k, n, ns) for a, k, n in wanted]

    objs = await wait_for(all_there)
    st = await wait_state(env, "NemoCustomizer", name, ns, "Ready")
    assert not [c for c in st["conditions"] if c["type"] == "Failed" and c["status"] == "True"]
    from ruamel.yaml import YAML

    config = YAML(typ="safe").load(objs[0]["data"]["config.yaml"])
    assert "models" not in config
    assert set(config["customizationTargets"]["targets"]) >= {"meta/llama-3.2-1b-instruct@2.0"}
    assert "templates" in config["customizationConfigTemplates"]
    assert config["training"]["container_defaults"] == {"imagePullPolicy": "IfNotPresent"}
    assert config["training"]["use_run_ai_executor"] is False
    skipped = [e for e in await events_for(env, ns, name) if e["reason"] == "ConfigMapKeySkipped"]
    assert len(skipped) == 1 and skipped[0]["type"] == "Normal"
    assert "ConfigMap nemo-model-config has no key 'models'" in skipped[0]["message"]


# -- a Deployment NVIDIA's operator made is taken over in place ---------------------------


async def test_a_deployment_nvidias_operator_made_is_adopted_without_a_restart(env: Env) -> None:
    from platforms.nemo.contract import CONTRACTS
    from platforms.nemo.facts import NemoFacts

    ns = fresh_ns("adopt")
    obj = sample("NemoEntitystore", ns)
    name = obj["metadata"]["name"]
    # The Deployment as NVIDIA's operator writes it: selector {app: <name>}, pods
    # labelled app plus the standard labels; its owner (NVIDIA's) is gone.
    ours = next(
        o
        for o in CONTRACTS["NemoEntitystore"].render(load(obj), NemoFacts())
        if o["kind"] == "Deployment"
    )
    nvidia = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns, "labels": ours["metadata"]["labels"]},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": name}},
            "strategy": ours["spec"]["strategy"],
            "template": ours["spec"]["template"],
        },
    }
    deps = dependency_objects([load(obj)])
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": ns},
    }
    await apply_objects(env.admin, [namespace(ns), *deps, account])
    await env.admin.create(nvidia)

    async def running_pods() -> list[str] | None:
        pods = (await env.admin.list("v1", "Pod", ns))["items"]
        mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("app") == name]
        ready = [p for p in mine if (p.get("status") or {}).get("phase") == "Running"]
        return sorted(p["metadata"]["uid"] for p in ready) or None

    pods_before = await wait_for(running_pods)
    dep_before = await env.admin.get("apps/v1", "Deployment", name, ns)

    await env.admin.create(copy.deepcopy(obj))
    await wait_state(env, "NemoEntitystore", name, ns, "Ready")

    async def owned() -> dict[str, Any] | None:
        dep = await env.admin.get("apps/v1", "Deployment", name, ns)
        refs = dep["metadata"].get("ownerReferences") or []
        return dep if any(r.get("kind") == "NemoEntitystore" for r in refs) else None

    dep_after = await wait_for(owned)
    assert dep_after["metadata"]["uid"] == dep_before["metadata"]["uid"]  # not deleted
    assert dep_after["spec"]["selector"] == {"matchLabels": {"app": name}}
    assert await running_pods() == pods_before  # not restarted


# -- each of NVIDIA's current samples, as NVIDIA's operator was run on them ---------------

NVIDIA_CASES = [
    "nemo-latest-nemocustomizer",
    "nemo-latest-nemodatastore",
    "nemo-latest-nemoentitystore",
    "nemo-latest-nemoevaluator",
    "nemo-latest-nemoguardrails",
    "nemo-2506-nemoguardrails",
]


@pytest.mark.parametrize("case", NVIDIA_CASES)
async def test_nvidias_current_samples_reach_ready_with_their_dependencies(
    env: Env, case: str
) -> None:
    ns = fresh_ns(case.removeprefix("nemo-")[:20])
    docs = load_inputs(case, ns)
    (cr,) = [d for d in docs if d["apiVersion"] == API]
    kind, name = cr["kind"], cr["metadata"]["name"]
    # The user's objects as given; what the sample names but does not carry (the
    # Postgres, MinIO, Argo ... Services) simulated.
    await apply_objects(env.admin, [namespace(ns), *(d for d in docs if d is not cr)])
    await apply(env, cr)
    st = await wait_state(env, kind, name, ns, "Ready", timeout=90)
    assert not [c for c in st["conditions"] if c["type"] == "Failed" and c["status"] == "True"]
    dep = await env.admin.get("apps/v1", "Deployment", name, ns)
    assert dep["spec"]["selector"] == {"matchLabels": {"app": name}}
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": "25%", "maxSurge": 0}
    ctr = container(dep)
    if kind == "NemoGuardrail" and "otel" not in cr["spec"]:
        assert env_map(ctr)["OTEL_SDK_DISABLED"] == "true"
    if kind == "NemoDatastore":
        inits = [c["name"] for c in dep["spec"]["template"]["spec"]["initContainers"]]
        assert inits == ["init-directories", "init-app-ini", "configure-datastore"]
        assert dep["spec"]["template"]["spec"]["securityContext"] == {"fsGroup": 1000}


# -- a blocked pod is named (issue 25) -----------------------------------------------------


async def test_a_blocked_pod_is_named_and_fixing_it_brings_ready(env: Env) -> None:
    ns = fresh_ns("blocked")

    def extra_secret(o: dict[str, Any]) -> None:
        o["spec"].setdefault("env", []).append(
            {
                "name": "EXTRA_TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "extra-token", "key": "token"}},
            }
        )

    obj = sample("NemoEntitystore", ns, extra_secret)
    name = obj["metadata"]["name"]
    await apply(env, obj)

    async def blocked() -> dict[str, Any] | None:
        st = await status_of(env, "NemoEntitystore", name, ns)
        ready = next((c for c in st.get("conditions", []) if c["type"] == "Ready"), {})
        return ready if ready.get("reason") == "SecretNotFound" else None

    ready = await wait_for(blocked, timeout=60)
    assert ready["message"].startswith(f"pod {name}-")
    assert ready["message"].endswith('cannot start: secret "extra-token" not found')
    assert (await status_of(env, "NemoEntitystore", name, ns))["state"] == "NotReady"

    def status_writes() -> int:
        return sum(
            1
            for method, path in env.operator.client.writes
            if method == "PATCH" and path.endswith(f"/nemoentitystores/{name}/status")
        )

    before = status_writes()
    await env.admin.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "extra-token", "namespace": ns},
            "stringData": {"token": "x"},
        }
    )
    await wait_state(env, "NemoEntitystore", name, ns, "Ready")
    # the blocker's end, maybe the rollout words once, then Ready
    assert status_writes() - before <= 3
