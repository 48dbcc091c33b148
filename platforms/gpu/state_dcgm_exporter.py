"""State ``state-dcgm-exporter``: DCGM exporter (GPU metrics on port 9400), its
Service ``nvidia-dcgm-exporter``, a ServiceMonitor when asked for and served,
and a ClusterRole to read pods when metrics are enriched with pod labels or UIDs.
"""

from __future__ import annotations

from typing import Any

from manifests import service
from manifests.meta import object_meta
from platforms.gpu import transforms as t
from platforms.gpu.common import (
    PRIV,
    container,
    daemonset,
    env,
    field_env,
    host_path,
    mount,
    policy_rule,
    rbac,
    scc_privileged,
    wait_for_file,
)
from platforms.gpu.context import StateContext
from platforms.gpu.facts import SERVICE_MONITOR
from platforms.gpu.images import image_path
from platforms.gpu.monitoring import SCRAPE, service_monitor
from platforms.gpu.state_dcgm import NAME as DCGM_NAME
from platforms.gpu.state_dcgm import PORT as DCGM_PORT

NAME = "nvidia-dcgm-exporter"
READ_PODS = "nvidia-dcgm-exporter-read-pods"
PORT = 9400
DEFAULT_JOB_MAPPING_DIR = "/var/lib/dcgm-exporter/job-mapping"
DEFAULT_KUBELET_ROOT = "/var/lib/kubelet"
POD_LABELS_ENV = "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"
POD_UID_ENV = "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID"
CONFIGMAP_DATA_ENV = "DCGM_EXPORTER_CONFIGMAP_DATA"
REMOTE_HOSTENGINE_ENV = "DCGM_REMOTE_HOSTENGINE_INFO"


def _env_true(ctx: StateContext, name: str) -> bool:
    return any(
        e.name == name and (e.value or "").lower() == "true"
        for e in ctx.spec.dcgm_exporter.env or ()
    )


def pod_enrichment(ctx: StateContext) -> tuple[bool, bool]:
    """(pod labels, pod UID): from the fields or from the exporter's env."""
    exporter = ctx.spec.dcgm_exporter
    labels = bool(exporter.enable_pod_labels) or _env_true(ctx, POD_LABELS_ENV)
    uid = bool(exporter.enable_pod_uid) or _env_true(ctx, POD_UID_ENV)
    return labels, uid


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """Role, read-pods ClusterRole (when enriching), Service, ServiceMonitor, DaemonSet."""
    pod_labels, pod_uid = pod_enrichment(ctx)
    # NVIDIA labels all of this state's RBAC; the read-pods ClusterRole is made only
    # while metrics are enriched with pod labels or UIDs.
    out = rbac(
        ctx,
        NAME,
        [scc_privileged(), policy_rule([""], ["configmaps"], ["get", "list"])],
        [policy_rule([""], ["pods"], ["get", "list", "watch"])] if pod_labels or pod_uid else None,
        labels={"app": NAME},
        cluster_labels={"app": NAME},
        cluster_name=READ_PODS,
    )
    exporter = ctx.spec.dcgm_exporter
    svc = service.build(
        object_meta(NAME, labels={"app": NAME}, annotations=SCRAPE),
        selector={"app": NAME},
        ports=[service.service_port("gpu-metrics", PORT)],
        service_type=exporter.service.type if exporter.service else None,
    )
    if exporter.service and exporter.service.internal_traffic_policy:
        svc["spec"]["internalTrafficPolicy"] = exporter.service.internal_traffic_policy
    out.append(svc)
    monitor = exporter.service_monitor
    if monitor is not None and monitor.enabled and ctx.facts.serves(SERVICE_MONITOR):
        out.append(
            service_monitor(
                NAME,
                namespace=ctx.namespace,
                port="gpu-metrics",
                job_label="app",
                selector={"app": NAME},
                settings=monitor,
            )
        )
    ds = t.prepare(_asset(ctx), ctx)
    transform(ds, ctx, pod_labels=pod_labels, pod_uid=pod_uid)
    out.append(t.finish(ds, ctx))
    return out


def _asset(ctx: StateContext) -> dict[str, Any]:
    probe = {"httpGet": {"path": "/health", "port": PORT}, "initialDelaySeconds": 45}
    main = container(
        NAME,
        security_context=PRIV,
        env_vars=[
            env("DCGM_EXPORTER_LISTEN", f":{PORT}"),
            env("DCGM_EXPORTER_KUBERNETES", "true"),
            env("DCGM_EXPORTER_COLLECTORS", "/etc/dcgm-exporter/dcp-metrics-included.csv"),
            field_env("NODE_NAME", "spec.nodeName"),
        ],
        ports=[{"name": "metrics", "containerPort": PORT, "protocol": "TCP"}],
        livenessProbe={**probe, "periodSeconds": 5},
        readinessProbe=dict(probe),
        mounts=[mount("pod-gpu-resources", "/var/lib/kubelet/pod-resources", read_only=True)],
    )
    kubelet = ctx.spec.host_paths.kubelet_root_dir or DEFAULT_KUBELET_ROOT
    return daemonset(
        NAME,
        component="dcgm-exporter",
        annotations={"openshift.io/scc": NAME},
        service_account=NAME,
        automountServiceAccountToken=False,
        init_containers=[wait_for_file("toolkit-validation", "toolkit-ready")],
        containers=[main],
        volumes=[
            host_path("pod-gpu-resources", f"{kubelet.rstrip('/')}/pod-resources"),
            host_path("run-nvidia", "/run/nvidia"),
        ],
    )


def transform(ds: dict[str, Any], ctx: StateContext, *, pod_labels: bool, pod_uid: bool) -> None:
    """NVIDIA's ``TransformDCGMExporter``, in its order; ``dcgmExporter.env`` last."""
    exporter = ctx.spec.dcgm_exporter
    image = image_path(exporter, ctx.facts.operator_env, "dcgmExporter")
    c = t.apply_component(ds, exporter, image=image, main=NAME, user_env=False)
    for key, value in {**(exporter.annotations or {}), **(exporter.pod_annotations or {})}.items():
        t.set_pod_annotation(ds, key, value)
    if exporter.pod_labels:
        # Extra pod labels never replace the selector's.
        template_labels = ds["spec"]["template"]["metadata"]["labels"]
        ds["spec"]["template"]["metadata"]["labels"] = {**exporter.pod_labels, **template_labels}
    if ctx.spec.dcgm.is_enabled():
        t.set_env(c, REMOTE_HOSTENGINE_ENV, f"{DCGM_NAME}:{DCGM_PORT}")
    else:
        remote = t.get_env(c, REMOTE_HOSTENGINE_ENV) or _user_env(ctx, REMOTE_HOSTENGINE_ENV) or ""
        if remote.startswith("localhost"):
            t.apply_host_network(ds, True)
    t.apply_nri_annotation(ds, ctx, NAME)
    t.apply_runtime_class(ds, ctx)
    if exporter.host_pid:
        t.pod_spec(ds)["hostPID"] = True
    mapping = exporter.hpc_job_mapping
    if mapping is not None and mapping.enabled:
        directory = mapping.directory or DEFAULT_JOB_MAPPING_DIR
        t.set_env(c, "DCGM_HPC_JOB_MAPPING_DIR", directory)
        c["volumeMounts"].append(mount("hpc-job-mapping", directory, read_only=True))
        t.pod_spec(ds)["volumes"].append(
            host_path("hpc-job-mapping", directory, "DirectoryOrCreate")
        )
    if pod_labels:
        t.set_env(c, POD_LABELS_ENV, "true")
    if pod_uid:
        t.set_env(c, POD_UID_ENV, "true")
    if exporter.pod_label_allowlist_regex:
        t.set_env(
            c,
            "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX",
            ",".join(exporter.pod_label_allowlist_regex),
        )
    configmap_data = _user_env(ctx, CONFIGMAP_DATA_ENV) or ""
    if pod_labels or pod_uid or configmap_data not in {"", "none"}:
        t.pod_spec(ds)["automountServiceAccountToken"] = True
    if exporter.config is not None and exporter.config.name:
        csv = "dcgm-metrics.csv"
        t.pod_spec(ds)["volumes"].append(
            {
                "name": "metrics-config",
                "configMap": {"name": exporter.config.name, "items": [{"key": csv, "path": csv}]},
            }
        )
        c["volumeMounts"].append(
            mount("metrics-config", f"/etc/dcgm-exporter/{csv}", read_only=True, sub_path=csv)
        )
        t.set_env(c, "DCGM_EXPORTER_COLLECTORS", f"/etc/dcgm-exporter/{csv}")
    t.set_user_env(c, exporter.env)


def _user_env(ctx: StateContext, name: str) -> str | None:
    for e in ctx.spec.dcgm_exporter.env or ():
        if e.name == name:
            return e.value or ""
    return None
