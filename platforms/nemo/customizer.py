"""NemoCustomizer: the Customizer's ``config.yaml``, its DSN Secret, model PVC, Role and env.

``config.yaml`` (ConfigMap ``<name>``, mounted at ``/app/config``) is assembled
from the spec (service URLs, W&B, model download jobs, datastore tools,
training) and from two user ConfigMaps: key ``training`` of
``trainingConfig.configMap`` (merged under the operator's training keys) and
keys ``models``, ``customizationTargets`` and ``customizationConfigTemplates``
of ``modelConfig``. The pod template carries
``apps.nvidia.com/training-config-hash`` (sha256 of ``config.yaml``), so a
change in either ConfigMap rolls the pods. The config never holds a secret:
W&B and NGC keys are Secret references, the DB password is only in Secret
``<name>`` key ``dsn``. The Role grants the training-job APIs plus Volcano's
or Run:ai's by ``scheduler.type``.
"""

from __future__ import annotations

import base64
import hashlib
import io
from collections.abc import Mapping
from typing import Any, ClassVar

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from api.apps.v1alpha1 import nemo_customizer as api
from manifests import configmap, pod, role, service
from manifests.meta import object_meta
from platforms.nemo.common import (
    API_PORT_NAME,
    NemoRenderer,
    RenderFailed,
    image_of,
    otel_env,
    plain,
    postgres_uri,
    pvc_name,
)

__all__ = [
    "CONFIG_HASH_ANNOTATION",
    "CONFIG_KEY",
    "MODEL_CONFIG_KEYS",
    "TRAINING_CONFIG_KEY",
    "CustomizerRenderer",
    "missing_model_config_keys",
    "referenced_config_maps",
]

from nimctl_runtime.meta import Obj

CONFIG_HASH_ANNOTATION = "apps.nvidia.com/training-config-hash"
CONFIG_KEY = "config.yaml"
CONFIG_MOUNT = "/app/config"
TRAINING_CONFIG_KEY = "training"
MODEL_CONFIG_KEYS = ("models", "customizationTargets", "customizationConfigTemplates")
ALL_VERBS = ["create", "get", "list", "watch", "update", "delete", "patch"]
READ_VERBS = ["get", "list", "watch"]


def referenced_config_maps(cr: api.NemoCustomizer) -> list[str]:
    """The ConfigMaps ``config.yaml`` is assembled from (model config first)."""
    names = [cr.spec.model_config_ref.name]
    training = cr.spec.training_config.config_map
    if training is not None and training.name not in names:
        names.append(training.name)
    return names


def missing_model_config_keys(
    cr: api.NemoCustomizer, config_maps: Mapping[str, Mapping[str, str]]
) -> list[str]:
    """The ``modelConfig`` keys its ConfigMap lacks (left out of ``config.yaml``)."""
    data = config_maps.get(cr.spec.model_config_ref.name)
    if data is None:
        return []
    return [key for key in MODEL_CONFIG_KEYS if key not in data]


def _load_yaml(text: str, where: str) -> Any:
    try:
        return YAML(typ="safe", pure=True).load(text)
    except YAMLError as exc:
        raise RenderFailed(f"{where}: not valid YAML: {exc}") from None


def _dump_yaml(value: Any) -> str:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    out = io.StringIO()
    yaml.dump(value, out)
    return out.getvalue()


def _sorted(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _sorted(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


class CustomizerRenderer(NemoRenderer[api.NemoCustomizer]):
    part_of: ClassVar[str] = api.PART_OF
    api_port: ClassVar[int] = api.API_PORT

    # -- ports and probes -----------------------------------------------------------

    def container_ports(self) -> list[Obj]:
        return [
            {"name": API_PORT_NAME, "containerPort": api.API_PORT, "protocol": "TCP"},
            {
                "name": api.NAMED_PORT_INTERNAL,
                "containerPort": api.INTERNAL_PORT,
                "protocol": "TCP",
            },
        ]

    def service_ports(self) -> list[Obj]:
        return [
            service.service_port(API_PORT_NAME, self.service_port, API_PORT_NAME),
            service.service_port(
                api.NAMED_PORT_INTERNAL, api.INTERNAL_PORT, api.NAMED_PORT_INTERNAL
            ),
        ]

    def probes(self) -> tuple[Obj, Obj, Obj]:
        return (
            pod.http_get_probe(
                "/v1/health/live",
                API_PORT_NAME,
                initial_delay_seconds=10,
                timeout_seconds=10,
                failure_threshold=5,
            ),
            pod.http_get_probe("/v1/health/ready", API_PORT_NAME, initial_delay_seconds=10),
            pod.http_get_probe(
                "/v1/health/ready", API_PORT_NAME, initial_delay_seconds=30, failure_threshold=30
            ),
        )

    # -- env and volumes --------------------------------------------------------------

    def standard_env(self) -> list[Obj]:
        s = self.spec
        creds = s.database_config.credentials
        return [
            pod.env_var("NAMESPACE", self.namespace),
            pod.field_env_var("HOST_IP", "status.hostIP"),
            pod.env_var("CONFIG_PATH", f"{CONFIG_MOUNT}/{CONFIG_KEY}"),
            pod.env_var(
                "CUSTOMIZATIONS_CALLBACK_URL",
                f"http://{self.name}.{self.namespace}.svc.cluster.local:{api.INTERNAL_PORT}",
            ),
            pod.env_var("LOG_LEVEL", "INFO"),
            pod.secret_env_var("WANDB_ENCRYPTION_KEY", s.wandb.secret_name, s.wandb.encryption_key),
            pod.env_var("WANDB_SECRET_NAME", s.wandb.secret_name),
            pod.env_var("WANDB_SECRET_KEY", s.wandb.api_key_key),
            pod.secret_env_var("POSTGRES_DB_PASSWORD", creds.secret_name, creds.password_key),
            pod.secret_env_var("POSTGRES_DB_DSN", self.name, "dsn"),
            pod.env_var("POSTGRES_SECRET_NAME", creds.secret_name),
            *otel_env(s.otel),
        ]

    def volumes(self) -> list[Obj]:
        return [
            {
                "name": "config",
                "configMap": {
                    "name": self.name,
                    "items": [{"key": CONFIG_KEY, "path": CONFIG_KEY}],
                },
            }
        ]

    def volume_mounts(self) -> list[Obj]:
        return [pod.volume_mount("config", CONFIG_MOUNT, read_only=True)]

    def pod_annotations(self) -> dict[str, str]:
        out = super().pod_annotations()
        out[CONFIG_HASH_ANNOTATION] = self.config_hash()
        return out

    # -- RBAC -------------------------------------------------------------------------

    def role_rules(self) -> list[Obj]:
        rules = [
            role.scc_rule("nonroot"),
            role.policy_rule(["batch"], ["jobs"], ALL_VERBS),
            role.policy_rule(["batch"], ["jobs/status"], READ_VERBS),
            role.policy_rule(
                [""],
                ["pods", "persistentvolumeclaims", "services", "configmaps"],
                ["create", "get", "list", "watch", "delete"],
            ),
            role.policy_rule([""], ["events"], ["create", *READ_VERBS]),
            role.policy_rule(
                ["nvidia.com"],
                ["nemotrainingjobs", "nemotrainingjobs/status", "nemoentityhandlers"],
                ALL_VERBS,
            ),
        ]
        if self.spec.scheduler.type == api.SCHEDULER_RUNAI:
            rules.append(
                role.policy_rule(["run.ai"], ["trainingworkloads", "runaijobs"], ALL_VERBS)
            )
        else:
            rules.extend(
                [
                    role.policy_rule(["batch.volcano.sh"], ["jobs"], ALL_VERBS),
                    role.policy_rule(["batch.volcano.sh"], ["jobs/status"], READ_VERBS),
                    role.policy_rule(["nodeinfo.volcano.sh"], ["numatopologies"], READ_VERBS),
                    role.policy_rule(
                        ["scheduling.incubator.k8s.io", "scheduling.volcano.sh"],
                        ["queues", "queues/status", "podgroups"],
                        READ_VERBS,
                    ),
                ]
            )
        return rules

    # -- config.yaml --------------------------------------------------------------------

    def _config_map(self, name: str) -> Mapping[str, str]:
        data = self.facts.config_map_data(name)
        if data is None:
            raise RenderFailed(f"ConfigMap {name} not found")
        return data

    def _pull_secrets(self) -> list[Obj]:
        return [{"name": s} for s in self.pull_secrets]

    def model_pvc_name(self) -> str:
        return pvc_name(self.name, self.spec.training_config.model_pvc)

    def training_config(self) -> Obj:
        t = self.spec.training_config
        out: Obj = {}
        if t.config_map is not None:
            where = f"ConfigMap {t.config_map.name} key {TRAINING_CONFIG_KEY!r}"
            raw = self._config_map(t.config_map.name).get(TRAINING_CONFIG_KEY)
            if raw is None:
                raise RenderFailed(f"{where}: not found")
            loaded = _load_yaml(raw, where)
            if loaded is not None and not isinstance(loaded, Mapping):
                raise RenderFailed(f"{where}: must be a mapping")
            out.update(loaded or {})
        workspace = t.workspace_pvc
        dshm: Obj = {"medium": "Memory"}
        if t.shared_memory_size_limit:
            dshm["sizeLimit"] = str(t.shared_memory_size_limit)
        out.update(
            {
                "image": image_of(t.image.repository, t.image.tag),
                "imagePullPolicy": self.pull_policy or "",
                "imagePullSecrets": self._pull_secrets(),
                # NVIDIA writes the lists as they are in the spec: null when unset.
                "env": plain(t.env) if t.env is not None else None,
                "training_networking": (
                    plain(t.network_config) if t.network_config is not None else None
                ),
                "workspace_dir": workspace.mount_path,
                "use_run_ai_executor": self.spec.scheduler.type == api.SCHEDULER_RUNAI,
                "pvc": {
                    "storageClass": workspace.storage_class or "",
                    "volumeAccessMode": workspace.volume_access_mode or "",
                    "size": workspace.size or "",
                },
                "volumes": [
                    {
                        "name": "models",
                        "persistentVolumeClaim": {
                            "claimName": self.model_pvc_name(),
                            "readOnly": True,
                        },
                    },
                    {"name": "dshm", "emptyDir": dshm},
                ],
                "volumeMounts": [
                    {"name": "models", "mountPath": "/mount/models", "readOnly": True},
                    {"name": "dshm", "mountPath": "/dev/shm"},
                ],
            }
        )
        if t.ttl_seconds_after_finished is not None:
            out["ttl_seconds_after_finished"] = t.ttl_seconds_after_finished
        if t.timeout is not None:
            out["training_timeout"] = t.timeout
        if t.tolerations:
            out["tolerations"] = plain(t.tolerations)
        if t.node_selector:
            out["nodeSelector"] = dict(t.node_selector)
        if t.affinity is not None:
            out["affinity"] = plain(t.affinity)
        elif t.pod_affinity is not None:
            out["affinity"] = {"podAffinity": plain(t.pod_affinity)}
        if t.resources is not None:
            out["resources"] = plain(t.resources)
        return out

    def model_config(self) -> Obj:
        name = self.spec.model_config_ref.name
        data = self._config_map(name)
        out: Obj = {}
        for key in MODEL_CONFIG_KEYS:
            raw = data.get(key)
            if raw is None:
                continue  # skipped, as NVIDIA's operator does (an Event names it)
            out[key] = _load_yaml(raw, f"ConfigMap {name} key {key!r}")
        return out

    def config(self) -> Obj:
        s = self.spec
        jobs = s.model_download_jobs
        download: Obj = {
            "image": jobs.image,
            # NVIDIA's jobs take the Customizer image's pull policy, not their own field.
            "imagePullPolicy": self.pull_policy or "",
            "imagePullSecrets": self._pull_secrets(),
            "ngcAPISecret": jobs.ngc_api_secret.name,
            "ngcAPISecretKey": jobs.ngc_api_secret.key,
            "ngcSecretName": jobs.ngc_api_secret.name,
            "ngcSecretKey": jobs.ngc_api_secret.key,
            "securityContext": plain(jobs.security_context) if jobs.security_context else None,
            "ttlSecondsAfterFinished": jobs.ttl_seconds_after_finished,
            "pollIntervalSeconds": jobs.poll_interval_seconds,
        }
        if jobs.hf_secret is not None:
            download["hfSecretName"] = jobs.hf_secret.name
            download["hfSecretKey"] = jobs.hf_secret.key
        tools: Obj = {"image": s.nemo_datastore_tools.image}
        if self.pull_secrets:
            tools["imagePullSecret"] = self.pull_secrets[0]
        cfg: Obj = {
            "namespace": self.namespace,
            "entity_store_url": s.entitystore.endpoint,
            "nemo_data_store_url": s.datastore.endpoint,
            "mlflow_tracking_url": s.mlflow.endpoint,
            "wandb": {"project": s.wandb.project_name, "entity": s.wandb.entity},
            "model_download_jobs": download,
            "nemo_data_store_tools": tools,
            "training": self.training_config(),
        }
        cfg.update(self.model_config())
        return cfg

    def config_text(self) -> str:
        cached: str | None = getattr(self, "_config_text", None)
        if cached is None:
            cached = _dump_yaml(_sorted(self.config()))
            self._config_text = cached
        return cached

    def config_hash(self) -> str:
        return hashlib.sha256(self.config_text().encode()).hexdigest()

    # -- extra objects ------------------------------------------------------------------

    def objects_before_deployment(self) -> list[Obj]:
        password = self.facts.db_password
        if password is None:
            raise RenderFailed("the database password has not been read")
        dsn = postgres_uri(self.spec.database_config, password)
        objs = [
            configmap.build(self.meta(), {CONFIG_KEY: self.config_text()}),
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": object_meta(
                    self.name,
                    self.namespace,
                    labels=self.labels,
                    annotations=self.annotations,
                    owner_references=self.owner_refs,
                ),
                "type": "Opaque",
                "data": {"dsn": base64.b64encode(dsn.encode()).decode()},
            },
        ]
        model_pvc = self.spec.training_config.model_pvc
        if model_pvc.create:
            objs.append(
                self.created_pvc(model_pvc, self.model_pvc_name(), "spec.trainingConfig.modelPVC")
            )
        return objs
