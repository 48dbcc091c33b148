"""The endpoint picker (Gateway API Inference Extension) set of a NIMService (§2.8).

With ``spec.expose.router.eppConfig`` the NIMService gets: SA/Role/RoleBinding
``<name>-epp``, ConfigMap ``<name>-epp-config`` (inline config only), Service
and Deployment ``<name>-epp``, and InferencePool ``<name>`` selecting the NIM
pods. A gateway HTTPRoute whose backendRef is that InferencePool then sends
requests through the picker.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ruamel.yaml import YAML

from api.apps.v1alpha1.common import EPPConfig
from manifests import configmap, deployment, pod, role, rolebinding, service, serviceaccount
from manifests.labels import APP_LABEL, merge_maps
from manifests.meta import object_meta

INFERENCE_POOL_API_VERSION = "inference.networking.k8s.io/v1"
CONFIG_KEY = "default-plugins.yaml"
PORT_EXT_PROC = 9002
PORT_HEALTH = 9003
PORT_METRICS = 9090


@dataclass(frozen=True)
class EPPInputs:
    """What the EPP objects take from the NIMService being rendered."""

    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    pod_annotations: Mapping[str, str]
    pod_labels: Mapping[str, str]
    owner_references: list[dict[str, Any]]
    nim_selector: Mapping[str, str]
    nim_port: int
    config: EPPConfig
    image_pull_secrets: list[str] | None
    image_pull_policy: str | None


def epp_name(name: str) -> str:
    return f"{name}-epp"


def config_map_name(name: str) -> str:
    return f"{name}-epp-config"


def render_epp(inp: EPPInputs) -> list[dict[str, Any]]:
    """SA, Role, RoleBinding, [ConfigMap], Service, Deployment, InferencePool."""
    name = epp_name(inp.name)
    cfg = inp.config

    def meta(obj_name: str, *, annotations: bool = True) -> dict[str, Any]:
        return object_meta(
            obj_name,
            inp.namespace,
            labels=inp.labels,
            annotations=inp.annotations if annotations else None,
            owner_references=inp.owner_references,
        )

    read = ["get", "watch", "list"]
    rules = [
        role.policy_rule(
            ["inference.networking.k8s.io", "inference.networking.x-k8s.io"],
            ["inferencepools", "inferenceobjectives"],
            read,
        ),
        role.policy_rule([""], ["pods"], read),
    ]
    objs = [
        serviceaccount.build(meta(name, annotations=False)),
        role.build(meta(name, annotations=False), rules),
        rolebinding.build(
            meta(name, annotations=False),
            role_name=name,
            service_account=name,
            namespace=inp.namespace,
        ),
    ]
    ref = cfg.config_map_ref or {}
    if ref.get("name"):
        cm_name, config_file = str(ref["name"]), f"/config/{ref.get('key') or CONFIG_KEY}"
    else:
        cm_name, config_file = config_map_name(inp.name), f"/config/{CONFIG_KEY}"
        objs.append(configmap.build(meta(cm_name), {CONFIG_KEY: _yaml(cfg.config or {})}))

    user_ports = cfg.ports or []
    if user_ports:
        container_ports = [dict(p) for p in user_ports]
    else:
        container_ports = [
            {"name": "grpc-ext-proc", "containerPort": PORT_EXT_PROC, "protocol": "TCP"},
            {"name": "grpc-health", "containerPort": PORT_HEALTH, "protocol": "TCP"},
            {"name": "http-metrics", "containerPort": PORT_METRICS, "protocol": "TCP"},
        ]
    service_ports = (
        [
            service.service_port(
                str(p.get("name") or f"port-{p['containerPort']}"), p["containerPort"]
            )
            for p in user_ports
        ]
        if user_ports
        else [
            service.service_port("grpc-ext-proc", PORT_EXT_PROC),
            service.service_port("http-metrics", PORT_METRICS),
        ]
    )
    selector = {APP_LABEL: name}
    objs.append(
        service.build(meta(name), selector=selector, ports=service_ports, service_type="ClusterIP")
    )

    ctr_spec = cfg.container_spec
    image = ctr_spec.image
    default_probe = {"grpc": {"port": PORT_HEALTH}, "initialDelaySeconds": 5, "periodSeconds": 10}
    args = ctr_spec.args or [
        "--pool-name",
        inp.name,
        "--pool-namespace",
        inp.namespace,
        "--pool-group",
        "inference.networking.k8s.io",
        "--zap-encoder",
        "json",
        "--config-file",
        config_file,
        "--v",
        "6",
        "--model-server-metrics-path",
        "/v1/metrics",
    ]
    container = pod.container(
        "epp",
        f"{image.repository}:{image.tag or 'latest'}",
        image_pull_policy=image.pull_policy or inp.image_pull_policy,
        command=ctr_spec.command,
        args=list(args),
        working_dir=ctr_spec.working_dir,
        env=ctr_spec.env,
        ports=container_ports,
        volume_mounts=[pod.volume_mount("epp-config", "/config", read_only=True)],
        readiness_probe=cfg.readiness_probe or dict(default_probe),
        liveness_probe=cfg.liveness_probe or dict(default_probe),
        startup_probe=cfg.startup_probe,
    )
    pull_secrets = [*(inp.image_pull_secrets or []), *(image.pull_secrets or [])]
    pod_spec = pod.pod_spec(
        [container],
        volumes=[pod.config_map_volume("epp-config", cm_name)],
        service_account_name=name,
        image_pull_secrets=list(dict.fromkeys(pull_secrets)),
    )
    objs.append(
        deployment.build(
            meta(name),
            selector=selector,
            template=pod.pod_template(
                pod_spec,
                labels=merge_maps(selector, inp.pod_labels),
                annotations=inp.pod_annotations,
            ),
            replicas=1,
        )
    )
    objs.append(
        {
            "apiVersion": INFERENCE_POOL_API_VERSION,
            "kind": "InferencePool",
            "metadata": meta(inp.name),
            "spec": {
                "selector": {"matchLabels": dict(inp.nim_selector)},
                "targetPorts": [{"number": inp.nim_port}],
                "endpointPickerRef": {"name": name, "port": {"number": PORT_EXT_PROC}},
            },
        }
    )
    return objs


def _yaml(value: Mapping[str, Any]) -> str:
    out = io.StringIO()
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.dump(dict(value), out)
    return out.getvalue()
