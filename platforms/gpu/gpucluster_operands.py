"""States ``state-dcgm``, ``state-dcgm-exporter`` and ``state-dra-validation`` of a
GPUCluster (gpucluster.md §4.2-4.4). Each pod holds an admin-access claim on the
node's GPUs from its own ResourceClaimTemplate instead of a device-plugin resource.

- ``state-dcgm`` (only ``dcgm.enabled: true``): the host engine DaemonSet
  ``nvidia-dcgm-dra`` and its node-local Service on 5555;
- ``state-dcgm-exporter`` (the block given and not ``enabled: false``): the
  exporter DaemonSet ``nvidia-dcgm-exporter-dra``, its Service on 9400 and, when
  enabled and served, a ServiceMonitor; it talks to ``nvidia-dcgm-dra:5555``
  when standalone DCGM runs;
- ``state-dra-validation`` (always): the validator DaemonSet
  ``nvidia-dra-validator``, whose init container runs ``nvidia-smi -L`` on one
  GPU allocated through DRA.
"""

from __future__ import annotations

from typing import Any, Final

from api.base import to_kubernetes
from api.nvidia.v1.clusterpolicy import ResourceRequirements
from api.nvidia.v1alpha1.gpucluster import GPUCluster
from platforms.gpu.common import env, field_env, host_path, mount
from platforms.gpu.gpucluster_common import (
    GPUClusterFacts,
    admin_claim_template,
    dra_api_version,
    env_list,
    image_of,
    object_meta,
    pod_meta,
    pull_secrets,
    tolerations,
)
from platforms.gpu.gpucluster_rbac import binding, role, rule, service_account

__all__ = [
    "DCGM",
    "DCGM_EXPORTER",
    "DCGM_STATE",
    "EXPORTER_STATE",
    "VALIDATION_STATE",
    "VALIDATOR",
    "build_dcgm",
    "build_exporter",
    "build_validation",
]

DCGM_STATE: Final = "state-dcgm"
EXPORTER_STATE: Final = "state-dcgm-exporter"
VALIDATION_STATE: Final = "state-dra-validation"
DCGM: Final = "nvidia-dcgm-dra"
DCGM_EXPORTER: Final = "nvidia-dcgm-exporter-dra"
VALIDATOR: Final = "nvidia-dra-validator"
DCGM_PORT: Final = 5555
EXPORTER_PORT: Final = 9400
ADMIN_REQUEST: Final = "admin-gpus"
READ: Final = ("get", "list", "watch")
DEFAULT_COLLECTORS: Final = "/etc/dcgm-exporter/dcp-metrics-included.csv"
CUSTOM_COLLECTORS: Final = "/etc/dcgm-exporter/dcgm-metrics.csv"
DEFAULT_JOB_MAPPING_DIR: Final = "/var/lib/dcgm-exporter/job-mapping"


def _claim_resources(resources: ResourceRequirements | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if resources is not None:
        plain = to_kubernetes(resources)
        for part in ("limits", "requests"):
            if plain.get(part):
                out[part] = plain[part]
    out["claims"] = [{"name": ADMIN_REQUEST}]
    return out


def _daemonset(
    cr: GPUCluster,
    facts: GPUClusterFacts,
    name: str,
    pod: dict[str, Any],
    *,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    labels = {"app": name}
    ds_spec = cr.spec.daemonsets
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": object_meta(name, facts.operator_namespace, labels, ds_spec),
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": pod_meta(labels, ds_spec, annotations), "spec": pod},
        },
    }


def _service(
    name: str, namespace: str, port_name: str, port: int, *, spec: dict[str, Any],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, "namespace": namespace, "labels": {"app": name}}
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            **spec,
            "selector": {"app": name},
            "ports": [{"name": port_name, "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def build_dcgm(cr: GPUCluster, facts: GPUClusterFacts) -> list[dict[str, Any]]:
    """The standalone host engine, or nothing when ``dcgm.enabled`` is not true."""
    if not cr.spec.dcgm_enabled() or cr.spec.dcgm is None:
        return []
    api_version = dra_api_version(facts)
    spec = cr.spec.dcgm
    image = image_of(spec, "DCGM_IMAGE", facts.operator_env, "dcgm")
    ns = facts.operator_namespace
    probe = {"tcpSocket": {"port": DCGM_PORT}, "initialDelaySeconds": 15}
    container: dict[str, Any] = {"name": "nvidia-dcgm-ctr", "image": image}
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    if spec.args:
        container["args"] = list(spec.args)
    if spec.env:
        container["env"] = env_list(spec.env)
    container.update(
        securityContext={"privileged": True},
        ports=[{"name": "dcgm", "containerPort": DCGM_PORT}],
        livenessProbe=dict(probe),
        readinessProbe=dict(probe),
        resources=_claim_resources(spec.resources),
    )
    pod: dict[str, Any] = {
        "priorityClassName": "system-node-critical",
        "serviceAccountName": DCGM,
        "nodeSelector": {"nvidia.com/gpu.deploy.dcgm-dra": "true"},
    }
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = pull_secrets(spec.image_pull_secrets)
    if spec.host_network:
        pod.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    if cr.spec.daemonsets.tolerations:
        pod["tolerations"] = tolerations(cr.spec.daemonsets)
    pod["resourceClaims"] = [
        {"name": ADMIN_REQUEST, "resourceClaimTemplateName": "nvidia-dcgm-admin"}
    ]
    pod["containers"] = [container]
    return [
        service_account(DCGM, ns),
        role(DCGM, [rule(["resource.k8s.io"], ["resourceclaims"], READ)], ns),
        binding(DCGM, DCGM, ns, ns),
        admin_claim_template("nvidia-dcgm-admin", ns, ADMIN_REQUEST, api_version),
        _daemonset(cr, facts, DCGM, pod),
        _service(
            DCGM,
            ns,
            "dcgm",
            DCGM_PORT,
            spec={"type": "ClusterIP", "internalTrafficPolicy": "Local"},
        ),
    ]


def build_exporter(cr: GPUCluster, facts: GPUClusterFacts) -> list[dict[str, Any]]:
    """The exporter, or nothing when the block is absent or ``enabled: false``."""
    spec = cr.spec.dcgm_exporter
    if spec is None or not cr.spec.dcgm_exporter_enabled():
        return []
    api_version = dra_api_version(facts)
    image = image_of(spec, "DCGM_EXPORTER_IMAGE", facts.operator_env, "dcgmExporter")
    ns = facts.operator_namespace
    metrics_config = spec.config.name if spec.config is not None and spec.config.name else ""
    job_dir = ""
    if spec.hpc_job_mapping is not None and spec.hpc_job_mapping.enabled:
        job_dir = spec.hpc_job_mapping.directory or DEFAULT_JOB_MAPPING_DIR
    kubelet = cr.spec.host_paths.kubelet_root_dir or "/var/lib/kubelet"
    env_vars = [
        env("DCGM_EXPORTER_LISTEN", f":{EXPORTER_PORT}"),
        env("DCGM_EXPORTER_KUBERNETES", "true"),
        env(
            "DCGM_EXPORTER_COLLECTORS", CUSTOM_COLLECTORS if metrics_config else DEFAULT_COLLECTORS
        ),
        field_env("NODE_NAME", "spec.nodeName"),
    ]
    if cr.spec.dcgm_enabled():
        env_vars.append(env("DCGM_REMOTE_HOSTENGINE_INFO", f"{DCGM}:{DCGM_PORT}"))
    if job_dir:
        env_vars.append(env("DCGM_HPC_JOB_MAPPING_DIR", job_dir))
    env_vars.append(env("KUBERNETES_ENABLE_DRA", "true"))
    if spec.enable_pod_labels:
        env_vars.append(env("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS", "true"))
    if spec.enable_pod_uid:
        env_vars.append(env("DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID", "true"))
    if spec.pod_label_allowlist_regex:
        env_vars.append(
            env(
                "DCGM_EXPORTER_KUBERNETES_POD_LABEL_ALLOWLIST_REGEX",
                ",".join(spec.pod_label_allowlist_regex),
            )
        )
    env_vars += env_list(spec.env)
    mounts = [mount("pod-gpu-resources", f"{kubelet}/pod-resources", read_only=True)]
    volumes = [host_path("pod-gpu-resources", f"{kubelet}/pod-resources")]
    if metrics_config:
        mounts.append(
            mount("metrics-config", CUSTOM_COLLECTORS, read_only=True, sub_path="dcgm-metrics.csv")
        )
        volumes.append(
            {
                "name": "metrics-config",
                "configMap": {
                    "name": metrics_config,
                    "items": [{"key": "dcgm-metrics.csv", "path": "dcgm-metrics.csv"}],
                },
            }
        )
    if job_dir:
        mounts.append(mount("hpc-job-mapping", job_dir, read_only=True))
        volumes.append(host_path("hpc-job-mapping", job_dir, "DirectoryOrCreate"))
    health = {"httpGet": {"path": "/health", "port": EXPORTER_PORT}, "initialDelaySeconds": 45}
    container: dict[str, Any] = {"name": DCGM_EXPORTER, "image": image}
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    if spec.args:
        container["args"] = list(spec.args)
    container.update(
        env=env_vars,
        securityContext={"privileged": True},
        ports=[{"name": "metrics", "containerPort": EXPORTER_PORT}],
        livenessProbe={**health, "periodSeconds": 5},
        readinessProbe=dict(health),
        resources=_claim_resources(spec.resources),
        volumeMounts=mounts,
    )
    pod: dict[str, Any] = {
        "priorityClassName": "system-node-critical",
        "serviceAccountName": DCGM_EXPORTER,
        "automountServiceAccountToken": True,
        "nodeSelector": {"nvidia.com/gpu.deploy.dcgm-exporter-dra": "true"},
    }
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = pull_secrets(spec.image_pull_secrets)
    if spec.host_pid:
        pod["hostPID"] = True
    if spec.host_network:
        pod.update(hostNetwork=True, dnsPolicy="ClusterFirstWithHostNet")
    if cr.spec.daemonsets.tolerations:
        pod["tolerations"] = tolerations(cr.spec.daemonsets)
    pod["resourceClaims"] = [
        {"name": ADMIN_REQUEST, "resourceClaimTemplateName": "nvidia-dcgm-exporter-admin"}
    ]
    pod["containers"] = [container]
    pod["volumes"] = volumes
    read_pods = f"{DCGM_EXPORTER}-read-pods"
    app = {"app": DCGM_EXPORTER}
    service_spec: dict[str, Any] = {"type": "ClusterIP"}
    if spec.service is not None:
        if spec.service.type:
            service_spec["type"] = spec.service.type
        if spec.service.internal_traffic_policy:
            service_spec["internalTrafficPolicy"] = spec.service.internal_traffic_policy
    out = [
        service_account(DCGM_EXPORTER, ns),
        role(
            DCGM_EXPORTER,
            [
                rule(["resource.k8s.io"], ["resourceclaims"], READ),
                rule([""], ["configmaps"], ["get", "list"]),
            ],
            ns,
        ),
        role(
            read_pods,
            [rule([""], ["pods"], READ), rule(["resource.k8s.io"], ["resourceslices"], READ)],
            labels=app,
        ),
        binding(DCGM_EXPORTER, DCGM_EXPORTER, ns, ns),
        binding(read_pods, DCGM_EXPORTER, ns, labels=app),
        admin_claim_template("nvidia-dcgm-exporter-admin", ns, ADMIN_REQUEST, api_version),
        _service(
            DCGM_EXPORTER, ns, "gpu-metrics", EXPORTER_PORT, spec=service_spec,
            annotations={"prometheus.io/scrape": "true"},
        ),
    ]  # fmt: skip
    monitor = spec.service_monitor
    if monitor is not None and monitor.enabled and facts.service_monitor:
        out.append(_service_monitor(cr, ns))
    out.append(_daemonset(cr, facts, DCGM_EXPORTER, pod, annotations=spec.annotations))
    return out


def _service_monitor(cr: GPUCluster, ns: str) -> dict[str, Any]:
    spec = cr.spec.dcgm_exporter
    monitor = spec.service_monitor if spec is not None else None
    assert monitor is not None
    endpoint: dict[str, Any] = {
        "port": "gpu-metrics",
        "path": "/metrics",
        "honorLabels": bool(monitor.honor_labels),
    }
    if monitor.interval:
        endpoint["interval"] = monitor.interval
    if monitor.scrape_timeout:
        endpoint["scrapeTimeout"] = monitor.scrape_timeout
    if monitor.relabelings:
        endpoint["relabelings"] = [to_kubernetes(r) for r in monitor.relabelings]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {
            "name": DCGM_EXPORTER,
            "namespace": ns,
            "labels": {"app": DCGM_EXPORTER, **(monitor.additional_labels or {})},
        },
        "spec": {
            "jobLabel": "app",
            "namespaceSelector": {"matchNames": [ns]},
            "selector": {"matchLabels": {"app": DCGM_EXPORTER}},
            "endpoints": [endpoint],
        },
    }


def build_validation(cr: GPUCluster, facts: GPUClusterFacts) -> list[dict[str, Any]]:
    """The DRA validator (always)."""
    api_version = dra_api_version(facts)
    spec = cr.spec.dra_driver
    image = image_of(None, "VALIDATOR_IMAGE", facts.operator_env, "draDriver")
    ns = facts.operator_namespace
    ds_spec = cr.spec.daemonsets
    names = {"app.kubernetes.io/name": VALIDATOR, "app.kubernetes.io/component": VALIDATOR}
    pull = {"imagePullPolicy": spec.image_pull_policy} if spec.image_pull_policy else {}
    init = {
        "name": "gpu-validation",
        "image": image,
        **pull,
        "command": ["sh", "-c", "nvidia-smi -L"],
        "resources": {"claims": [{"name": "validation-gpu"}]},
    }
    main = {
        "name": VALIDATOR,
        "image": image,
        **pull,
        "command": [
            "sh",
            "-c",
            "echo all validations are successful; while true; do sleep 86400; done",
        ],
    }
    pod: dict[str, Any] = {
        "priorityClassName": "system-node-critical",
        "serviceAccountName": VALIDATOR,
        "nodeSelector": {"nvidia.com/gpu.deploy.dra-validator": "true"},
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "nvidia.com/gpu.present",
                                    "operator": "In",
                                    "values": ["true"],
                                }
                            ]
                        }
                    ]
                }
            }
        },
    }
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = pull_secrets(spec.image_pull_secrets)
    if ds_spec.tolerations:
        pod["tolerations"] = tolerations(ds_spec)
    pod["resourceClaims"] = [
        {"name": "validation-gpu", "resourceClaimTemplateName": "nvidia-dra-validator-gpu"}
    ]
    pod["initContainers"] = [init]
    pod["containers"] = [main]
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": object_meta(VALIDATOR, ns, {**names, "app": VALIDATOR}, ds_spec),
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": VALIDATOR}},
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "100%"},
            },
            "template": {
                "metadata": pod_meta({**names, "app": "nvidia-operator-validator"}, ds_spec),
                "spec": pod,
            },
        },
    }
    return [
        service_account(VALIDATOR, ns, names),
        admin_claim_template(
            "nvidia-dra-validator-gpu", ns, "validation-gpu", api_version, count=1
        ),
        ds,
    ]
