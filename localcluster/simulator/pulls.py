"""What the kubelet needs to decide before a container starts: image pulls and env sources.

Pure functions over objects the engine looked up:

* :func:`pull_secret_names`: the pod's ``imagePullSecrets`` plus its service
  account's, as the kubelet uses them;
* :func:`credential_hosts`: the registry hosts the existing pull secrets of the
  right type (``kubernetes.io/dockerconfigjson`` or ``dockercfg``) hold
  credentials for; an Opaque secret carries none, as for a real kubelet;
* :func:`config_problem`: the ``CreateContainerConfigError`` message for env and
  envFrom that name a missing Secret/ConfigMap or key (``secret "ngc-api" not
  found``, ``couldn't find key NGC_API_KEY in Secret nim/ngc-api``);
* :func:`mount_problem`: the ``FailedMount`` message for a volume whose Secret or
  ConfigMap does not exist (the pod stays ``ContainerCreating``).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Iterable

from nimctl_runtime.meta import ObjView

Lookup = Callable[[str, str], ObjView | None]  # (kind, name) -> object in the pod's namespace

DOCKER_CONFIG_TYPES = {
    "kubernetes.io/dockerconfigjson": ".dockerconfigjson",
    "kubernetes.io/dockercfg": ".dockercfg",
}


def pull_secret_names(pod: ObjView, service_account: ObjView | None) -> list[str]:
    names: list[str] = []
    for source in ((pod.get("spec") or {}), (service_account or {})):
        for ref in source.get("imagePullSecrets") or []:
            name = str((ref or {}).get("name") or "")
            if name and name not in names:
                names.append(name)
    return names


def _host(key: str) -> str:
    """``https://nvcr.io/v2/`` -> ``nvcr.io``; Docker Hub's legacy key -> ``docker.io``."""
    host = key.split("://", 1)[-1].split("/", 1)[0]
    return "docker.io" if host in ("index.docker.io", "registry-1.docker.io") else host


def credential_hosts(secrets: Iterable[ObjView]) -> set[str]:
    """Registry hosts the pull secrets hold credentials for."""
    hosts: set[str] = set()
    for secret in secrets:
        key = DOCKER_CONFIG_TYPES.get(str(secret.get("type") or ""))
        raw = (secret.get("data") or {}).get(key) if key else None
        if not raw:
            continue
        try:
            config = json.loads(base64.b64decode(str(raw)))
        except (binascii.Error, ValueError):
            continue
        if not isinstance(config, dict):
            continue
        auths = config.get("auths", config) if key == ".dockerconfigjson" else config
        if isinstance(auths, dict):
            hosts.update(_host(str(k)) for k, v in auths.items() if isinstance(v, dict) and v)
    return hosts


def mount_problem(pod: ObjView, lookup: Lookup) -> str | None:
    """The kubelet's FailedMount message for a volume whose Secret or ConfigMap is missing."""
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        for source, key, kind, label in (
            ("secret", "secretName", "Secret", "secret"),
            ("configMap", "name", "ConfigMap", "configmap"),
        ):
            ref = volume.get(source)
            if not isinstance(ref, dict) or ref.get("optional"):
                continue
            name = str(ref.get(key, ""))
            if lookup(kind, name) is None:
                return (
                    f'MountVolume.SetUp failed for volume "{volume.get("name", "")}" : '
                    f'{label} "{name}" not found'
                )
    return None


def _decoded_keys(obj: ObjView) -> set[str]:
    return {*(obj.get("data") or {}), *(obj.get("binaryData") or {})}


def config_problem(container: ObjView, namespace: str, lookup: Lookup) -> str | None:
    """The kubelet's CreateContainerConfigError message for *container*, or None."""
    for source in container.get("envFrom") or []:
        for ref_key, kind, label in (
            ("secretRef", "Secret", "secret"),
            ("configMapRef", "ConfigMap", "configmap"),
        ):
            ref = source.get(ref_key)
            if not ref or ref.get("optional"):
                continue
            if lookup(kind, str(ref.get("name", ""))) is None:
                return f'{label} "{ref.get("name", "")}" not found'
    for env in container.get("env") or []:
        value_from = env.get("valueFrom") or {}
        for ref_key, kind, label in (
            ("secretKeyRef", "Secret", "secret"),
            ("configMapKeyRef", "ConfigMap", "configmap"),
        ):
            ref = value_from.get(ref_key)
            if not ref or ref.get("optional"):
                continue
            name, key = str(ref.get("name", "")), str(ref.get("key", ""))
            obj = lookup(kind, name)
            if obj is None:
                return f'{label} "{name}" not found'
            if key not in _decoded_keys(obj):
                return f"couldn't find key {key} in {kind} {namespace}/{name}"
    return None
