"""State ``state-driver``: the NVIDIA driver DaemonSet ``nvidia-driver-daemonset``.

The driver container installs the kernel modules on every node labelled
``nvidia.com/gpu.deploy.driver=true``; the k8s-driver-manager init container
first evicts GPU pods and unloads an old driver. The DaemonSet is always
``OnDelete`` (the upgrade controller rolls it node by node) and one driver pod
per node is enforced by a pod anti-affinity. With precompiled drivers there is
one DaemonSet per kernel the GPU nodes run, each pinned to that kernel. The
state is off with a host driver (``driver.enabled: false``) and when
NVIDIADriver objects own the drivers (``driver.useNvidiaDriverCRD``). On
OpenShift a driver built on the node is told ``OPENSHIFT_VERSION`` and gets the
cluster-wide proxy and trusted CA (``platforms.gpu.openshift_proxy``).
"""

from __future__ import annotations

from typing import Any

from api.nvidia.v1.clusterpolicy import ContainerProbeSpec, DriverSpec
from manifests import configmap
from manifests.meta import object_meta
from platforms.gpu import transforms as t
from platforms.gpu.common import (
    BIDIR,
    DIR,
    DOC,
    HTOC,
    PRIV,
    PRIV_S0,
    config_map_volume,
    container,
    daemonset,
    env,
    field_env,
    host_path,
    mount,
    rbac,
)
from platforms.gpu.context import StateContext
from platforms.gpu.errors import RenderError
from platforms.gpu.facts import KERNEL_LABEL, OS_ID_LABEL, OS_VERSION_LABEL, GPUNode
from platforms.gpu.images import driver_image, image_path, pull_policy, sanitize_kernel
from platforms.gpu.nvidiadriver_daemonset import (
    STARTUP_PROBE_SCRIPT,
    WAIT_FOR_DRIVER,
    cluster_rules,
    manager_env_defaults,
    role_rules,
)
from platforms.gpu.nvidiadriver_digest import config_digest, from_pod_spec
from platforms.gpu.openshift_proxy import (
    apply_cluster_proxy,
    trusted_ca_config_map,
    trusted_ca_name,
)

NAME = "nvidia-driver"
DAEMONSET = "nvidia-driver-daemonset"
COMPONENT_LABEL = "app.kubernetes.io/component"
PRECOMPILED_LABEL = "nvidia.com/precompiled"
STARTUP_PROBE_CONFIGMAP = "nvidia-driver-startup-probe"
DRIVER_CTR = "nvidia-driver-ctr"
MANAGER = "k8s-driver-manager"
PEERMEM = "nvidia-peermem-ctr"
GDS = "nvidia-fs-ctr"
GDRCOPY = "nvidia-gdrcopy-ctr"
DTK = "openshift-driver-toolkit-ctr"

REPO_DIRS = {
    "ubuntu": "/etc/apt/sources.list.d",
    "debian": "/etc/apt/sources.list.d",
    "centos": "/etc/yum.repos.d",
    "rhel": "/etc/yum.repos.d",
    "rhcos": "/etc/yum.repos.d",
    "rocky": "/etc/yum.repos.d",
    "ol": "/etc/yum.repos.d",
    "sles": "/etc/zypp/repos.d",
    "sl-micro": "/etc/zypp/repos.d",
}
CERT_DIRS = {
    "ubuntu": "/usr/local/share/ca-certificates",
    "debian": "/usr/local/share/ca-certificates",
    "centos": "/etc/pki/ca-trust/extracted/pem",
    "rhel": "/etc/pki/ca-trust/extracted/pem",
    "rhcos": "/etc/pki/ca-trust/extracted/pem",
    "rocky": "/etc/pki/ca-trust/extracted/pem",
    "ol": "/etc/pki/ca-trust/extracted/pem",
    "sles": "/etc/pki/trust/anchors",
    "sl-micro": "/etc/pki/trust/anchors",
}
# (mount path in the container, host path, hostPath type), sorted by mount path.
RHEL_SUBSCRIPTIONS = (
    ("/run/secrets/etc-pki-entitlement", "/etc/pki/entitlement", "Directory"),
    ("/run/secrets/redhat.repo", "/etc/yum.repos.d/redhat.repo", "File"),
    ("/run/secrets/rhsm", "/etc/rhsm", "Directory"),
)
SLES_SUBSCRIPTIONS = (
    ("/etc/SUSEConnect", "/etc/SUSEConnect", "FileOrCreate"),
    ("/etc/zypp/credentials.d", "/etc/zypp/credentials.d", "Directory"),
)
SUSE = ("sles", "sl-micro")

NODE_RULES = ["get", "list", "watch", "patch", "update"]


def driver_rbac(ctx: StateContext, name: str) -> list[dict[str, Any]]:
    """The driver pods' ServiceAccount and RBAC, all called ``name``, rule for rule as NVIDIA
    grants them (the same rules as an NVIDIADriver pool's)."""
    return rbac(ctx, name, role_rules(), cluster_rules())


def startup_probe_config_map(name: str = STARTUP_PROBE_CONFIGMAP) -> dict[str, Any]:
    """The ConfigMap holding the driver container's startup probe script (NVIDIA's labels)."""
    meta = object_meta(name, labels={"app": DAEMONSET, COMPONENT_LABEL: "nvidia-driver"})
    return configmap.build(meta, {"startup-probe.sh": STARTUP_PROBE_SCRIPT})


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC, the startup-probe ConfigMap and the driver DaemonSet(s)."""
    out = driver_rbac(ctx, NAME)
    out.append(startup_probe_config_map())
    if not ctx.facts.nodes:
        return out  # no GPU node: no OS to build a driver image for, no DaemonSet
    driver = ctx.spec.driver
    if driver.use_precompiled:
        for kernel, node in ctx.facts.kernels().items():
            out.append(driver_daemonset(ctx, node, kernel=kernel))
        missing = [n.name for n in ctx.facts.nodes if not n.kernel]
        if missing:
            raise RenderError(
                f"spec.driver.usePrecompiled: GPU node {missing[0]} has no {KERNEL_LABEL} label "
                "(is Node Feature Discovery running on it?)"
            )
    else:
        if ctx.facts.openshift is not None and trusted_ca_name(ctx.facts.openshift_proxy):
            out.append(trusted_ca_config_map())  # OpenShift fills in the cluster's CA bundle
        out.append(driver_daemonset(ctx, ctx.facts.nodes[0]))
    return out


def require_os(node: GPUNode) -> None:
    """RenderError unless NFD has labelled the node's OS (driver images are per OS)."""
    if not node.os_id or not node.os_version:
        raise RenderError(
            f"GPU node {node.name} has no {OS_ID_LABEL} / {OS_VERSION_LABEL} labels, so the "
            "driver image for its OS cannot be chosen (is Node Feature Discovery running?)"
        )


def driver_daemonset(
    ctx: StateContext, node: GPUNode, *, kernel: str | None = None
) -> dict[str, Any]:
    """The driver DaemonSet for the OS of ``node`` (and ``kernel`` when precompiled)."""
    require_os(node)
    ds = _asset(ctx)
    t.prepare(ds, ctx)
    transform_driver(ds, ctx, node, kernel)
    return t.finish(ds, ctx)


def _asset(ctx: StateContext) -> dict[str, Any]:
    driver = ctx.spec.driver
    use_host_mofed = bool(driver.rdma and driver.rdma.use_host_mofed)
    manager = container(
        MANAGER,
        command=["driver-manager"],
        args=["uninstall_driver"],
        env_vars=manager_env_defaults(),
        security_context=PRIV,
        mounts=[
            mount("run-nvidia", "/run/nvidia", propagation=BIDIR),
            mount("host-root", "/host", read_only=True, propagation=HTOC),
            mount("host-sys", "/sys"),
            mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation=HTOC),
        ],
    )
    driver_ctr = container(
        DRIVER_CTR,
        command=["nvidia-driver"],
        args=["init"],
        env_vars=[field_env("NODE_NAME", "spec.nodeName"), field_env("NODE_IP", "status.hostIP")],
        security_context=PRIV_S0,
        mounts=[
            mount("run-nvidia", "/run/nvidia", propagation=BIDIR),
            mount("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager"),
            mount("run-nvidia-topologyd", "/run/nvidia-topologyd"),
            mount("var-log", "/var/log"),
            mount("dev-log", "/dev/log"),
            mount("host-os-release", "/host-etc/os-release", read_only=True),
            mount("mlnx-ofed-usr-src", "/run/mellanox/drivers/usr/src", propagation=HTOC),
            mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation=HTOC),
            mount("host-sys-devices-system", "/sys/devices/system"),
            mount("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
            mount("nv-firmware", "/lib/firmware"),
            mount(
                "driver-startup-probe-script",
                "/usr/local/bin/startup-probe.sh",
                sub_path="startup-probe.sh",
            ),
        ],
        startupProbe=_exec_probe(["sh", "/usr/local/bin/startup-probe.sh"], 60, 10, 60, 120),
        lifecycle={
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
        },
    )
    peermem = container(
        PEERMEM,
        command=["nvidia-driver"],
        args=["reload_nvidia_peermem"],
        env_vars=[env("USE_HOST_MOFED", "true")] if use_host_mofed else [],
        security_context=PRIV_S0,
        mounts=[
            mount("run-nvidia", "/run/nvidia", propagation=BIDIR),
            mount("var-log", "/var/log"),
            mount("dev-log", "/dev/log", read_only=True),
            mount("run-mellanox-drivers", "/run/mellanox/drivers", propagation=HTOC),
        ],
        startupProbe=_exec_probe(
            ["sh", "-c", "nvidia-driver probe_nvidia_peermem"], 10, 10, 10, 120
        ),
        livenessProbe=_exec_probe(
            ["sh", "-c", "nvidia-driver probe_nvidia_peermem"], 30, 30, 10, 1
        ),
    )
    sidecar_mounts = [
        mount("run-nvidia", "/run/nvidia", propagation=HTOC),
        mount("var-log", "/var/log"),
        mount("dev-log", "/dev/log", read_only=True),
    ]
    gds = container(
        GDS,
        command=["bash", "-xc"],
        args=[_sidecar_script("nvidia-gds-driver")],
        security_context=PRIV_S0,
        mounts=sidecar_mounts,
        startupProbe=_exec_probe(["sh", "-c", "lsmod | grep nvidia_fs"], 10, 10, 10, 120),
    )
    gdrcopy = container(
        GDRCOPY,
        command=["bash", "-xc"],
        args=[_sidecar_script("nvidia-gdrcopy-driver")],
        security_context=PRIV_S0,
        mounts=sidecar_mounts,
        startupProbe=_exec_probe(["sh", "-c", "lsmod | grep gdrdrv"], 10, 10, 10, 120),
    )
    component = {COMPONENT_LABEL: "nvidia-driver"}
    return daemonset(
        DAEMONSET,
        component="driver",
        labels={"app": DAEMONSET, PRECOMPILED_LABEL: "false", **component},
        selector={"app": DAEMONSET},
        pod_labels={PRECOMPILED_LABEL: "false", **component},
        annotations={"openshift.io/scc": NAME},
        pod_annotations={"kubectl.kubernetes.io/default-container": DRIVER_CTR},
        service_account=NAME,
        host_pid=True,
        update_strategy={"type": "OnDelete"},
        init_containers=[manager],
        containers=[driver_ctr, peermem, gds, gdrcopy],
        volumes=[
            host_path("run-nvidia", "/run/nvidia", DOC),
            host_path("var-log", "/var/log"),
            host_path("dev-log", "/dev/log"),
            host_path("host-os-release", "/etc/os-release"),
            host_path("run-nvidia-fabricmanager", "/run/nvidia-fabricmanager", DOC),
            host_path("run-nvidia-topologyd", "/run/nvidia-topologyd", DOC),
            host_path(
                "mlnx-ofed-usr-src",
                "/usr/src" if use_host_mofed else "/run/mellanox/drivers/usr/src",
                DOC,
            ),
            host_path("run-mellanox-drivers", "/run/mellanox/drivers", DOC),
            host_path("run-nvidia-validations", "/run/nvidia/validations", DOC),
            host_path("host-root", "/"),
            host_path("host-sys", "/sys", DIR),
            host_path("firmware-search-path", "/sys/module/firmware_class/parameters/path"),
            host_path("host-sys-devices-system", "/sys/devices/system", DIR),
            host_path("nv-firmware", "/run/nvidia/driver/lib/firmware", DOC),
            config_map_volume("driver-startup-probe-script", STARTUP_PROBE_CONFIGMAP, mode=0o755),
        ],
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "labelSelector": {
                            "matchExpressions": [
                                {
                                    "key": COMPONENT_LABEL,
                                    "operator": "In",
                                    "values": ["nvidia-driver"],
                                }
                            ]
                        },
                        "topologyKey": "kubernetes.io/hostname",
                    }
                ]
            }
        },
    )


def _sidecar_script(installer: str) -> str:
    """NVIDIA's wait-for-the-driver command line, word for word (a different string is a pod
    template change on a cluster NVIDIA's operator set up)."""
    return WAIT_FOR_DRIVER.format(installer=installer)


def _exec_probe(
    command: list[str], initial_delay: int, period: int, timeout: int, failure: int
) -> dict[str, Any]:
    return {
        "exec": {"command": command},
        "initialDelaySeconds": initial_delay,
        "periodSeconds": period,
        "timeoutSeconds": timeout,
        "failureThreshold": failure,
        "successThreshold": 1,
    }


def _override_probe(c: dict[str, Any], key: str, spec: ContainerProbeSpec | None) -> None:
    """Only the non-zero timing fields of the ClusterPolicy probe change the asset's."""
    probe = c.get(key)
    if spec is None or probe is None:
        return
    for field, value in (
        ("initialDelaySeconds", spec.initial_delay_seconds),
        ("timeoutSeconds", spec.timeout_seconds),
        ("failureThreshold", spec.failure_threshold),
        ("successThreshold", spec.success_threshold),
        ("periodSeconds", spec.period_seconds),
    ):
        if value:
            probe[field] = value


def transform_driver(
    ds: dict[str, Any], ctx: StateContext, node: GPUNode, kernel: str | None
) -> None:
    """NVIDIA's ``TransformDriver``, step by step."""
    driver = ctx.spec.driver
    facts = ctx.facts
    env_map = facts.operator_env
    precompiled = bool(driver.use_precompiled)
    rdma = bool(driver.rdma and driver.rdma.enabled)
    use_host_mofed = bool(driver.rdma and driver.rdma.use_host_mofed)
    gds_on = ctx.spec.gds is not None and ctx.spec.gds.is_enabled()
    gdrcopy_on = ctx.spec.gdrcopy is not None and ctx.spec.gdrcopy.is_enabled()
    os_tag = node.os_tag

    # 1. the driver manager init container
    manager = t.find(ds, MANAGER)
    assert manager is not None
    manager["image"] = image_path(driver.manager, env_map, "driver.manager")
    if driver.manager.image_pull_policy:
        manager["imagePullPolicy"] = pull_policy(driver.manager.image_pull_policy)
    if driver.resources is not None:
        manager["resources"] = t.dump(driver.resources)
    if rdma:
        t.set_env(manager, "GPU_DIRECT_RDMA_ENABLED", "true")
        if use_host_mofed:
            t.set_env(manager, "USE_HOST_MOFED", "true")
    t.set_user_env(manager, driver.manager.env)
    t.add_pull_secrets(ds, driver.manager.image_pull_secrets)

    # 2. the driver container
    image = driver_image(driver, env_map, "driver", os_tag=os_tag, kernel=kernel)
    ctr = t.apply_component(ds, driver, image=image, main=DRIVER_CTR, user_env=False)
    if driver.kernel_module_type:
        t.set_env(ctr, "KERNEL_MODULE_TYPE", driver.kernel_module_type)
    if driver.kernel_module_type == "open" or (
        driver.kernel_module_type == "auto" and driver.use_open_kernel_modules
    ):
        t.set_env(ctr, "OPEN_KERNEL_MODULES_ENABLED", "true")
    _override_probe(ctr, "startupProbe", driver.startup_probe)
    _override_probe(ctr, "livenessProbe", driver.liveness_probe)
    _override_probe(ctr, "readinessProbe", driver.readiness_probe)
    if gdrcopy_on:
        t.set_env(ctr, "GDRCOPY_ENABLED", "true")
    if gds_on:
        t.set_env(ctr, "GDS_ENABLED", "true")
    if rdma:
        t.set_env(ctr, "GPU_DIRECT_RDMA_ENABLED", "true")
        if use_host_mofed:
            t.set_env(ctr, "USE_HOST_MOFED", "true")

    _licensing(ds, ctr, driver)  # 3
    _virtual_topology(ds, ctr, driver)  # 4
    _kernel_module_config(ds, ctr, ctx)  # 5
    t.set_user_env(t.pod_spec(ds)["containers"][0], driver.env)  # 6
    if precompiled and node.os_id in SUSE:  # 7
        t.pod_spec(ds)["volumes"].append(host_path("lib-modules", "/lib/modules", DIR))
        ctr.setdefault("volumeMounts", []).append(
            mount("lib-modules", "/run/host/lib/modules", read_only=True)
        )
    if not precompiled:
        _repo_config(ds, ctr, ctx, node)  # 8
        _cert_config(ds, ctr, ctx, node)  # 9
        if driver.secret_env:  # 10
            ctr["envFrom"] = [{"secretRef": {"name": driver.secret_env}}]
        _subscriptions(ds, ctr, ctx, node)  # 11
    if ctx.facts.openshift is not None and not precompiled:  # 12
        t.set_env(ctr, "OPENSHIFT_VERSION", ctx.facts.openshift)
        apply_cluster_proxy(ds, ctx.facts.openshift_proxy)

    # 13. optional sidecars
    if precompiled and (gds_on or gdrcopy_on):
        which = "GPUDirect Storage (spec.gds)" if gds_on else "GDRCopy (spec.gdrcopy)"
        raise RenderError(f"{which} is not supported along with pre-compiled NVIDIA drivers")
    _sidecar(ds, ctx, PEERMEM, on=rdma, image=image)
    _sidecar(ds, ctx, GDS, on=gds_on, field="gds", os_tag=os_tag)
    _sidecar(ds, ctx, GDRCOPY, on=gdrcopy_on, field="gdrcopy", os_tag=os_tag)
    t.remove_containers(ds, DTK)

    # 14. the digest the upgrade controller compares to restart instead of reinstall
    digest = _config_digest(ds)
    for name in (MANAGER, DRIVER_CTR, DTK):
        c = t.find(ds, name)
        if c is not None:
            t.set_env(c, "DRIVER_CONFIG_DIGEST", digest)
    t.apply_host_network(ds, driver.host_network)  # 15

    if kernel is not None:  # 16. one DaemonSet per kernel
        name = f"{DAEMONSET}-{sanitize_kernel(kernel)}-{os_tag}"
        ds["metadata"]["name"] = name
        for labels in (ds["metadata"]["labels"], ds["spec"]["template"]["metadata"]["labels"]):
            labels[PRECOMPILED_LABEL] = "true"
        t.pod_spec(ds)["nodeSelector"][KERNEL_LABEL] = kernel


def _sidecar(
    ds: dict[str, Any],
    ctx: StateContext,
    name: str,
    *,
    on: bool,
    image: str = "",
    field: str = "",
    os_tag: str = "",
) -> None:
    if not on:
        t.remove_containers(ds, name)
        return
    c = t.find(ds, name)
    assert c is not None
    if field:
        spec = ctx.spec.gds if field == "gds" else ctx.spec.gdrcopy
        assert spec is not None
        c["image"] = driver_image(spec, ctx.facts.operator_env, field, os_tag=os_tag)
        c["imagePullPolicy"] = pull_policy(spec.image_pull_policy)
        t.add_pull_secrets(ds, spec.image_pull_secrets)
        t.set_user_env(c, spec.env)
    else:
        c["image"] = image
        c["imagePullPolicy"] = pull_policy(ctx.spec.driver.image_pull_policy)


def _licensing(ds: dict[str, Any], ctr: dict[str, Any], driver: DriverSpec) -> None:
    lic = driver.licensing_config
    if lic is None or not (lic.secret_name or lic.config_map_name):
        return
    items = [{"key": "gridd.conf", "path": "gridd.conf"}]
    if lic.nls_enabled:
        token = "client_configuration_token.tok"
        items.append({"key": token, "path": token})
    if lic.secret_name:
        vol: dict[str, Any] = {
            "name": "licensing-config",
            "secret": {"secretName": lic.secret_name, "items": items},
        }
    else:
        vol = {
            "name": "licensing-config",
            "configMap": {"name": lic.config_map_name, "items": items},
        }
    t.pod_spec(ds)["volumes"].append(vol)
    mounts = ctr.setdefault("volumeMounts", [])
    mounts.append(
        mount("licensing-config", "/drivers/gridd.conf", read_only=True, sub_path="gridd.conf")
    )
    if lic.nls_enabled:
        mounts.append(
            mount(
                "licensing-config",
                "/drivers/ClientConfigToken/client_configuration_token.tok",
                read_only=True,
                sub_path="client_configuration_token.tok",
            )
        )


def _virtual_topology(ds: dict[str, Any], ctr: dict[str, Any], driver: DriverSpec) -> None:
    topo = driver.virtual_topology
    if topo is None or not topo.config:
        return
    key = "nvidia-topologyd.conf"
    t.pod_spec(ds)["volumes"].append(
        config_map_volume("topology-config", topo.config, items=[{"key": key, "path": key}])
    )
    ctr.setdefault("volumeMounts", []).append(
        mount("topology-config", "/etc/nvidia/nvidia-topologyd.conf", read_only=True, sub_path=key)
    )


def _config_map_keys(ctx: StateContext, name: str, field: str) -> tuple[str, ...]:
    keys = ctx.facts.config_map_keys.get(name)
    if keys is None:
        raise RenderError(
            f"spec.{field}: ConfigMap {name} not found in namespace {ctx.namespace}; "
            "create it there first"
        )
    return keys


def _files_from_config_map(
    ds: dict[str, Any],
    ctr: dict[str, Any],
    *,
    volume: str,
    config_map: str,
    keys: tuple[str, ...],
    directory: str,
) -> None:
    t.pod_spec(ds)["volumes"].append(
        config_map_volume(volume, config_map, items=[{"key": k, "path": k} for k in keys])
    )
    mounts = ctr.setdefault("volumeMounts", [])
    for key in keys:
        mounts.append(mount(volume, f"{directory}/{key}", read_only=True, sub_path=key))


def _kernel_module_config(ds: dict[str, Any], ctr: dict[str, Any], ctx: StateContext) -> None:
    cfg = ctx.spec.driver.kernel_module_config
    if cfg is not None and cfg.name:
        config_map_files(ds, ctr, ctx, name=cfg.name, field="driver.kernelModuleConfig.name")


def config_map_files(
    ds: dict[str, Any], ctr: dict[str, Any], ctx: StateContext, *, name: str, field: str
) -> None:
    """Kernel module parameters: each key of ConfigMap ``name`` as ``/drivers/<key>``."""
    keys = _config_map_keys(ctx, name, field)
    _files_from_config_map(ds, ctr, volume=name, config_map=name, keys=keys, directory="/drivers")


def _repo_config(ds: dict[str, Any], ctr: dict[str, Any], ctx: StateContext, node: GPUNode) -> None:
    cfg = ctx.spec.driver.repo_config
    if cfg is None or not cfg.config_map_name:
        return
    directory = REPO_DIRS.get(node.os_id)
    if directory is None:
        raise RenderError(
            f"spec.driver.repoConfig: custom repositories are not supported on OS {node.os_id!r} "
            f"(node {node.name}); supported: {', '.join(sorted(REPO_DIRS))}"
        )
    keys = _config_map_keys(ctx, cfg.config_map_name, "driver.repoConfig.configMapName")
    _files_from_config_map(
        ds,
        ctr,
        volume="repo-config",
        config_map=cfg.config_map_name,
        keys=keys,
        directory=directory,
    )


def _cert_config(ds: dict[str, Any], ctr: dict[str, Any], ctx: StateContext, node: GPUNode) -> None:
    cfg = ctx.spec.driver.cert_config
    if cfg is None or not cfg.name:
        return
    directory = CERT_DIRS.get(node.os_id)
    if directory is None:
        raise RenderError(
            f"spec.driver.certConfig: custom certificates are not supported on OS {node.os_id!r} "
            f"(node {node.name}); supported: {', '.join(sorted(CERT_DIRS))}"
        )
    keys = _config_map_keys(ctx, cfg.name, "driver.certConfig.name")
    _files_from_config_map(
        ds, ctr, volume="cert-config", config_map=cfg.name, keys=keys, directory=directory
    )


def _subscriptions(
    ds: dict[str, Any], ctr: dict[str, Any], ctx: StateContext, node: GPUNode
) -> None:
    driver = ctx.spec.driver
    if node.os_id == "rhel":
        has_repo = driver.repo_config is not None and bool(driver.repo_config.config_map_name)
        if ctx.facts.openshift is not None or ctx.facts.container_runtime == "crio" or has_repo:
            return
        entries: tuple[tuple[str, str, str], ...] = RHEL_SUBSCRIPTIONS
    elif node.os_id in SUSE:
        entries = SLES_SUBSCRIPTIONS
    else:
        return
    for i, (ctr_path, host, kind) in enumerate(entries):
        name = f"subscription-config-{i}"
        t.pod_spec(ds)["volumes"].append(host_path(name, host, kind))
        ctr.setdefault("volumeMounts", []).append(mount(name, ctr_path, read_only=True))


def _config_digest(ds: dict[str, Any]) -> str:
    """NVIDIA's ``DRIVER_CONFIG_DIGEST`` of the transformed pod spec (``nvidiadriver_digest``)."""
    return config_digest(from_pod_spec(t.pod_spec(ds)))
