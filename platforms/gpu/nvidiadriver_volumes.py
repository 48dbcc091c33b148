"""The volumes and mounts NVIDIA's NVIDIADriver state calls ``additionalConfigs``.

What the driver container mounts besides its fixed volumes, from the
NVIDIADriver spec and the pool's OS, as NVIDIA's ``getDriverAdditionalConfigs``
decides it (without precompiled drivers only, except the last three):

- ``repoConfig``: each key of the ConfigMap into the OS's package repository
  directory (``/etc/apt/sources.list.d``, ``/etc/yum.repos.d``, ``/etc/zypp/repos.d``);
- ``certConfig``: each key into the OS's CA directory;
- host subscriptions: RHEL entitlements (not on OpenShift, not with cri-o, not
  with a repoConfig) and SUSE credentials, ``subscription-config-<n>`` in
  mount-path order;
- ``kernelModuleConfig``: each key into ``/drivers``;
- ``licensingConfig``: ``gridd.conf`` (and the NLS client token unless
  ``nlsEnabled: false``) from the ConfigMap or Secret, read-only;
- ``virtualTopologyConfig``: ``nvidia-topologyd.conf``.

A ConfigMap's keys come from the cluster (``config_map_keys``); one that is not
there, or an OS without a known directory, is a RenderError naming the field.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriverSpec
from platforms.gpu.common import host_path, mount
from platforms.gpu.errors import RenderError
from platforms.gpu.nvidiadriver_pools import NodePool

__all__ = ["CERT_DIRS", "REPO_DIRS", "Extra", "additional_configs"]

REPO_DIRS: Final = {
    "centos": "/etc/yum.repos.d",
    "debian": "/etc/apt/sources.list.d",
    "ubuntu": "/etc/apt/sources.list.d",
    "rhcos": "/etc/yum.repos.d",
    "rhel": "/etc/yum.repos.d",
    "rocky": "/etc/yum.repos.d",
    "ol": "/etc/yum.repos.d",
    "sles": "/etc/zypp/repos.d",
    "sl-micro": "/etc/zypp/repos.d",
}
CERT_DIRS: Final = {
    "centos": "/etc/pki/ca-trust/extracted/pem",
    "debian": "/usr/local/share/ca-certificates",
    "ubuntu": "/usr/local/share/ca-certificates",
    "rhcos": "/etc/pki/ca-trust/extracted/pem",
    "rhel": "/etc/pki/ca-trust/extracted/pem",
    "rocky": "/etc/pki/ca-trust/extracted/pem",
    "ol": "/etc/pki/ca-trust/extracted/pem",
    "sles": "/etc/pki/trust/anchors",
    "sl-micro": "/etc/pki/trust/anchors",
}
# mount path -> (host path, hostPath type); mounted in mount-path order.
_RHEL_SUBSCRIPTION: Final = {
    "/run/secrets/etc-pki-entitlement": ("/etc/pki/entitlement", "Directory"),
    "/run/secrets/redhat.repo": ("/etc/yum.repos.d/redhat.repo", "File"),
    "/run/secrets/rhsm": ("/etc/rhsm", "Directory"),
}
_SUSE_SUBSCRIPTION: Final = {
    "/etc/zypp/credentials.d": ("/etc/zypp/credentials.d", "Directory"),
    "/etc/SUSEConnect": ("/etc/SUSEConnect", "FileOrCreate"),
}
LICENSING_FILE: Final = "gridd.conf"
NLS_TOKEN_FILE: Final = "client_configuration_token.tok"
TOPOLOGY_FILE: Final = "nvidia-topologyd.conf"


@dataclass
class Extra:
    """The driver container's additional mounts and the pod's volumes they need."""

    mounts: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)


def _config_map_files(
    extra: Extra, name: str, keys: Sequence[str] | None, directory: str, what: str
) -> None:
    if keys is None:
        raise RenderError(f"spec.{what}: ConfigMap {name} not found in the operator namespace")
    for key in sorted(keys):
        extra.mounts.append(mount(name, f"{directory}/{key}", read_only=True, sub_path=key))
    items = [{"key": k, "path": k} for k in sorted(keys)]
    extra.volumes.append({"name": name, "configMap": {"name": name, "items": items}})


def additional_configs(
    spec: NVIDIADriverSpec,
    pool: NodePool,
    config_map_keys: Mapping[str, Sequence[str]],
    *,
    openshift: bool,
    runtime: str,
) -> Extra:
    extra = Extra()
    os_id = pool.os_id
    if not spec.use_precompiled:
        for cfg, dirs, what in (
            (spec.repo_config, REPO_DIRS, "repoConfig"),
            (spec.cert_config, CERT_DIRS, "certConfig"),
        ):
            if cfg is None or not cfg.name:
                continue
            directory = dirs.get(os_id)
            if directory is None:
                raise RenderError(f"spec.{what}: distribution {os_id} not supported")
            _config_map_files(
                extra, cfg.name, config_map_keys.get(cfg.name), directory, f"{what}.name"
            )
        subscription: Mapping[str, tuple[str, str]] = {}
        if os_id in ("sles", "sl-micro"):
            subscription = _SUSE_SUBSCRIPTION
        elif os_id == "rhel" and not openshift and runtime != "crio":
            repo = spec.repo_config is not None and bool(spec.repo_config.name)
            subscription = {} if repo else _RHEL_SUBSCRIPTION
        for i, path in enumerate(sorted(subscription)):
            host, kind = subscription[path]
            extra.mounts.append(mount(f"subscription-config-{i}", path, read_only=True))
            extra.volumes.append(host_path(f"subscription-config-{i}", host, kind))
    kmc = spec.kernel_module_config
    if kmc is not None and kmc.name:
        _config_map_files(
            extra, kmc.name, config_map_keys.get(kmc.name), "/drivers", "kernelModuleConfig.name"
        )
    lic = spec.licensing_config
    if lic is not None and (lic.name or lic.secret_name):
        items = [{"key": LICENSING_FILE, "path": LICENSING_FILE}]
        extra.mounts.append(
            mount(
                "licensing-config", "/drivers/gridd.conf", read_only=True, sub_path=LICENSING_FILE
            )
        )
        if lic.nls_enabled is not False:
            items.append({"key": NLS_TOKEN_FILE, "path": NLS_TOKEN_FILE})
            extra.mounts.append(
                mount(
                    "licensing-config",
                    f"/drivers/ClientConfigToken/{NLS_TOKEN_FILE}",
                    read_only=True,
                    sub_path=NLS_TOKEN_FILE,
                )
            )
        source: dict[str, Any] = (
            {"secret": {"secretName": lic.secret_name, "items": items}}
            if lic.secret_name
            else {"configMap": {"name": lic.name, "items": items}}
        )
        extra.volumes.append({"name": "licensing-config", **source})
    topo = spec.virtual_topology_config
    if topo is not None and topo.name:
        extra.mounts.append(
            mount(
                "topology-config",
                "/etc/nvidia/nvidia-topologyd.conf",
                read_only=True,
                sub_path=TOPOLOGY_FILE,
            )
        )
        extra.volumes.append(
            {
                "name": "topology-config",
                "configMap": {
                    "name": topo.name,
                    "items": [{"key": TOPOLOGY_FILE, "path": TOPOLOGY_FILE}],
                },
            }
        )
    return extra
