"""Pod, pod template, container, env and volume builders (core/v1).

``merge_env_vars`` implements the precedence rule used throughout NIM
rendering: on a name clash the override wins, and the result lists the
override's variables first, then the base variables it did not replace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def env_var(name: str, value: str) -> dict[str, Any]:
    """A literal EnvVar."""
    return {"name": name, "value": value}


def secret_env_var(name: str, secret: str, key: str, *, optional: bool = False) -> dict[str, Any]:
    """An EnvVar read from a Secret key."""
    ref: dict[str, Any] = {"name": secret, "key": key}
    if optional:
        ref["optional"] = True
    return {"name": name, "valueFrom": {"secretKeyRef": ref}}


def field_env_var(name: str, field_path: str) -> dict[str, Any]:
    """An EnvVar read from the pod's own fields (downward API)."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field_path}}}


def merge_env_vars(
    base: Iterable[Mapping[str, Any]], override: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """``override`` wins on a name clash; its variables come first, then the rest of ``base``."""
    out = [dict(e) for e in override]
    seen = {e["name"] for e in out}
    out.extend(dict(e) for e in base if e["name"] not in seen)
    return out


def add_env_defaults(
    env: Iterable[Mapping[str, Any]], defaults: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Append each of ``defaults`` whose name ``env`` does not already have (existing wins)."""
    out = [dict(e) for e in env]
    seen = {e["name"] for e in out}
    for d in defaults:
        if d["name"] not in seen:
            out.append(dict(d))
            seen.add(d["name"])
    return out


def remove_env(env: Iterable[Mapping[str, Any]], *names: str) -> list[dict[str, Any]]:
    """``env`` without the variables called ``names``."""
    drop = set(names)
    return [dict(e) for e in env if e["name"] not in drop]


def volume_mount(
    name: str, mount_path: str, *, sub_path: str | None = None, read_only: bool | None = None
) -> dict[str, Any]:
    """A VolumeMount with only the fields that have a value."""
    m: dict[str, Any] = {"name": name, "mountPath": mount_path}
    if sub_path:
        m["subPath"] = sub_path
    if read_only:
        m["readOnly"] = True
    return m


def empty_dir_volume(
    name: str, *, medium: str | None = None, size_limit: str | None = None
) -> dict[str, Any]:
    """An emptyDir volume."""
    src: dict[str, Any] = {}
    if medium:
        src["medium"] = medium
    if size_limit:
        src["sizeLimit"] = size_limit
    return {"name": name, "emptyDir": src}


def pvc_volume(name: str, claim_name: str, *, read_only: bool = False) -> dict[str, Any]:
    """A persistentVolumeClaim volume."""
    src: dict[str, Any] = {"claimName": claim_name}
    if read_only:
        src["readOnly"] = True
    return {"name": name, "persistentVolumeClaim": src}


def host_path_volume(name: str, path: str, path_type: str = "DirectoryOrCreate") -> dict[str, Any]:
    """A hostPath volume."""
    return {"name": name, "hostPath": {"path": path, "type": path_type}}


def config_map_volume(
    name: str, config_map: str, *, default_mode: int | None = None
) -> dict[str, Any]:
    """A configMap volume."""
    src: dict[str, Any] = {"name": config_map}
    if default_mode is not None:
        src["defaultMode"] = default_mode
    return {"name": name, "configMap": src}


def http_get_probe(
    path: str,
    port: int | str,
    *,
    initial_delay_seconds: int,
    timeout_seconds: int = 1,
    period_seconds: int = 10,
    success_threshold: int = 1,
    failure_threshold: int = 3,
) -> dict[str, Any]:
    """An HTTP GET probe."""
    return {
        "httpGet": {"path": path, "port": port},
        "initialDelaySeconds": initial_delay_seconds,
        "timeoutSeconds": timeout_seconds,
        "periodSeconds": period_seconds,
        "successThreshold": success_threshold,
        "failureThreshold": failure_threshold,
    }


def container(
    name: str,
    image: str,
    *,
    image_pull_policy: str | None = None,
    command: list[str] | None = None,
    args: list[str] | None = None,
    working_dir: str | None = None,
    env: list[dict[str, Any]] | None = None,
    env_from: list[dict[str, Any]] | None = None,
    ports: list[dict[str, Any]] | None = None,
    resources: dict[str, Any] | None = None,
    volume_mounts: list[dict[str, Any]] | None = None,
    liveness_probe: dict[str, Any] | None = None,
    readiness_probe: dict[str, Any] | None = None,
    startup_probe: dict[str, Any] | None = None,
    security_context: dict[str, Any] | None = None,
    termination_message_path: str | None = None,
    termination_message_policy: str | None = None,
) -> dict[str, Any]:
    """A Container with only the fields that have a value."""
    c: dict[str, Any] = {"name": name, "image": image}
    optional: dict[str, Any] = {
        "imagePullPolicy": image_pull_policy,
        "command": command,
        "args": args,
        "workingDir": working_dir,
        "env": env,
        "envFrom": env_from,
        "ports": ports,
        "resources": resources,
        "volumeMounts": volume_mounts,
        "livenessProbe": liveness_probe,
        "readinessProbe": readiness_probe,
        "startupProbe": startup_probe,
        "securityContext": security_context,
        "terminationMessagePath": termination_message_path,
        "terminationMessagePolicy": termination_message_policy,
    }
    c.update({k: v for k, v in optional.items() if v})
    return c


def pod_spec(
    containers: list[dict[str, Any]],
    *,
    init_containers: list[dict[str, Any]] | None = None,
    volumes: list[dict[str, Any]] | None = None,
    service_account_name: str | None = None,
    security_context: dict[str, Any] | None = None,
    image_pull_secrets: list[str] | None = None,
    node_selector: Mapping[str, str] | None = None,
    tolerations: list[dict[str, Any]] | None = None,
    affinity: dict[str, Any] | None = None,
    scheduler_name: str | None = None,
    priority_class_name: str | None = None,
    runtime_class_name: str | None = None,
    restart_policy: str | None = None,
    resource_claims: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A PodSpec with only the fields that have a value."""
    spec: dict[str, Any] = {"containers": containers}
    optional: dict[str, Any] = {
        "initContainers": init_containers,
        "volumes": volumes,
        "serviceAccountName": service_account_name,
        "securityContext": security_context,
        "imagePullSecrets": [{"name": s} for s in image_pull_secrets or []],
        "nodeSelector": dict(node_selector or {}),
        "tolerations": tolerations,
        "affinity": affinity,
        "schedulerName": scheduler_name,
        "priorityClassName": priority_class_name,
        "runtimeClassName": runtime_class_name,
        "restartPolicy": restart_policy,
        "resourceClaims": resource_claims,
    }
    spec.update({k: v for k, v in optional.items() if v})
    return spec


def pod_template(
    spec: dict[str, Any],
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A PodTemplateSpec."""
    meta: dict[str, Any] = {}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"metadata": meta, "spec": spec}


def build(meta: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    """A bare Pod."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
