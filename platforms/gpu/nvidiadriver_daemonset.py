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
  nodeSelector; ``DRIVER_CONFIG_DIGEST`` (``nvidiadriver_digest``); the
  config-driven volumes (``nvidiadriver_volumes``).

Beyond NVIDIA: ``spec.nodeAffinity`` reaches the pod (NVIDIA's template drops
it). Pure: everything read from the cluster comes in as arguments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from api.nvidia.v1.clusterpolicy import GDRCopySpec, GPUDirectStorageSpec, ImageSpec
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
from platforms.gpu.nvidiadriver_volumes import Extra, additional_configs

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
    "manager_env_defaults",
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


def _extra_mounts(extra: Extra) -> list[dict[str, Any]]:
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
    p = _resolve(
        spec,
        pool,
        names,
        config_map_keys=config_map_keys,
        operator_env=operator_env,
        openshift=openshift,
        runtime=runtime,
        host_root=host_root,
    )
    out = _rbac(names.name, namespace)
    out.append(startup_probe_config_map(names.app, spec))
    if openshift is not None:
        out.append(_scc(names.name, namespace))
        if p.dtk is not None and p.trusted_ca:
            out.append(_trusted_ca_config_map())
    out.append(_daemonset(p))
    return out


@dataclass(frozen=True)
class _Pool:
    """Everything one pool's DaemonSet is built from, resolved once."""

    spec: NVIDIADriverSpec
    pool: NodePool
    names: PoolNames
    image: str
    manager_image: str
    gds: GPUDirectStorageSpec | None
    gds_image: str
    gdrcopy: GDRCopySpec | None
    gdrcopy_image: str
    extra: Extra
    dtk: OpenShift | None
    """The OpenShift facts when the Driver Toolkit is used, else None."""
    openshift_version: str
    cluster_proxy: Mapping[str, Any]
    """The cluster Proxy as NVIDIA reads it: on OpenShift without precompiled drivers."""
    host_root: str

    @property
    def vgpu_host(self) -> bool:
        return self.spec.driver_type == VGPU_HOST_MANAGER

    @property
    def precompiled(self) -> bool:
        return bool(self.spec.use_precompiled)

    @property
    def rdma(self) -> bool:
        return bool(self.spec.rdma and self.spec.rdma.enabled)

    @property
    def host_mofed(self) -> bool:
        return self.rdma and bool(self.spec.rdma and self.spec.rdma.use_host_mofed)

    @property
    def rhcos(self) -> str:
        return self.pool.rhcos if self.dtk is not None else ""

    @property
    def dtk_image(self) -> str:
        return self.dtk.dtk_images.get(self.rhcos, "") if self.dtk is not None else ""

    @property
    def trusted_ca(self) -> str:
        return _trusted_ca(self.dtk)

    def with_resources(self, c: dict[str, Any]) -> dict[str, Any]:
        """``c`` with the spec's resources (every container of the pod gets them)."""
        if self.spec.resources is not None:
            c["resources"] = self.spec.resources.model_dump(
                by_alias=True, exclude_none=True, mode="json"
            )
        return c


def _resolve(
    spec: NVIDIADriverSpec,
    pool: NodePool,
    names: PoolNames,
    *,
    config_map_keys: Mapping[str, Sequence[str]],
    operator_env: Mapping[str, str],
    openshift: OpenShift | None,
    runtime: str,
    host_root: str,
) -> _Pool:
    """Images, sidecars and additional volumes of a pool; RenderError for what NVIDIA refuses."""
    precompiled = bool(spec.use_precompiled)
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
    dtk = openshift is not None and openshift.dtk_enabled and not precompiled
    return _Pool(
        spec=spec,
        pool=pool,
        names=names,
        image=driver_image(
            main, {}, "image", os_tag=pool.os_tag, kernel=pool.kernel if precompiled else None
        ),
        manager_image=image_path(spec.manager, operator_env, "manager"),
        gds=gds,
        gds_image=driver_image(gds, {}, "gds", os_tag=pool.os_tag) if gds else "",
        gdrcopy=gdrcopy,
        gdrcopy_image=driver_image(gdrcopy, {}, "gdrcopy", os_tag=pool.os_tag) if gdrcopy else "",
        extra=additional_configs(
            spec, pool, config_map_keys, openshift=openshift is not None, runtime=runtime
        ),
        dtk=openshift if dtk else None,
        openshift_version=openshift.version if openshift is not None else "",
        cluster_proxy=(openshift.proxy or {}) if openshift is not None and not precompiled else {},
        host_root=host_root,
    )


def _name_or_empty(ref: Any) -> str:
    return str(getattr(ref, "name", "") or "") if ref is not None else ""


def _install_state(p: _Pool) -> DriverInstallState:
    """What NVIDIA's NVIDIADriver state hashes into ``DRIVER_CONFIG_DIGEST``."""
    spec, proxy = p.spec, p.cluster_proxy
    lic = spec.licensing_config
    return DriverInstallState(
        DriverImage=p.image,
        DriverManagerImage=p.manager_image,
        DriverType=spec.driver_type,
        KernelModuleType=spec.kernel_module_type or "",
        DriverArgs=list(spec.args or []),
        SecretEnvSource=spec.secret_env or "",
        DriverEnv=_sorted_env(spec.env),
        ManagerEnv=_sorted_env(spec.manager.env),
        LicensingConfigName=(lic.secret_name or "") if lic is not None else "",
        VirtualTopologyConfig=_name_or_empty(spec.virtual_topology_config),
        KernelModuleConfig=_name_or_empty(spec.kernel_module_config),
        RepoConfig=_name_or_empty(spec.repo_config),
        CertConfig=_name_or_empty(spec.cert_config),
        GPUDirectRDMAEnabled=p.rdma,
        PeermemImage=p.image if p.rdma else "",
        UseHostMOFED=p.host_mofed,
        GDSImage=p.gds_image,
        GDSEnabled=p.gds is not None,
        GDSEnv=_sorted_env(p.gds.env) if p.gds else [],
        GDRCopyImage=p.gdrcopy_image,
        GDRCopyEnabled=p.gdrcopy is not None,
        GDRCopyEnv=_sorted_env(p.gdrcopy.env) if p.gdrcopy else [],
        OpenshiftVersion=p.openshift_version,
        DTKEnabled=p.dtk is not None,
        HTTPProxy=str(proxy.get("httpProxy") or ""),
        HTTPSProxy=str(proxy.get("httpsProxy") or ""),
        NoProxy=str(proxy.get("noProxy") or ""),
        TrustedCAConfigMapName=str((proxy.get("trustedCA") or {}).get("name") or ""),
        DTKImage=p.dtk_image,
        RHCOSVersion=p.rhcos,
        UsePrecompiled=p.precompiled,
        KernelVersion=p.pool.kernel if p.precompiled else "",
        AdditionalVolumeMounts=volume_mounts(p.extra.mounts),
        AdditionalVolumes=volumes(p.extra.volumes),
        HostRoot=p.host_root,
    )


def _labels(p: _Pool) -> tuple[dict[str, str], dict[str, str]]:
    """The DaemonSet's labels and its pods' (user labels last, ``app*`` ones skipped)."""
    labels: dict[str, str] = {
        "app": p.names.app,
        OS_VERSION_LABEL: p.pool.os_tag,
        PRECOMPILED_LABEL: "true" if p.precompiled else "false",
    }
    if p.precompiled:
        labels[KERNEL_VERSION_LABEL] = sanitize_kernel(p.pool.kernel)
    labels[COMPONENT_LABEL] = _component(p.spec)
    pod_labels = dict(labels)
    if p.dtk is not None:
        labels[DTK_RHCOS_LABEL] = p.rhcos
        labels[DTK_LABEL] = pod_labels[DTK_LABEL] = "true"
        if not p.dtk_image:
            labels[DTK_MISSING_LABEL] = pod_labels[DTK_MISSING_LABEL] = "true"
    user = {
        k: v
        for k, v in (p.spec.labels or {}).items()
        if k != "app" and not k.startswith("app.kubernetes.io/")
    }
    return {**labels, **user}, {**pod_labels, **user}


def _node_selector(p: _Pool) -> dict[str, str]:
    deploy = "vgpu-manager" if p.vgpu_host else "driver"
    out = {f"nvidia.com/gpu.deploy.{deploy}": "true", **p.pool.node_selector}
    if p.dtk is not None:
        out[OSTREE_LABEL] = p.rhcos
    if p.precompiled:
        out[KERNEL_LABEL] = p.pool.kernel
    return out


def manager_env_defaults() -> list[dict[str, Any]]:
    """The ``k8s-driver-manager`` container's env before any user setting, in NVIDIA's
    order: the same for a ClusterPolicy's driver and an NVIDIADriver's pools."""
    return [
        field_env("NODE_NAME", "spec.nodeName"),
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        env("ENABLE_GPU_POD_EVICTION", "true"),
        env("ENABLE_AUTO_DRAIN", "false"),
        env("DRAIN_USE_FORCE", "false"),
        env("DRAIN_POD_SELECTOR_LABEL", ""),
        env("DRAIN_TIMEOUT_SECONDS", "0s"),
        env("DRAIN_DELETE_EMPTYDIR_DATA", "false"),
        field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
    ]


def _manager(p: _Pool, digest: str) -> dict[str, Any]:
    """The ``k8s-driver-manager`` init container."""
    manager_env = [*manager_env_defaults(), env("DRIVER_CONFIG_DIGEST", digest)]
    if p.rdma:
        manager_env.append(env("GPU_DIRECT_RDMA_ENABLED", "true"))
        if p.host_mofed:
            manager_env.append(env("USE_HOST_MOFED", "true"))
    manager_env += _user_env(p.spec.manager.env)
    return p.with_resources(
        {
            "name": "k8s-driver-manager",
            "image": p.manager_image,
            "imagePullPolicy": p.spec.manager.image_pull_policy or "IfNotPresent",
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


def _driver_env(p: _Pool, digest: str) -> list[dict[str, Any]]:
    out = [
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        field_env("NODE_NAME", "spec.nodeName"),
        field_env("NODE_IP", "status.hostIP"),
        env("DRIVER_CONFIG_DIGEST", digest),
    ]
    kernel_module_type = p.spec.kernel_module_type or ""
    if kernel_module_type:
        out.append(env("KERNEL_MODULE_TYPE", kernel_module_type))
        if kernel_module_type == "open":
            out.append(env("OPEN_KERNEL_MODULES_ENABLED", "true"))
    if p.gds is not None:
        out.append(env("GDS_ENABLED", "true"))
    if p.gdrcopy is not None:
        out.append(env("GDRCOPY_ENABLED", "true"))
    if p.dtk is not None and p.openshift_version:
        out.append(env("OPENSHIFT_VERSION", p.openshift_version))
    out += _user_env(p.spec.env)
    if p.rdma:
        out.append(env("GPU_DIRECT_RDMA_ENABLED", "true"))
        if p.host_mofed:
            out.append(env("USE_HOST_MOFED", "true"))
    if p.dtk is not None:
        if not p.dtk_image:
            out += [env("RHCOS_IMAGE_MISSING", "true"), env("RHCOS_VERSION", p.rhcos)]
        out += _proxy_env(p.dtk.proxy or {})
    return out


def _driver(p: _Pool, digest: str) -> dict[str, Any]:
    """``nvidia-driver-ctr``: ``init`` and the spec's args (the Driver Toolkit entrypoint on
    OpenShift)."""
    mounts = [
        mount("run-nvidia", "/run/nvidia", propagation=BIDIR),
        mount("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager"),
        mount("run-nvidia-topologyd", "/run/nvidia-topologyd"),
        mount("var-log", "/var/log"),
        mount("dev-log", "/dev/log"),
        mount("host-os-release", "/host-etc/os-release", read_only=True),
    ]
    if p.vgpu_host:
        mounts += [mount("cgroup", "/sys/fs/cgroup"), mount("vfio", "/dev/vfio")]
    mounts += [
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
        *_extra_mounts(p.extra),
    ]
    if p.dtk is not None:
        mounts.append(mount("shared-nvidia-driver-toolkit", "/mnt/shared-nvidia-driver-toolkit"))
        if p.trusted_ca:
            mounts.append(
                mount(TRUSTED_CA_CONFIGMAP, "/etc/pki/ca-trust/extracted/pem", read_only=True)
            )
    dtk = p.dtk is not None
    c: dict[str, Any] = {
        "name": "nvidia-driver-ctr",
        "image": p.image,
        "imagePullPolicy": p.spec.image_pull_policy or "IfNotPresent",
        "command": ["ocp_dtk_entrypoint"] if dtk else ["nvidia-driver"],
        "args": ["nv-ctr-run-with-dtk"] if dtk else ["init", *(p.spec.args or [])],
        "securityContext": json_copy(PRIV_S0),
    }
    if p.spec.secret_env:
        c["envFrom"] = [{"secretRef": {"name": p.spec.secret_env}}]
    c["env"] = _driver_env(p, digest)
    c["volumeMounts"] = mounts
    p.with_resources(c)
    if not p.vgpu_host:
        c["startupProbe"] = _startup_probe(p.spec)
        c["lifecycle"] = {
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
    return c


def _peermem(p: _Pool) -> dict[str, Any]:
    """``nvidia-peermem-ctr`` (GPUDirect RDMA)."""
    peermem_env = [env("NVIDIA_VISIBLE_DEVICES", "void")]
    if p.host_mofed:
        peermem_env.append(env("USE_HOST_MOFED", "true"))
    probe_cmd = ["sh", "-c", "nvidia-driver probe_nvidia_peermem"]
    return p.with_resources(
        {
            "name": "nvidia-peermem-ctr",
            "image": p.image,
            "imagePullPolicy": p.spec.image_pull_policy or "IfNotPresent",
            "command": ["nvidia-driver"],
            "args": ["reload_nvidia_peermem"],
            "securityContext": json_copy(PRIV_S0),
            "env": peermem_env,
            "volumeMounts": [
                mount("run-nvidia", "/run/nvidia", propagation=BIDIR),
                mount("var-log", "/var/log"),
                mount("dev-log", "/dev/log", read_only=True),
                mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation=HTOC),
                *_extra_mounts(p.extra),
            ],
            "startupProbe": _probe(probe_cmd, 10, 10, 10, 120),
            "livenessProbe": _probe(probe_cmd, 30, 30, 10, 1),
        }
    )


@dataclass(frozen=True)
class _SidecarKind:
    container: str
    installer: str
    dtk_arg: str
    module: str
    fixed_pull_policy: str | None


_GDS: Final = _SidecarKind(
    "nvidia-fs-ctr", "nvidia-gds-driver", "nv-fs-ctr-run-with-dtk", "nvidia_fs", "IfNotPresent"
)
_GDRCOPY: Final = _SidecarKind(
    "nvidia-gdrcopy-ctr", "nvidia-gdrcopy-driver", "gdrcopy-ctr-run-with-dtk", "gdrdrv", None
)


def _sidecar(p: _Pool, kind: _SidecarKind, spec: Any, image: str) -> dict[str, Any]:
    """The GDS (``nvidia-fs-ctr``) or GDRCopy (``nvidia-gdrcopy-ctr``) container."""
    c: dict[str, Any] = {
        "name": kind.container,
        "image": image,
        "imagePullPolicy": kind.fixed_pull_policy or spec.image_pull_policy or "IfNotPresent",
    }
    if p.dtk is not None:
        c["command"], c["args"] = ["ocp_dtk_entrypoint"], [kind.dtk_arg]
    else:
        c["command"] = ["bash", "-xc"]
        c["args"] = [WAIT_FOR_DRIVER.format(installer=kind.installer)]
    if spec.env:
        c["env"] = _user_env(spec.env)
    c["securityContext"] = json_copy(PRIV_S0)
    if p.spec.secret_env:
        c["envFrom"] = [{"secretRef": {"name": p.spec.secret_env}}]
    mounts = [
        mount("run-nvidia", "/run/nvidia", propagation=HTOC),
        mount("var-log", "/var/log"),
        mount("dev-log", "/dev/log", read_only=True),
    ]
    if p.dtk is not None:
        mounts.append(mount("shared-nvidia-driver-toolkit", "/mnt/shared-nvidia-driver-toolkit"))
    c["volumeMounts"] = [*mounts, *_extra_mounts(p.extra)]
    p.with_resources(c)
    c["startupProbe"] = _probe(["sh", "-c", f"lsmod | grep {kind.module}"], 10, 10, 10, 120)
    return c


def _toolkit(p: _Pool, digest: str) -> dict[str, Any]:
    """``openshift-driver-toolkit-ctr``: builds the driver with the RHCOS release's toolkit."""
    dtk_env = [
        env("RHCOS_VERSION", p.rhcos),
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        env("DRIVER_CONFIG_DIGEST", digest),
    ]
    if not p.dtk_image:
        dtk_env.append(env("RHCOS_IMAGE_MISSING", "true"))
    if p.gds is not None:
        dtk_env.append(env("GDS_ENABLED", "true"))
    if p.gdrcopy is not None:
        dtk_env.append(env("GDRCOPY_ENABLED", "true"))
    return p.with_resources(
        {
            "name": "openshift-driver-toolkit-ctr",
            "image": p.dtk_image or p.image,
            "imagePullPolicy": "IfNotPresent",
            "command": ["bash", "-xc"],
            "args": [WAIT_FOR_DTK_DIR],
            "securityContext": json_copy(PRIV_S0),
            "env": dtk_env,
            "volumeMounts": [
                mount("shared-nvidia-driver-toolkit", "/mnt/shared-nvidia-driver-toolkit"),
                mount("var-log", "/var/log"),
                mount("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", propagation=HTOC),
                mount("host-os-release", "/host-etc/os-release", read_only=True),
                mount("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
                mount("nv-firmware", "/lib/firmware"),
            ],
        }
    )


def _volumes(p: _Pool) -> list[dict[str, Any]]:
    out = [
        host_path("run-nvidia", "/run/nvidia", DOC),
        host_path("var-log", "/var/log"),
        host_path("dev-log", "/dev/log"),
        host_path("host-os-release", "/etc/os-release"),
    ]
    if p.vgpu_host:
        out += [host_path("cgroup", "/sys/fs/cgroup"), host_path("vfio", "/dev/vfio")]
    ofed_src = "/usr/src" if p.host_mofed else "/run/mellanox/drivers/usr/src"
    out += [
        host_path("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager", DOC),
        host_path("run-nvidia-topologyd", "/run/nvidia-topologyd", DOC),
        host_path("mlnx-ofed-usr-src", ofed_src, DOC),
        host_path("run-mellanox-drivers", "/run/mellanox/drivers", DOC),
        host_path("run-nvidia-validations", "/run/nvidia/validations", DOC),
        host_path("host-root", p.host_root or "/"),
        host_path("host-sys", "/sys", DIR),
        host_path("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
        host_path("host-sys-devices-system", "/sys/devices/system", DIR),
        host_path("nv-firmware", "/run/nvidia/driver/lib/firmware", DOC),
        {
            "name": "driver-startup-probe-script",
            "configMap": {"name": STARTUP_PROBE_CONFIGMAP, "defaultMode": 0o755},
        },
        *p.extra.volumes,
    ]
    if p.dtk is not None:
        out.append({"name": "shared-nvidia-driver-toolkit", "emptyDir": {}})
        if p.trusted_ca:
            out.append(
                {
                    "name": TRUSTED_CA_CONFIGMAP,
                    "configMap": {
                        "name": TRUSTED_CA_CONFIGMAP,
                        "items": [{"key": "ca-bundle.crt", "path": "tls-ca-bundle.pem"}],
                    },
                }
            )
    return out


_ANTI_AFFINITY: Final = {
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


def _pod(p: _Pool, digest: str) -> dict[str, Any]:
    spec = p.spec
    pod: dict[str, Any] = {}
    if p.vgpu_host:
        pod["terminationGracePeriodSeconds"] = 120
    pod["nodeSelector"] = _node_selector(p)
    pod["tolerations"] = [dict(GPU_TOLERATION), *(_toleration(t) for t in spec.tolerations or ())]
    pod["affinity"] = {"podAntiAffinity": json_copy(_ANTI_AFFINITY)}
    if spec.node_affinity:
        pod["affinity"]["nodeAffinity"] = _dump(spec.node_affinity)
    pod["priorityClassName"] = spec.priority_class_name or PRIORITY_CLASS
    pod["serviceAccountName"] = p.names.name
    pod["hostPID"] = True
    if spec.host_network:
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"
    if spec.pod_security_context is not None:
        pod["securityContext"] = _dump(spec.pod_security_context)
    secrets = [
        *(spec.image_pull_secrets or ()),
        *(spec.manager.image_pull_secrets or ()),
        *((p.gds.image_pull_secrets or ()) if p.gds else ()),
        *((p.gdrcopy.image_pull_secrets or ()) if p.gdrcopy else ()),
    ]
    if secrets:
        pod["imagePullSecrets"] = [{"name": s} for s in secrets]
    containers = [_driver(p, digest)]
    if p.rdma:
        containers.append(_peermem(p))
    if p.gds is not None:
        containers.append(_sidecar(p, _GDS, p.gds, p.gds_image))
    if p.gdrcopy is not None:
        containers.append(_sidecar(p, _GDRCOPY, p.gdrcopy, p.gdrcopy_image))
    if p.dtk is not None:
        containers.append(_toolkit(p, digest))
    pod["initContainers"] = [_manager(p, digest)]
    pod["containers"] = containers
    pod["volumes"] = _volumes(p)
    return pod


def _daemonset(p: _Pool) -> dict[str, Any]:
    """The pool's driver DaemonSet."""
    digest = config_digest(_install_state(p))
    labels, pod_labels = _labels(p)
    annotations = {"openshift.io/scc": p.names.name, **(p.spec.annotations or {})}
    pod_annotations = {
        "kubectl.kubernetes.io/default-container": "nvidia-driver-ctr",
        **(p.spec.annotations or {}),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": p.names.app, "labels": labels, "annotations": annotations},
        "spec": {
            "selector": {"matchLabels": {"app": p.names.app}},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"annotations": pod_annotations, "labels": pod_labels},
                "spec": _pod(p, digest),
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
