"""The objects every NeMo kind renders, and the hooks a kind fills in.

NVIDIA's five NeMo controllers build the same objects (nim-operator.md §5,
nemo.md): ServiceAccount, Role, RoleBinding, Service, Ingress (router or the
deprecated ``expose.ingress``), HTTPRoute, HPA, ServiceMonitor and the
Deployment, all named after the CR, labelled with the standard labels (the
kind's ``part-of`` value) and annotated with ``openshift.io/required-scc`` and
``nvidia.com/parent-spec-hash``. As NVIDIA's, every Deployment selects
``{app: <name>}`` (pods carry it with the standard labels) and rolls with
``maxSurge: 0``; the Service selects the kind's own selector labels.
``NemoRenderer`` builds them from the typed
CR; a kind subclasses it and overrides the hooks (ports, env, init
containers, volumes, probes, Role rules, extra objects). Rendering is pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from api.apps.v1alpha1.common import PersistentVolumeClaim
from api.apps.v1alpha1.nemo_common import DatabaseConfig, OTelSpec
from manifests import (
    deployment,
    hpa,
    httproute,
    ingress,
    pod,
    pvc,
    role,
    rolebinding,
    service,
    serviceaccount,
    servicemonitor,
)
from manifests.hashing import PARENT_SPEC_HASH_ANNOTATION, hash_value, stamped_copy
from manifests.labels import (
    APP_LABEL,
    NAME_LABEL,
    REQUIRED_SCC_ANNOTATION,
    merge_maps,
    standard_labels,
)
from manifests.meta import object_meta, owner_reference
from nimctl_runtime.meta import Obj
from platforms.capabilities import HTTP_ROUTE, SERVICE_MONITOR
from platforms.contract import ReconcileError
from platforms.nemo.facts import NemoFacts

__all__ = [
    "API_PORT_NAME",
    "NemoRenderer",
    "RenderFailed",
    "busybox_wait_for_postgres",
    "container_name",
    "env_names",
    "image_of",
    "otel_env",
    "plain",
    "postgres_uri",
    "pvc_name",
]

API_PORT_NAME = "api"
WAIT_FOR_POSTGRES = "wait-for-postgres"
DB_MIGRATION_LIMITS = {"limits": {"cpu": "1", "memory": "1Gi"}}
DEFAULT_USER_ID = 1000
"""The pod's runAsUser when ``spec.userID`` is unset (NVIDIA's CRD has no default)."""
DEFAULT_GROUP_ID = 2000
"""The pod's runAsGroup and fsGroup when ``spec.groupID`` is unset."""

CR = TypeVar("CR", bound=BaseModel)


class RenderFailed(ReconcileError):
    """The spec cannot be rendered (reported as ``Failed`` with the object's reason)."""


def plain(value: Any) -> Any:
    """A typed value (pydantic model, list of them) as Kubernetes JSON."""
    if isinstance(value, BaseModel):
        return value.model_dump(by_alias=True, exclude_none=True, mode="json")
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def image_of(repository: str, tag: str | None) -> str:
    return f"{repository}:{tag}" if tag else repository


def container_name(name: str) -> str:
    """The main container of every NeMo kind: ``<cr name>-ctr``."""
    return f"{name}-ctr"


def pvc_name(cr_name: str, claim: PersistentVolumeClaim | None) -> str:
    """``pvc.name`` when set, else ``<cr name>-pvc`` (NVIDIA's ``GetPVCName``)."""
    if claim is not None and claim.name:
        return claim.name
    return f"{cr_name}-pvc"


def postgres_uri(db: DatabaseConfig, password: str) -> str:
    """``postgresql://<user>:<password>@<host>:<port>/<db>``, as NVIDIA writes it."""
    return f"postgresql://{db.credentials.user}:{password}@{db.host}:{db.port}/{db.database_name}"


def busybox_wait_for_postgres(
    db: DatabaseConfig, pull_policy: str | None, *, final_semicolon: bool = False
) -> Obj:
    """Init container ``wait-for-postgres``: loop on ``nc -z <host> <port>``.

    The text is NVIDIA's: the Entitystore's ends in ``done;``, the Evaluator's
    and Guardrail's in ``done`` (``final_semicolon``).
    """
    script = (
        f'until nc -z {db.host} {db.port}; do echo "Waiting for Postgres to start "; sleep 5; done'
    )
    if final_semicolon:
        script += ";"
    return pod.container(
        WAIT_FOR_POSTGRES,
        "busybox",
        image_pull_policy=pull_policy,
        command=["sh", "-c", script],
    )


def otel_env(otel: OTelSpec | None) -> list[Obj]:
    """OpenTelemetry env when ``otel.enabled``; otherwise only ``OTEL_SDK_DISABLED=true``."""
    if otel is None or not otel.enabled:
        return [pod.env_var("OTEL_SDK_DISABLED", "true")]
    exporters = otel.exporter_config
    env = [
        pod.env_var("OTEL_EXPORTER_OTLP_ENDPOINT", otel.exporter_otlp_endpoint or ""),
        pod.env_var("OTEL_TRACES_EXPORTER", exporters.traces_exporter),
        pod.env_var("OTEL_METRICS_EXPORTER", exporters.metrics_exporter),
        pod.env_var("OTEL_LOGS_EXPORTER", exporters.logs_exporter),
        pod.env_var("OTEL_LOG_LEVEL", otel.log_level),
    ]
    if otel.excluded_urls:
        env.append(pod.env_var("OTEL_PYTHON_EXCLUDED_URLS", ",".join(otel.excluded_urls)))
    logging_on = not bool(otel.disable_logging)
    env.append(
        pod.env_var(
            "OTEL_PYTHON_LOGGING_AUTO_INSTRUMENTATION_ENABLED", "true" if logging_on else "false"
        )
    )
    return env


class NemoRenderer(Generic[CR]):
    """One render pass of a NeMo CR (typed model) with its facts.

    Subclasses set ``part_of`` and ``api_port`` and override the hooks below;
    ``render()`` returns every desired object, each carrying its hash.
    """

    part_of: ClassVar[str]
    api_port: ClassVar[int]
    probe_path: ClassVar[str] = "/v1/health"

    def __init__(self, cr: CR, facts: NemoFacts) -> None:
        self.cr = cr
        self.facts = facts
        meta = getattr(cr, "metadata")  # noqa: B009 - every CustomResource has one
        self.name: str = meta.name or ""
        self.namespace: str = meta.namespace or "default"
        if not self.name:
            raise RenderFailed("metadata.name: Required value")
        self.spec: Any = getattr(cr, "spec")  # noqa: B009
        owner = {
            "apiVersion": getattr(cr, "api_version"),  # noqa: B009
            "kind": getattr(cr, "kind"),  # noqa: B009
            "metadata": {"name": self.name, "uid": meta.uid or ""},
        }
        self.owner_refs = [owner_reference(owner)]
        self.spec_hash = hash_value(plain(self.spec))
        self.labels = merge_maps(
            standard_labels(self.name, self.part_of, facts.operator_version), self.spec.labels
        )
        self.annotations = merge_maps(
            {REQUIRED_SCC_ANNOTATION: "nonroot", PARENT_SPEC_HASH_ANNOTATION: self.spec_hash},
            self.spec.annotations,
        )
        self.service_port: int = int(self.spec.expose.service.port)
        self.pull_policy: str | None = self.spec.image.pull_policy
        self.pull_secrets: list[str] = list(self.spec.image.pull_secrets or [])
        self.image = image_of(self.spec.image.repository, self.spec.image.tag)

    # -- hooks a kind overrides -------------------------------------------------

    def selector(self) -> dict[str, str]:
        """The Deployment's pod selector: ``{app: <name>}`` for every NeMo kind, as NVIDIA's.

        A selector is immutable, so it must be NVIDIA's exactly for a Deployment
        NVIDIA's operator made to be taken over in place.
        """
        return {APP_LABEL: self.name}

    def service_selector(self) -> dict[str, str]:
        """The Service's selector: the kind's ``GetSelectorLabels`` in NVIDIA's operator.

        Pods carry every label of it (``app`` and the standard labels).
        """
        return {NAME_LABEL: self.name}

    def pod_security_context(self) -> Obj:
        """The pod ``securityContext``: ``userID``/``groupID``, defaults 1000 and 2000."""
        user_id = DEFAULT_USER_ID if self.spec.user_id is None else int(self.spec.user_id)
        group_id = DEFAULT_GROUP_ID if self.spec.group_id is None else int(self.spec.group_id)
        return {"runAsUser": user_id, "runAsGroup": group_id, "fsGroup": group_id}

    def container_ports(self) -> list[Obj]:
        return [{"name": API_PORT_NAME, "containerPort": self.api_port, "protocol": "TCP"}]

    def service_ports(self) -> list[Obj]:
        return [service.service_port(API_PORT_NAME, self.service_port, API_PORT_NAME)]

    def standard_env(self) -> list[Obj]:
        """The operator's env of the main container (the user's ``env`` wins over it)."""
        return []

    def init_containers(self) -> list[Obj]:
        return []

    def volumes(self) -> list[Obj]:
        return []

    def volume_mounts(self) -> list[Obj]:
        return []

    def probes(self) -> tuple[Obj, Obj, Obj]:
        """Liveness, readiness and startup probes of the main container."""
        path = self.probe_path
        return (
            pod.http_get_probe(path, API_PORT_NAME, initial_delay_seconds=15),
            pod.http_get_probe(path, API_PORT_NAME, initial_delay_seconds=15),
            pod.http_get_probe(path, API_PORT_NAME, initial_delay_seconds=30, failure_threshold=30),
        )

    def role_rules(self) -> list[Obj]:
        return [role.scc_rule("nonroot")]

    def objects_before_service(self) -> list[Obj]:
        """Objects NVIDIA syncs right after the RBAC objects (Datastore/Guardrail PVCs)."""
        return []

    def objects_before_deployment(self) -> list[Obj]:
        """Objects NVIDIA syncs right before the Deployment (ConfigMap, Secret, PVC)."""
        return []

    def pod_annotations(self) -> dict[str, str]:
        """Pod template annotations: the object annotations without the spec hash."""
        return {k: v for k, v in self.annotations.items() if k != PARENT_SPEC_HASH_ANNOTATION}

    # -- the render ---------------------------------------------------------------

    def render(self) -> list[Obj]:
        objs: list[Obj] = [self.service_account(), self.role(), self.role_binding()]
        objs.extend(self.objects_before_service())
        objs.append(self.service())
        for maybe in (self.ingress(), self.http_route(), self.hpa(), self.service_monitor()):
            if maybe is not None:
                objs.append(maybe)
        objs.extend(self.objects_before_deployment())
        objs.append(self.deployment())
        # Under an HPA the live replica count is kept by controllers.plan's HPA rule.
        return [stamped_copy(o) for o in objs]

    @property
    def autoscaling(self) -> bool:
        return bool(self.spec.scale.enabled)

    def meta(
        self,
        name: str | None = None,
        *,
        labels: Mapping[str, str] | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> Obj:
        return object_meta(
            name or self.name,
            self.namespace,
            labels=self.labels if labels is None else labels,
            annotations=self.annotations if annotations is None else annotations,
            owner_references=self.owner_refs,
        )

    def service_labels(self) -> dict[str, str]:
        return merge_maps(self.labels, self.spec.expose.service.labels)

    def service_account(self) -> Obj:
        return serviceaccount.build(self.meta())

    def role(self) -> Obj:
        return role.build(self.meta(), self.role_rules())

    def role_binding(self) -> Obj:
        return rolebinding.build(
            self.meta(), role_name=self.name, service_account=self.name, namespace=self.namespace
        )

    def service(self) -> Obj:
        svc = self.spec.expose.service
        return service.build(
            self.meta(
                labels=self.service_labels(),
                annotations=merge_maps(self.annotations, svc.annotations),
            ),
            selector=self.service_selector(),
            ports=self.service_ports(),
            service_type=svc.type,
        )

    def _host(self) -> str:
        router = self.spec.expose.router
        domain = (router.host_domain_name if router is not None else None) or ""
        return f"{self.name}.{self.namespace}.{domain}"

    def ingress(self) -> Obj | None:
        router = self.spec.expose.router
        if router is not None and router.ingress is not None and router.ingress.ingress_class:
            spec = ingress.router_spec(
                host=self._host(),
                service_name=self.name,
                service_port=API_PORT_NAME,
                ingress_class=router.ingress.ingress_class,
                tls_secret_name=router.ingress.tls_secret_name,
            )
            annotations = merge_maps(self.annotations, router.annotations)
            return ingress.build(
                self.meta(labels=self.service_labels(), annotations=annotations), spec
            )
        legacy = self.spec.expose.ingress
        if legacy is not None and legacy.enabled and legacy.spec is not None:
            paths = legacy.spec.paths or []
            rule: Obj = {
                "http": {
                    "paths": [
                        {
                            "path": p.path,
                            "pathType": p.path_type,
                            "backend": {
                                "service": {
                                    "name": self.name,
                                    "port": {"number": self.service_port},
                                }
                            },
                        }
                        for p in paths
                    ]
                }
            }
            if legacy.spec.host:
                rule = {"host": legacy.spec.host, **rule}
            spec = {"ingressClassName": legacy.spec.ingress_class_name, "rules": [rule]}
            annotations = merge_maps(self.annotations, legacy.annotations)
            return ingress.build(
                self.meta(labels=self.service_labels(), annotations=annotations), spec
            )
        return None

    def http_route(self) -> Obj | None:
        router = self.spec.expose.router
        gw = router.gateway if router is not None else None
        if gw is None or not gw.http_routes_enabled:
            return None
        if not self.facts.capabilities.has(HTTP_ROUTE):
            return None
        backend = (
            plain(gw.backend_ref)
            if gw.backend_ref is not None
            else httproute.service_backend_ref(self.name, self.service_port)
        )
        return httproute.build(
            self.meta(
                labels=self.service_labels(),
                annotations=merge_maps(self.annotations, router.annotations if router else None),
            ),
            parent_refs=[httproute.parent_ref(gw.name, gw.namespace)],
            hostnames=[self._host()],
            backend_refs=[backend],
        )

    def hpa(self) -> Obj | None:
        if not self.autoscaling:
            return None
        scale = self.spec.scale
        spec = scale.hpa
        return hpa.build(
            self.meta(
                labels=self.service_labels(),
                annotations=merge_maps(self.annotations, scale.annotations),
            ),
            scale_target_ref={"apiVersion": "apps/v1", "kind": "Deployment", "name": self.name},
            min_replicas=int(spec.min_replicas) if spec is not None else 1,
            max_replicas=int(spec.max_replicas) if spec is not None else 1,
            metrics=plain(spec.metrics) if spec is not None and spec.metrics else None,
            behavior=plain(spec.behavior) if spec is not None and spec.behavior else None,
        )

    def service_monitor(self) -> Obj | None:
        metrics = self.spec.metrics
        if not metrics.enabled or not self.facts.capabilities.has(SERVICE_MONITOR):
            return None
        sm = metrics.service_monitor
        labels = {**self.service_labels(), **(sm.additional_labels or {})}
        endpoint: Obj = {"port": API_PORT_NAME}
        if sm.interval:
            endpoint["interval"] = sm.interval
        if sm.scrape_timeout:
            endpoint["scrapeTimeout"] = sm.scrape_timeout
        return servicemonitor.build(
            self.meta(labels=labels, annotations=merge_maps(self.annotations, sm.annotations)),
            selector=self.service_labels(),
            namespace=self.namespace,
            endpoints=[endpoint],
        )

    def created_pvc(self, claim: PersistentVolumeClaim, name: str, where: str) -> Obj:
        """A PVC the operator creates from a ``PersistentVolumeClaim`` spec (``create: true``)."""
        if not claim.size:
            raise RenderFailed(f"{where}.size: Required value when {where}.create is true")
        if not claim.volume_access_mode:
            raise RenderFailed(
                f"{where}.volumeAccessMode: Required value when {where}.create is true"
            )
        meta = object_meta(
            name,
            self.namespace,
            labels=self.labels,
            annotations=claim.annotations,
            owner_references=self.owner_refs,
        )
        return pvc.build(
            meta,
            access_modes=[claim.volume_access_mode],
            size=claim.size,
            storage_class=claim.storage_class or None,
        )

    def main_env(self) -> list[Obj]:
        user = plain(self.spec.env or [])
        return pod.merge_env_vars(self.standard_env(), user)

    def deployment(self) -> Obj:
        liveness, readiness, startup = self.probes()
        ctr = pod.container(
            container_name(self.name),
            self.image,
            image_pull_policy=self.pull_policy,
            command=list(self.spec.command or []) or None,
            args=list(self.spec.args or []) or None,
            env=self.main_env(),
            ports=self.container_ports(),
            resources=plain(self.spec.resources) if self.spec.resources else None,
            volume_mounts=self.volume_mounts() or None,
            liveness_probe=liveness,
            readiness_probe=readiness,
            startup_probe=startup,
        )
        affinity = plain(self.spec.affinity) if self.spec.affinity else None
        spec = pod.pod_spec(
            [ctr],
            init_containers=self.init_containers() or None,
            volumes=self.volumes() or None,
            service_account_name=self.name,
            security_context=self.pod_security_context(),
            image_pull_secrets=self.pull_secrets,
            node_selector=self.spec.node_selector,
            tolerations=plain(self.spec.tolerations) if self.spec.tolerations else None,
            affinity=affinity,
            runtime_class_name=self.spec.runtime_class or None,
        )
        template = pod.pod_template(
            spec,
            labels=merge_maps(self.selector(), self.labels),
            annotations=self.pod_annotations(),
        )
        replicas = None if self.autoscaling else int(self.spec.replicas or 1)
        return deployment.build(
            self.meta(),
            selector=self.selector(),
            template=template,
            replicas=replicas,
            # NVIDIA's: no surge pod, which could not schedule on a one-GPU node.
            strategy=deployment.rolling_update("25%", 0),
        )


def env_names(env: Sequence[Mapping[str, Any]]) -> list[str]:
    """The names of ``env``, in order (for tests and docs)."""
    return [str(e["name"]) for e in env]
