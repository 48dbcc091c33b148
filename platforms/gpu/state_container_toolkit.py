"""State ``state-container-toolkit``: the NVIDIA Container Toolkit DaemonSet.

Once the driver is validated on a node (``driver-ready``), the toolkit installs
the NVIDIA runtime and registers it with the node's container runtime
(containerd, cri-o or docker) under the RuntimeClass handler ``nvidia``; with
CDI it also writes the CDI specs, and with the NRI plugin it injects GPUs
through NRI instead of a runtime handler.
"""

from __future__ import annotations

import posixpath
from typing import Any

from manifests import configmap
from manifests.meta import object_meta
from platforms.gpu import transforms as t
from platforms.gpu.common import (
    BIDIR,
    DOC,
    HTOC,
    PRIV_S0,
    SOURCE_DRIVER_READY,
    config_map_volume,
    container,
    daemonset,
    env,
    field_env,
    host_path,
    mount,
    policy_rule,
    rbac,
    scc_privileged,
)
from platforms.gpu.context import StateContext
from platforms.gpu.facts import RUNTIME_CONTAINERD, RUNTIME_CRIO, RUNTIME_DOCKER
from platforms.gpu.images import image_path

NAME = "nvidia-container-toolkit"
DAEMONSET = "nvidia-container-toolkit-daemonset"
ENTRYPOINT = "nvidia-container-toolkit-entrypoint"
MAIN = "nvidia-container-toolkit-ctr"
DEFAULT_INSTALL_DIR = "/usr/local/nvidia"
DEFAULT_NRI_SOCKET = "/var/run/nri/nri.sock"

ENTRYPOINT_SCRIPT = (
    """#!/bin/sh
# Wait until the driver is validated on this node, take the driver location it
# reports, then install and configure the toolkit. The pause works around
# containerd >= 1.6.9 sending SIGTERM right after its restart (NVIDIA's delay).
"""
    + SOURCE_DRIVER_READY
    + """set +a
sleep 5
exec nvidia-toolkit
"""
)

ROLE_RULES = [scc_privileged(), policy_rule(["apps"], ["daemonsets"], ["list"])]
"""NVIDIA's toolkit Role (no ClusterRole): the SCC, and listing DaemonSets."""

# Per runtime: (config env var, default top-level config, default drop-in,
# socket env var, default socket). "" means the runtime has none.
RUNTIMES: dict[str, tuple[str, str, str, str, str]] = {
    RUNTIME_CONTAINERD: (
        "CONTAINERD_CONFIG",
        "/etc/containerd/config.toml",
        "/etc/containerd/conf.d/99-nvidia.toml",
        "CONTAINERD_SOCKET",
        "/run/containerd/containerd.sock",
    ),
    RUNTIME_CRIO: (
        "CRIO_CONFIG",
        "/etc/crio/config.toml",
        "/etc/crio/crio.conf.d/99-nvidia.conf",
        "",
        "",
    ),
    RUNTIME_DOCKER: (
        "DOCKER_CONFIG",
        "/etc/docker/daemon.json",
        "",
        "DOCKER_SOCKET",
        "/var/run/docker.sock",
    ),
}


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """RBAC, the entrypoint ConfigMap and the toolkit DaemonSet."""
    out = rbac(ctx, NAME, ROLE_RULES)
    out.append(
        configmap.build(
            object_meta(ENTRYPOINT, labels={"app": DAEMONSET}), {"entrypoint.sh": ENTRYPOINT_SCRIPT}
        )
    )
    ds = t.prepare(_asset(), ctx)
    transform(ds, ctx)
    out.append(t.finish(ds, ctx))
    return out


def driver_validation() -> dict[str, Any]:
    """The init container that waits for (and checks) the driver on the node."""
    sc = {**PRIV_S0, "runAsUser": 0}
    return container(
        "driver-validation",
        command=["sh", "-c"],
        args=["nvidia-validator"],
        env_vars=[
            env("WITH_WAIT", "true"),
            env("COMPONENT", "driver"),
            field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
        ],
        security_context=sc,
        mounts=[
            mount("driver-install-dir", "/run/nvidia/driver", propagation=HTOC),
            mount("run-nvidia-validations", "/run/nvidia/validations", propagation=BIDIR),
            mount("host-root", "/host", read_only=True, propagation=HTOC),
            mount("host-dev-char", "/host-dev-char"),
        ],
    )


def _asset() -> dict[str, Any]:
    main = container(
        MAIN,
        command=["/bin/sh", "-c"],
        args=["/bin/entrypoint.sh"],
        env_vars=[
            env("ROOT", DEFAULT_INSTALL_DIR),
            env("NVIDIA_CONTAINER_RUNTIME_MODES_CDI_DEFAULT_KIND", "management.nvidia.com/gpu"),
            env("NVIDIA_VISIBLE_DEVICES", "void"),
            env("TOOLKIT_PID_FILE", "/run/nvidia/toolkit/toolkit.pid"),
            field_env("NRI_NAMESPACE", "metadata.namespace"),
        ],
        security_context=PRIV_S0,
        mounts=[
            mount(ENTRYPOINT, "/bin/entrypoint.sh", read_only=True, sub_path="entrypoint.sh"),
            mount("toolkit-root", "/run/nvidia/toolkit"),
            mount("run-nvidia-validations", "/run/nvidia/validations"),
            mount("toolkit-install-dir", DEFAULT_INSTALL_DIR),
            mount("crio-hooks", "/usr/share/containers/oci/hooks.d"),
            mount("driver-install-dir", "/driver-root", propagation=HTOC),
            mount("host-root", "/host", read_only=True, propagation=HTOC),
            mount("cdi-root", "/var/run/cdi"),
        ],
    )
    return daemonset(
        DAEMONSET,
        component="container-toolkit",
        annotations={"openshift.io/scc": "hostmount-anyuid"},
        service_account=NAME,
        host_pid=True,
        init_containers=[driver_validation()],
        containers=[main],
        volumes=[
            config_map_volume(ENTRYPOINT, ENTRYPOINT, mode=0o700),
            host_path("toolkit-root", "/run/nvidia/toolkit", DOC),
            host_path("run-nvidia-validations", "/run/nvidia/validations", DOC),
            host_path("driver-install-dir", "/run/nvidia/driver", DOC),
            host_path("host-root", "/"),
            host_path("toolkit-install-dir", DEFAULT_INSTALL_DIR),
            host_path("crio-hooks", "/run/containers/oci/hooks.d"),
            host_path("host-dev-char", "/dev/char"),
            host_path("cdi-root", "/var/run/cdi", DOC),
        ],
    )


def transform(ds: dict[str, Any], ctx: StateContext) -> None:
    """NVIDIA's ``TransformToolkit``."""
    toolkit = ctx.spec.toolkit
    cdi = ctx.spec.cdi
    runtime = ctx.facts.container_runtime
    image = image_path(toolkit, ctx.facts.operator_env, "toolkit")
    c = t.apply_component(ds, toolkit, image=image, main=MAIN, user_env=False)
    if cdi.enabled:
        t.set_env(c, "CDI_ENABLED", "true")
        t.set_env(c, "NVIDIA_RUNTIME_SET_AS_DEFAULT", "false")
        t.set_env(c, "NVIDIA_CONTAINER_RUNTIME_MODE", "cdi")
        t.set_env(c, "CRIO_CONFIG_MODE", "config")
        if cdi.nri_plugin_enabled:
            t.set_env(c, "ENABLE_NRI_PLUGIN", "true")
    elif runtime == RUNTIME_CRIO:
        t.set_env(c, "CRIO_CONFIG_MODE", "hook")
    if toolkit.install_dir and toolkit.install_dir != DEFAULT_INSTALL_DIR:
        t.set_env(c, "ROOT", toolkit.install_dir)
        vol = t.volume(ds, "toolkit-install-dir")
        assert vol is not None
        vol["hostPath"]["path"] = toolkit.install_dir
        for m in c["volumeMounts"]:
            if m["name"] == "toolkit-install-dir":
                m["mountPath"] = toolkit.install_dir
    if runtime == RUNTIME_CRIO and not ctx.openshift:
        hooks = t.volume(ds, "crio-hooks")
        assert hooks is not None
        hooks["hostPath"]["path"] = "/usr/share/containers/oci/hooks.d"
    # User env first, so CONTAINERD_CONFIG and friends pick the host paths below.
    t.set_user_env(c, toolkit.env)
    _runtime(ds, c, ctx, runtime)


def _mount_dir(
    ds: dict[str, Any],
    c: dict[str, Any],
    name: str,
    *,
    host_dir: str,
    ctr_dir: str,
    type_: str | None,
) -> None:
    t.pod_spec(ds)["volumes"].append(host_path(name, host_dir, type_))
    c["volumeMounts"].append(mount(name, ctr_dir))


def _runtime(ds: dict[str, Any], c: dict[str, Any], ctx: StateContext, runtime: str) -> None:
    t.set_env(c, "RUNTIME", runtime)
    if ctx.spec.cdi.nri_plugin_enabled:
        socket = t.get_env(c, "NRI_SOCKET") or DEFAULT_NRI_SOCKET
        t.set_env(c, "NRI_SOCKET", f"/runtime/nri-sock-dir/{posixpath.basename(socket)}")
        _mount_dir(
            ds,
            c,
            "nri-socket",
            host_dir=posixpath.dirname(socket),
            ctr_dir="/runtime/nri-sock-dir/",
            type_=DOC,
        )
        return
    if runtime == RUNTIME_CONTAINERD:
        t.set_env(c, "CONTAINERD_RUNTIME_CLASS", ctx.runtime_class)
    config_env, config, drop_in, socket_env, socket = RUNTIMES.get(
        runtime, RUNTIMES[RUNTIME_CONTAINERD]
    )
    config = t.get_env(c, config_env) or t.get_env(c, "RUNTIME_CONFIG") or config
    in_ctr = f"/runtime/config-dir/{posixpath.basename(config)}"
    t.set_env(c, "RUNTIME_CONFIG", in_ctr)
    t.set_env(c, config_env, in_ctr)
    _mount_dir(
        ds,
        c,
        f"{runtime}-config",
        host_dir=posixpath.dirname(config),
        ctr_dir="/runtime/config-dir/",
        type_=DOC,
    )
    drop_in = t.get_env(c, "RUNTIME_DROP_IN_CONFIG") or drop_in
    if drop_in:
        t.set_env(
            c, "RUNTIME_DROP_IN_CONFIG", f"/runtime/config-dir.d/{posixpath.basename(drop_in)}"
        )
        t.set_env(c, "RUNTIME_DROP_IN_CONFIG_HOST_PATH", drop_in)
        _mount_dir(
            ds,
            c,
            f"{runtime}-drop-in-config",
            host_dir=posixpath.dirname(drop_in),
            ctr_dir="/runtime/config-dir.d/",
            type_=DOC,
        )
    sources = t.get_env(c, "RUNTIME_CONFIG_SOURCE")
    if sources:
        t.set_env(c, "RUNTIME_CONFIG_SOURCE", _host_sources(sources))
    if socket_env:
        socket = t.get_env(c, socket_env) or socket
        in_ctr = f"/runtime/sock-dir/{posixpath.basename(socket)}"
        t.set_env(c, "RUNTIME_SOCKET", in_ctr)
        t.set_env(c, socket_env, in_ctr)
        _mount_dir(
            ds,
            c,
            f"{runtime}-socket",
            host_dir=posixpath.dirname(socket),
            ctr_dir="/runtime/sock-dir/",
            type_=None,
        )


def _host_sources(value: str) -> str:
    """``file=<path>`` entries of RUNTIME_CONFIG_SOURCE read the host's file under /host."""
    out = []
    for entry in value.split(","):
        kind, sep, path = entry.partition("=")
        out.append(f"{kind}=/host{path}" if sep and kind == "file" else entry)
    return ",".join(out)
