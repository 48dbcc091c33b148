"""One NVIDIADriver node pool's objects, as NVIDIA's NVIDIADriver state renders them.

NVIDIA's NVIDIADriver controller does not go through ClusterPolicy's driver
transform: it renders its own driver manifests per node pool. This module
builds the same objects field for field (checked against NVIDIA's render
goldens by ``tests/unit/gpu_nvidiadriver/test_nvidia_goldens.py``):

- the pool's ServiceAccount, Role (OpenShift SCC ``use`` of ``privileged``),
  ClusterRole (clusterversions, nodes, pods, pods/eviction, resourceclaims,
  daemonsets ``get``) and their bindings, all named
  ``nvidia-<driverType>-driver-<cr>-<osTag>`` (``nvidia-vgpu-manager-<cr>-<osTag>``);
- the shared ``nvidia-driver-startup-probe`` ConfigMap (the script writes the
  validator's ``.driver-ctr-ready`` file as YAML ``KEY: value`` lines);
- on OpenShift a SecurityContextConstraints of the pool's name and, when the
  cluster Proxy names a trusted CA, the ``gpu-operator-trusted-ca`` ConfigMap
  the Cluster Network Operator fills;
- the DaemonSet ``nvidia-<driverType>-driver-<osTag>-<hash>``: the
  ``k8s-driver-manager`` init container, ``nvidia-driver-ctr`` (``init`` then
  ``spec.args``), the optional peermem, GDS and GDRCopy sidecars, and on
  OpenShift with the Driver Toolkit the toolkit container; the default
  ``nvidia.com/gpu`` toleration followed by ``spec.tolerations``; the pool's
  nodeSelector; ``DRIVER_CONFIG_DIGEST`` (``nvidiadriver_digest``).

Beyond NVIDIA: ``spec.nodeAffinity`` reaches the pod (NVIDIA's template drops
it). Pure: everything read from the cluster comes in as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from api.nvidia.v1.clusterpolicy import ImageSpec
from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriverSpec
from manifests import configmap
from manifests.meta import object_meta
from platforms.gpu.common import (
    BIDIR,
    DIR,
    DOC,
    GPU_TOLERATION,
    HTOC,
    PRIORITY_CLASS,
    env,
    field_env,
    host_path,
    json_copy,
    mount,
    policy_rule,
)
from platforms.gpu.errors import RenderError
from platforms.gpu.images import driver_image, image_path, sanitize_kernel
from platforms.gpu.nvidiadriver_digest import (
    DriverInstallState,
    EnvVar,
    config_digest,
    volume_mounts,
    volumes,
)
from platforms.gpu.nvidiadriver_pools import NodePool

STARTUP_PROBE_CONFIGMAP: Final = "nvidia-driver-startup-probe"
TRUSTED_CA_CONFIGMAP: Final = "gpu-operator-trusted-ca"
COMPONENT_LABEL: Final = "app.kubernetes.io/component"
OS_VERSION_LABEL: Final = "nvidia.com/node.os-version"
PRECOMPILED_LABEL: Final = "nvidia.com/precompiled"
KERNEL_VERSION_LABEL: Final = "nvidia.com/precompiled.kernel-version"
DTK_LABEL: Final = "openshift.driver-toolkit"
DTK_RHCOS_LABEL: Final = "openshift.driver-toolkit.rhcos"
DTK_MISSING_LABEL: Final = "openshift.driver-toolkit.rhcos-image-missing"
OSTREE_LABEL: Final = "feature.node.kubernetes.io/system-os_release.OSTREE_VERSION"
KERNEL_LABEL: Final = "feature.node.kubernetes.io/kernel-version.full"
VGPU_HOST_MANAGER: Final = "vgpu-host-manager"
DEFAULT_STARTUP_DELAY: Final = 60
PRECOMPILED_STARTUP_DELAY: Final = 5
PRIV_S0: Final = {"privileged": True, "seLinuxOptions": {"level": "s0"}}
WAIT_FOR_DRIVER: Final = (
    "until [ -d /run/nvidia/driver/usr/src ] && lsmod | grep nvidia; do echo  Waiting for "
    "nvidia-driver to be installed...; sleep 10; done; exec {installer} install"
)
WAIT_FOR_DTK_DIR: Final = (
    "until [ -f /mnt/shared-nvidia-driver-toolkit/dir_prepared ]; do echo  Waiting for "
    "nvidia-driver-ctr container to prepare the shared directory ...; sleep 10; done; "
    "exec /mnt/shared-nvidia-driver-toolkit/ocp_dtk_entrypoint dtk-build-driver"
)
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

# Our own script, doing what NVIDIA's startup probe does: ready once the nvidia
# module is loaded, the driver daemons report Ready (when they report at all) and
# nvidia-smi answers; then the validator's ready file is written atomically, one
# `KEY: value` line per extra module this pod loads.
STARTUP_PROBE_SCRIPT: Final = """#!/bin/sh
# nvidia-driver-ctr startup probe (nimctl).
set -eu
dir=/run/nvidia/validations
ready="$dir/.driver-ctr-ready"
daemons="$dir/.driver-daemons-status"
mkdir -p "$dir"
[ -f /sys/module/nvidia/refcnt ] || { echo "NVIDIA kernel module not loaded"; exit 1; }
if [ -f "$daemons" ]; then
  status=$(cat "$daemons")
  if [ "$status" != Ready ]; then
    echo "NVIDIA driver daemons are not ready; Current status: $status"
    exit 1
  fi
fi
nvidia-smi || { echo "nvidia-smi failed"; exit 1; }
printf 'GDRCOPY_ENABLED: %s\\nGDS_ENABLED: %s\\nGPU_DIRECT_RDMA_ENABLED: %s\\n' \\
  "${GDRCOPY_ENABLED:-false}" "${GDS_ENABLED:-false}" "${GPU_DIRECT_RDMA_ENABLED:-false}" \\
  > "$ready.tmp"
mv "$ready.tmp" "$ready"
"""

# NVIDIA's description of the privileged SCC its driver state copies.
_SCC_DESCRIPTION: Final = (
    "privileged allows access to all privileged and host features and the ability to run "
    "as any user, any group, any fsGroup, and with any SELinux context.  WARNING: this is "
    "the most relaxed SCC and should be used only for cluster administration. Grant with "
    "caution."
)

__all__ = [
    "STARTUP_PROBE_CONFIGMAP",
    "STARTUP_PROBE_SCRIPT",
    "OpenShift",
    "PoolNames",
    "cluster_rules",
    "pool_objects",
    "role_rules",
    "startup_probe_config_map",
]


@dataclass(frozen=True)
class OpenShift:
    """What NVIDIA's NVIDIADriver state reads of an OpenShift cluster."""

    version: str
    """The ClusterVersion's desired version (``4.13``)."""
    dtk_images: Mapping[str, str] = field(default_factory=dict)
    """RHCOS (OSTree) version -> Driver Toolkit image (ImageStream ``openshift/driver-toolkit``)."""
    proxy: Mapping[str, Any] | None = None
    """The cluster Proxy's spec (``httpProxy``, ``httpsProxy``, ``noProxy``, ``trustedCA``)."""

    @property
    def dtk_enabled(self) -> bool:
        return bool(self.dtk_images)


@dataclass(frozen=True)
class PoolNames:
    """A pool's object names: ``name`` (ServiceAccount, RBAC, SCC) and ``app`` (DaemonSet)."""

    name: str
    app: str


def role_rules() -> list[dict[str, Any]]:
    """The driver Role: only ``use`` of the ``privileged`` SCC (NVIDIA's)."""
    return [
        policy_rule(
            ["security.openshift.io"], ["securitycontextconstraints"], ["use"], ["privileged"]
        )
    ]


def cluster_rules() -> list[dict[str, Any]]:
    """The driver ClusterRole, rule for rule as NVIDIA grants it."""
    return [
        policy_rule(["config.openshift.io"], ["clusterversions"], ["get", "list"]),
        policy_rule([""], ["nodes"], ["get", "list", "patch", "update", "watch"]),
        policy_rule([""], ["pods"], ["get", "list", "watch"]),
        policy_rule([""], ["pods/eviction"], ["create"]),
        policy_rule(["resource.k8s.io"], ["resourceclaims"], ["get", "list"]),
        policy_rule(["apps"], ["daemonsets"], ["get"]),
    ]


def _component(spec: NVIDIADriverSpec) -> str:
    return "nvidia-vgpu-host-manager" if spec.driver_type == VGPU_HOST_MANAGER else "nvidia-driver"


def startup_probe_config_map(app: str, spec: NVIDIADriverSpec) -> dict[str, Any]:
    """The startup-probe ConfigMap NVIDIA's driver pools share (labelled with a pool's app)."""
    meta = object_meta(
        STARTUP_PROBE_CONFIGMAP, labels={"app": app, COMPONENT_LABEL: _component(spec)}
    )
    return configmap.build(meta, {"startup-probe.sh": STARTUP_PROBE_SCRIPT})


def _rbac(name: str, namespace: str) -> list[dict[str, Any]]:
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    rbac_api = "rbac.authorization.k8s.io/v1"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name}},
        {"apiVersion": rbac_api, "kind": "Role", "metadata": {"name": name}, "rules": role_rules()},
        {
            "apiVersion": rbac_api,
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": cluster_rules(),
        },
        {
            "apiVersion": rbac_api,
            "kind": "RoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": subject,
        },
        {
            "apiVersion": rbac_api,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [dict(s) for s in subject],
        },
    ]


def _scc(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "security.openshift.io/v1",
        "kind": "SecurityContextConstraints",
        "metadata": {"name": name, "annotations": {"kubernetes.io/description": _SCC_DESCRIPTION}},
        "allowHostDirVolumePlugin": True,
        "allowHostIPC": False,
        "allowHostNetwork": False,
        "allowHostPID": True,
        "allowHostPorts": False,
        "allowPrivilegeEscalation": True,
        "allowPrivilegedContainer": True,
        "allowedCapabilities": ["*"],
        "allowedUnsafeSysctls": ["*"],
        "defaultAddCapabilities": None,
        "fsGroup": {"type": "RunAsAny"},
        "groups": ["system:cluster-admins", "system:nodes", "system:masters"],
        "priority": None,
        "readOnlyRootFilesystem": False,
        "requiredDropCapabilities": None,
        "runAsUser": {"type": "RunAsAny"},
        "seLinuxContext": {"type": "RunAsAny"},
        "seccompProfiles": ["*"],
        "supplementalGroups": {"type": "RunAsAny"},
        "users": [f"system:serviceaccount:{namespace}:{name}"],
        "volumes": ["*"],
    }


def _trusted_ca_config_map() -> dict[str, Any]:
    meta = object_meta(
        TRUSTED_CA_CONFIGMAP, labels={"config.openshift.io/inject-trusted-cabundle": "true"}
    )
    return configmap.build(meta, {"ca-bundle.crt": ""})


def _trusted_ca(openshift: OpenShift | None) -> str:
    proxy = openshift.proxy if openshift is not None else None
    return str(((proxy or {}).get("trustedCA") or {}).get("name") or "")


@dataclass
class _Extra:
    """The volumes and mounts NVIDIA calls ``additionalConfigs`` (config-driven)."""

    mounts: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)


def _config_map_files(
    extra: _Extra, name: str, keys: Sequence[str] | None, directory: str, what: str
) -> None:
    if keys is None:
        raise RenderError(f"spec.{what}: ConfigMap {name} not found in the operator namespace")
    for key in sorted(keys):
        extra.mounts.append(mount(name, f"{directory}/{key}", read_only=True, sub_path=key))
    items = [{"key": k, "path": k} for k in sorted(keys)]
    extra.volumes.append({"name": name, "configMap": {"name": name, "items": items}})


def _additional(
    spec: NVIDIADriverSpec,
    pool: NodePool,
    config_map_keys: Mapping[str, Sequence[str]],
    *,
    openshift: bool,
    runtime: str,
) -> _Extra:
    extra = _Extra()
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


def _extra_mounts(extra: _Extra) -> list[dict[str, Any]]:
    return [dict(m) for m in extra.mounts]


def _probe(
    command: list[str], delay: int, period: int, timeout: int, failure: int
) -> dict[str, Any]:
    return {
        "exec": {"command": command},
        "initialDelaySeconds": delay,
        "failureThreshold": failure,
        "successThreshold": 1,
        "periodSeconds": period,
        "timeoutSeconds": timeout,
    }


def _startup_probe(spec: NVIDIADriverSpec) -> dict[str, Any]:
    p = spec.startup_probe
    if p is None:
        delay = PRECOMPILED_STARTUP_DELAY if spec.use_precompiled else DEFAULT_STARTUP_DELAY
        values = (delay, 60, 10, 1, 120)
    else:
        # NVIDIA's template writes the probe's fields as they are (zero when unset).
        values = (
            p.initial_delay_seconds or 0,
            p.timeout_seconds or 0,
            p.period_seconds or 0,
            p.success_threshold or 0,
            p.failure_threshold or 0,
        )
    delay, timeout, period, success, failure = values
    return {
        "exec": {"command": ["sh", "/usr/local/bin/startup-probe.sh"]},
        "initialDelaySeconds": delay,
        "failureThreshold": failure,
        "successThreshold": success,
        "periodSeconds": period,
        "timeoutSeconds": timeout,
    }


def _user_env(items: Sequence[Any] | None) -> list[dict[str, Any]]:
    return [env(e.name, e.value or "") for e in items or ()]


def _proxy_env(proxy: Mapping[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for key, name in (
        ("httpProxy", "HTTP_PROXY"),
        ("httpsProxy", "HTTPS_PROXY"),
        ("noProxy", "NO_PROXY"),
    ):
        value = str(proxy.get(key) or "")
        if value:
            out += [env(name, value), env(name.lower(), value)]
    return out


def pool_objects(
    spec: NVIDIADriverSpec,
    pool: NodePool,
    names: PoolNames,
    *,
    namespace: str,
    config_map_keys: Mapping[str, Sequence[str]],
    operator_env: Mapping[str, str],
    openshift: OpenShift | None = None,
    runtime: str = "",
    host_root: str = "",
) -> list[dict[str, Any]]:
    """The pool's objects in NVIDIA's file order (namespace, owner and hash come later)."""
    dtk = openshift is not None and openshift.dtk_enabled and not spec.use_precompiled
    out = _rbac(names.name, namespace)
    out.append(startup_probe_config_map(names.app, spec))
    if openshift is not None:
        out.append(_scc(names.name, namespace))
        if dtk and _trusted_ca(openshift):
            out.append(_trusted_ca_config_map())
    out.append(
        _daemonset(
            spec,
            pool,
            names,
            config_map_keys=config_map_keys,
            operator_env=operator_env,
            openshift=openshift if dtk else None,
            openshift_version=openshift.version if openshift is not None else "",
            # NVIDIA reads the cluster Proxy on OpenShift without precompiled drivers, with or
            # without the Driver Toolkit; the digest hashes it either way
            cluster_proxy=(openshift.proxy or {})
            if openshift is not None and not spec.use_precompiled
            else {},
            runtime=runtime,
            host_root=host_root,
        )
    )
    return out


def _daemonset(
    spec: NVIDIADriverSpec,
    pool: NodePool,
    names: PoolNames,
    *,
    config_map_keys: Mapping[str, Sequence[str]],
    operator_env: Mapping[str, str],
    openshift: OpenShift | None,
    openshift_version: str,
    cluster_proxy: Mapping[str, Any],
    runtime: str,
    host_root: str,
) -> dict[str, Any]:
    """The pool's driver DaemonSet (``openshift`` only when the Driver Toolkit is used)."""
    vgpu_host = spec.driver_type == VGPU_HOST_MANAGER
    precompiled = bool(spec.use_precompiled)
    rdma = bool(spec.rdma and spec.rdma.enabled)
    host_mofed = rdma and bool(spec.rdma and spec.rdma.use_host_mofed)
    gds = spec.gds if spec.gds is not None and spec.gds.is_enabled() else None
    gdrcopy = spec.gdrcopy if spec.gdrcopy is not None and spec.gdrcopy.is_enabled() else None
    if precompiled and (gds is not None or gdrcopy is not None):
        which = "GPUDirect Storage (spec.gds)" if gds is not None else "GDRCopy (spec.gdrcopy)"
        raise RenderError(f"{which} is not supported along with pre-compiled NVIDIA drivers")
    if precompiled and "sha256:" in (spec.version or ""):
        raise RenderError(
            "spec.version: specifying image digest is not supported when precompiled is enabled"
        )
    main = ImageSpec(repository=spec.repository, image=spec.image, version=spec.version)
    image = driver_image(
        main, {}, "image", os_tag=pool.os_tag, kernel=pool.kernel if precompiled else None
    )
    manager_image = image_path(spec.manager, operator_env, "manager")
    gds_image = driver_image(gds, {}, "gds", os_tag=pool.os_tag) if gds else ""
    gdrcopy_image = driver_image(gdrcopy, {}, "gdrcopy", os_tag=pool.os_tag) if gdrcopy else ""
    rhcos = pool.rhcos if openshift is not None else ""
    dtk_image = openshift.dtk_images.get(rhcos, "") if openshift is not None else ""
    proxy = (openshift.proxy or {}) if openshift is not None else {}
    trusted_ca = _trusted_ca(openshift)
    extra = _additional(
        spec, pool, config_map_keys, openshift=bool(openshift_version), runtime=runtime
    )
    kernel_module_type = spec.kernel_module_type or ""

    digest = config_digest(
        DriverInstallState(
            DriverImage=image,
            DriverManagerImage=manager_image,
            DriverType=spec.driver_type,
            KernelModuleType=kernel_module_type,
            DriverArgs=list(spec.args or []),
            SecretEnvSource=spec.secret_env or "",
            DriverEnv=_sorted_env(spec.env),
            ManagerEnv=_sorted_env(spec.manager.env),
            LicensingConfigName=(spec.licensing_config.secret_name or "")
            if spec.licensing_config is not None
            else "",
            VirtualTopologyConfig=spec.virtual_topology_config.name or ""
            if spec.virtual_topology_config is not None
            else "",
            KernelModuleConfig=spec.kernel_module_config.name or ""
            if spec.kernel_module_config is not None
            else "",
            RepoConfig=spec.repo_config.name or "" if spec.repo_config is not None else "",
            CertConfig=spec.cert_config.name or "" if spec.cert_config is not None else "",
            GPUDirectRDMAEnabled=rdma,
            PeermemImage=image if rdma else "",
            UseHostMOFED=host_mofed,
            GDSImage=gds_image,
            GDSEnabled=gds is not None,
            GDSEnv=_sorted_env(gds.env) if gds else [],
            GDRCopyImage=gdrcopy_image,
            GDRCopyEnabled=gdrcopy is not None,
            GDRCopyEnv=_sorted_env(gdrcopy.env) if gdrcopy else [],
            OpenshiftVersion=openshift_version,
            DTKEnabled=openshift is not None,
            HTTPProxy=str(cluster_proxy.get("httpProxy") or ""),
            HTTPSProxy=str(cluster_proxy.get("httpsProxy") or ""),
            NoProxy=str(cluster_proxy.get("noProxy") or ""),
            TrustedCAConfigMapName=str((cluster_proxy.get("trustedCA") or {}).get("name") or ""),
            DTKImage=dtk_image,
            RHCOSVersion=rhcos,
            UsePrecompiled=precompiled,
            KernelVersion=pool.kernel if precompiled else "",
            AdditionalVolumeMounts=volume_mounts(extra.mounts),
            AdditionalVolumes=volumes(extra.volumes),
            HostRoot=host_root,
        )
    )

    component = _component(spec)
    user_labels = {
        k: v
        for k, v in (spec.labels or {}).items()
        if k != "app" and not k.startswith("app.kubernetes.io/")
    }
    labels: dict[str, str] = {
        "app": names.app,
        OS_VERSION_LABEL: pool.os_tag,
        PRECOMPILED_LABEL: "true" if precompiled else "false",
    }
    if precompiled:
        labels[KERNEL_VERSION_LABEL] = sanitize_kernel(pool.kernel)
    labels[COMPONENT_LABEL] = component
    pod_labels = dict(labels)
    if openshift is not None:
        labels[DTK_RHCOS_LABEL] = rhcos
        labels[DTK_LABEL] = "true"
        pod_labels[DTK_LABEL] = "true"
        if not dtk_image:
            labels[DTK_MISSING_LABEL] = "true"
            pod_labels[DTK_MISSING_LABEL] = "true"
    labels.update(user_labels)
    pod_labels.update(user_labels)

    node_selector = {
        (
            "nvidia.com/gpu.deploy.vgpu-manager" if vgpu_host else "nvidia.com/gpu.deploy.driver"
        ): "true",
        **pool.node_selector,
    }
    if openshift is not None:
        node_selector[OSTREE_LABEL] = rhcos
    if precompiled:
        node_selector[KERNEL_LABEL] = pool.kernel

    resources = (
        json_copy(spec.resources.model_dump(by_alias=True, exclude_none=True, mode="json"))
        if spec.resources
        else None
    )

    def with_resources(c: dict[str, Any]) -> dict[str, Any]:
        if resources is not None:
            c["resources"] = json_copy(resources)
        return c

    # the k8s-driver-manager init container
    manager_env = [
        field_env("NODE_NAME", "spec.nodeName"),
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        env("ENABLE_GPU_POD_EVICTION", "true"),
        env("ENABLE_AUTO_DRAIN", "false"),
        env("DRAIN_USE_FORCE", "false"),
        env("DRAIN_POD_SELECTOR_LABEL", ""),
        env("DRAIN_TIMEOUT_SECONDS", "0s"),
        env("DRAIN_DELETE_EMPTYDIR_DATA", "false"),
        field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
        env("DRIVER_CONFIG_DIGEST", digest),
    ]
    if rdma:
        manager_env.append(env("GPU_DIRECT_RDMA_ENABLED", "true"))
        if host_mofed:
            manager_env.append(env("USE_HOST_MOFED", "true"))
    manager_env += _user_env(spec.manager.env)
    manager = with_resources(
        {
            "name": "k8s-driver-manager",
            "image": manager_image,
            "imagePullPolicy": spec.manager.image_pull_policy or "IfNotPresent",
            "command": ["driver-manager"],
            "args": ["uninstall_driver"],
            "env": manager_env,
            "securityContext": {"privileged": True},
            "volumeMounts": [
                mount("run-nvidia", "/run/nvidia", propagation=BIDIR),
                mount("host-root", "/host", read_only=True, propagation=HTOC),
                mount("host-sys", "/sys"),
                mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation=HTOC),
            ],
        }
    )

    # nvidia-driver-ctr
    driver_env = [
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        field_env("NODE_NAME", "spec.nodeName"),
        field_env("NODE_IP", "status.hostIP"),
        env("DRIVER_CONFIG_DIGEST", digest),
    ]
    if kernel_module_type:
        driver_env.append(env("KERNEL_MODULE_TYPE", kernel_module_type))
        if kernel_module_type == "open":
            driver_env.append(env("OPEN_KERNEL_MODULES_ENABLED", "true"))
    if gds is not None:
        driver_env.append(env("GDS_ENABLED", "true"))
    if gdrcopy is not None:
        driver_env.append(env("GDRCOPY_ENABLED", "true"))
    if openshift is not None and openshift_version:
        driver_env.append(env("OPENSHIFT_VERSION", openshift_version))
    driver_env += _user_env(spec.env)
    if rdma:
        driver_env.append(env("GPU_DIRECT_RDMA_ENABLED", "true"))
        if host_mofed:
            driver_env.append(env("USE_HOST_MOFED", "true"))
    if openshift is not None and not dtk_image:
        driver_env += [env("RHCOS_IMAGE_MISSING", "true"), env("RHCOS_VERSION", rhcos)]
    if openshift is not None:
        driver_env += _proxy_env(proxy)
    driver_mounts = [
        mount("run-nvidia", "/run/nvidia", propagation=BIDIR),
        mount("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager"),
        mount("run-nvidia-topologyd", "/run/nvidia-topologyd"),
        mount("var-log", "/var/log"),
        mount("dev-log", "/dev/log"),
        mount("host-os-release", "/host-etc/os-release", read_only=True),
    ]
    if vgpu_host:
        driver_mounts += [mount("cgroup", "/sys/fs/cgroup"), mount("vfio", "/dev/vfio")]
    driver_mounts += [
        mount("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", propagation=HTOC),
        mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation=HTOC),
        mount("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
        mount("host-sys-devices-system", "/sys/devices/system"),
        mount("nv-firmware", "/lib/firmware"),
        mount(
            "driver-startup-probe-script",
            "/usr/local/bin/startup-probe.sh",
            sub_path="startup-probe.sh",
        ),
        *_extra_mounts(extra),
    ]
    if openshift is not None:
        driver_mounts.append(
            mount("shared-nvidia-driver-toolkit", "/mnt/shared-nvidia-driver-toolkit")
        )
    if openshift is not None and trusted_ca:
        driver_mounts.append(
            mount(TRUSTED_CA_CONFIGMAP, "/etc/pki/ca-trust/extracted/pem", read_only=True)
        )
    driver: dict[str, Any] = {
        "name": "nvidia-driver-ctr",
        "image": image,
        "imagePullPolicy": spec.image_pull_policy or "IfNotPresent",
        "command": ["ocp_dtk_entrypoint"] if openshift is not None else ["nvidia-driver"],
        "args": ["nv-ctr-run-with-dtk"] if openshift is not None else ["init", *(spec.args or [])],
        "securityContext": json_copy(PRIV_S0),
    }
    if spec.secret_env:
        driver["envFrom"] = [{"secretRef": {"name": spec.secret_env}}]
    driver["env"] = driver_env
    driver["volumeMounts"] = driver_mounts
    with_resources(driver)
    if not vgpu_host:
        driver["startupProbe"] = _startup_probe(spec)
        driver["lifecycle"] = {
            "preStop": {
                "exec": {
                    "command": [
                        "/bin/sh",
                        "-c",
                        "rm -f /run/nvidia/validations/.driver-ctr-ready "
                        "/run/nvidia/validations/.driver-daemons-status",
                    ]
                }
            }
        }
    containers = [driver]

    if rdma:
        peermem_env = [env("NVIDIA_VISIBLE_DEVICES", "void")]
        if host_mofed:
            peermem_env.append(env("USE_HOST_MOFED", "true"))
        probe_cmd = ["sh", "-c", "nvidia-driver probe_nvidia_peermem"]
        containers.append(
            with_resources(
                {
                    "name": "nvidia-peermem-ctr",
                    "image": image,
                    "imagePullPolicy": spec.image_pull_policy or "IfNotPresent",
                    "command": ["nvidia-driver"],
                    "args": ["reload_nvidia_peermem"],
                    "securityContext": json_copy(PRIV_S0),
                    "env": peermem_env,
                    "volumeMounts": [
                        mount("run-nvidia", "/run/nvidia", propagation=BIDIR),
                        mount("var-log", "/var/log"),
                        mount("dev-log", "/dev/log", read_only=True),
                        mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation=HTOC),
                        *_extra_mounts(extra),
                    ],
                    "startupProbe": _probe(probe_cmd, 10, 10, 10, 120),
                    "livenessProbe": {**_probe(probe_cmd, 30, 30, 10, 1)},
                }
            )
        )
    for sidecar, sidecar_image, ctr, installer, dtk_arg, module, policy in (
        (gds, gds_image, "nvidia-fs-ctr", "nvidia-gds-driver", "nv-fs-ctr-run-with-dtk",
         "nvidia_fs", "IfNotPresent"),
        (gdrcopy, gdrcopy_image, "nvidia-gdrcopy-ctr", "nvidia-gdrcopy-driver",
         "gdrcopy-ctr-run-with-dtk", "gdrdrv", None),
    ):  # fmt: skip
        if sidecar is None:
            continue
        c: dict[str, Any] = {
            "name": ctr,
            "image": sidecar_image,
            "imagePullPolicy": policy or (sidecar.image_pull_policy or "IfNotPresent"),
        }
        if openshift is not None:
            c["command"], c["args"] = ["ocp_dtk_entrypoint"], [dtk_arg]
        else:
            c["command"], c["args"] = ["bash", "-xc"], [WAIT_FOR_DRIVER.format(installer=installer)]
        if sidecar.env:
            c["env"] = _user_env(sidecar.env)
        c["securityContext"] = json_copy(PRIV_S0)
        if spec.secret_env:
            c["envFrom"] = [{"secretRef": {"name": spec.secret_env}}]
        sidecar_mounts = [
            mount("run-nvidia", "/run/nvidia", propagation=HTOC),
            mount("var-log", "/var/log"),
            mount("dev-log", "/dev/log", read_only=True),
        ]
        if openshift is not None:
            sidecar_mounts.append(
                mount("shared-nvidia-driver-toolkit", "/mnt/shared-nvidia-driver-toolkit")
            )
        c["volumeMounts"] = [*sidecar_mounts, *_extra_mounts(extra)]
        with_resources(c)
        c["startupProbe"] = _probe(["sh", "-c", f"lsmod | grep {module}"], 10, 10, 10, 120)
        containers.append(c)

    if openshift is not None:
        dtk_env = [
            env("RHCOS_VERSION", rhcos),
            env("NVIDIA_VISIBLE_DEVICES", "void"),
            env("DRIVER_CONFIG_DIGEST", digest),
        ]
        if not dtk_image:
            dtk_env.append(env("RHCOS_IMAGE_MISSING", "true"))
        if gds is not None:
            dtk_env.append(env("GDS_ENABLED", "true"))
        if gdrcopy is not None:
            dtk_env.append(env("GDRCOPY_ENABLED", "true"))
        containers.append(
            with_resources(
                {
                    "name": "openshift-driver-toolkit-ctr",
                    "image": dtk_image or image,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["bash", "-xc"],
                    "args": [WAIT_FOR_DTK_DIR],
                    "securityContext": json_copy(PRIV_S0),
                    "env": dtk_env,
                    "volumeMounts": [
                        mount("shared-nvidia-driver-toolkit", "/mnt/shared-nvidia-driver-toolkit"),
                        mount("var-log", "/var/log"),
                        mount(
                            "mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", propagation=HTOC
                        ),
                        mount("host-os-release", "/host-etc/os-release", read_only=True),
                        mount("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
                        mount("nv-firmware", "/lib/firmware"),
                    ],
                }
            )
        )

    pod_volumes = [
        host_path("run-nvidia", "/run/nvidia", DOC),
        host_path("var-log", "/var/log"),
        host_path("dev-log", "/dev/log"),
        host_path("host-os-release", "/etc/os-release"),
    ]
    if vgpu_host:
        pod_volumes += [host_path("cgroup", "/sys/fs/cgroup"), host_path("vfio", "/dev/vfio")]
    pod_volumes += [
        host_path("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager", DOC),
        host_path("run-nvidia-topologyd", "/run/nvidia-topologyd", DOC),
        host_path(
            "mlnx-ofed-usr-src", "/usr/src" if host_mofed else "/run/mellanox/drivers/usr/src", DOC
        ),
        host_path("run-mellanox-drivers", "/run/mellanox/drivers", DOC),
        host_path("run-nvidia-validations", "/run/nvidia/validations", DOC),
        host_path("host-root", host_root or "/"),
        host_path("host-sys", "/sys", DIR),
        host_path("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
        host_path("host-sys-devices-system", "/sys/devices/system", DIR),
        host_path("nv-firmware", "/run/nvidia/driver/lib/firmware", DOC),
        {
            "name": "driver-startup-probe-script",
            "configMap": {"name": STARTUP_PROBE_CONFIGMAP, "defaultMode": 0o755},
        },
        *extra.volumes,
    ]
    if openshift is not None:
        pod_volumes.append({"name": "shared-nvidia-driver-toolkit", "emptyDir": {}})
        if trusted_ca:
            pod_volumes.append(
                {
                    "name": TRUSTED_CA_CONFIGMAP,
                    "configMap": {
                        "name": TRUSTED_CA_CONFIGMAP,
                        "items": [{"key": "ca-bundle.crt", "path": "tls-ca-bundle.pem"}],
                    },
                }
            )

    pod: dict[str, Any] = {}
    if vgpu_host:
        pod["terminationGracePeriodSeconds"] = 120
    pod["nodeSelector"] = node_selector
    pod["tolerations"] = [dict(GPU_TOLERATION), *(_toleration(t) for t in spec.tolerations or ())]
    pod["affinity"] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {
                                "key": COMPONENT_LABEL,
                                "operator": "In",
                                "values": ["nvidia-driver", "nvidia-vgpu-manager"],
                            }
                        ]
                    },
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }
    if spec.node_affinity:
        pod["affinity"]["nodeAffinity"] = _dump(spec.node_affinity)
    pod["priorityClassName"] = spec.priority_class_name or PRIORITY_CLASS
    pod["serviceAccountName"] = names.name
    pod["hostPID"] = True
    if spec.host_network:
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
    if spec.pod_security_context is not None:
        pod["securityContext"] = _dump(spec.pod_security_context)
    secrets = [
        *(spec.image_pull_secrets or ()),
        *(spec.manager.image_pull_secrets or ()),
        *((gds.image_pull_secrets or ()) if gds else ()),
        *((gdrcopy.image_pull_secrets or ()) if gdrcopy else ()),
    ]
    if secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in secrets]
    pod["initContainers"] = [manager]
    pod["containers"] = containers
    pod["volumes"] = pod_volumes

    annotations = {"openshift.io/scc": names.name, **(spec.annotations or {})}
    pod_annotations = {
        "kubectl.kubernetes.io/default-container": "nvidia-driver-ctr",
        **(spec.annotations or {}),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": names.app, "labels": labels, "annotations": annotations},
        "spec": {
            "selector": {"matchLabels": {"app": names.app}},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"annotations": pod_annotations, "labels": pod_labels},
                "spec": pod,
            },
        },
    }


def _dump(model: Any) -> Any:
    if isinstance(model, Mapping):
        return json_copy(model)
    return model.model_dump(by_alias=True, exclude_none=True, mode="json")


def _toleration(t: Any) -> dict[str, Any]:
    return dict(_dump(t))


def _sorted_env(items: Sequence[Any] | None) -> list[EnvVar]:
    return sorted((EnvVar(e.name, e.value or "") for e in items or ()), key=lambda e: e.Name)
