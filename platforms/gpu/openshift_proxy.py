"""OpenShift's cluster-wide proxy on the ClusterPolicy's driver, as NVIDIA's operator applies it.

On OpenShift, for a driver that is built on the node (not precompiled), NVIDIA
reads the ``cluster`` Proxy and:

- appends its ``httpsProxy``, ``httpProxy`` and ``noProxy`` to every container
  whose name contains ``nvidia-driver`` as ``HTTPS_PROXY``/``https_proxy``,
  ``HTTP_PROXY``/``http_proxy`` and ``NO_PROXY``/``no_proxy`` (in that order,
  empty ones left out), so the driver build can reach package repositories;
- when the Proxy names a ``trustedCA``, creates the ``gpu-operator-trusted-ca``
  ConfigMap labelled ``config.openshift.io/inject-trusted-cabundle=true`` (OpenShift
  fills in ``ca-bundle.crt``) and mounts its bundle as
  ``/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem`` in those containers.

Pure: the Proxy's spec comes in ``ClusterFacts.openshift_proxy``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from manifests import configmap
from manifests.meta import object_meta
from nimctl_runtime.meta import Obj
from platforms.gpu.common import config_map_volume, env, mount

TRUSTED_CA_CONFIGMAP: Final = "gpu-operator-trusted-ca"
TRUSTED_CA_KEY: Final = "ca-bundle.crt"
TRUSTED_CA_DIR: Final = "/etc/pki/ca-trust/extracted/pem"
TRUSTED_CA_FILE: Final = "tls-ca-bundle.pem"
INJECT_LABEL: Final = "config.openshift.io/inject-trusted-cabundle"
DRIVER_CONTAINER_MARK: Final = "nvidia-driver"

__all__ = ["TRUSTED_CA_CONFIGMAP", "apply_cluster_proxy", "proxy_env", "trusted_ca_config_map"]


def proxy_env(proxy: Mapping[str, Any]) -> list[Obj]:
    """NVIDIA's ``getProxyEnv``: upper- and lowercase, sorted by name, empty ones left out."""
    out: list[Obj] = []
    for name, key in (("HTTPS_PROXY", "httpsProxy"), ("HTTP_PROXY", "httpProxy"),
                      ("NO_PROXY", "noProxy")):  # fmt: skip
        value = str(proxy.get(key) or "")
        if value:
            out += [env(name, value), env(name.lower(), value)]
    return out


def trusted_ca_name(proxy: Mapping[str, Any] | None) -> str:
    """The ConfigMap the Proxy's ``trustedCA`` names ("" without one)."""
    return str(((proxy or {}).get("trustedCA") or {}).get("name") or "")


def trusted_ca_config_map() -> Obj:
    """The ConfigMap OpenShift injects the cluster's trusted CA bundle into."""
    meta = object_meta(TRUSTED_CA_CONFIGMAP, labels={INJECT_LABEL: "true"})
    return configmap.build(meta, {TRUSTED_CA_KEY: ""})


def apply_cluster_proxy(ds: Obj, proxy: Mapping[str, Any] | None) -> None:
    """The proxy env and trusted-CA mount on the driver DaemonSet's driver container(s)."""
    if proxy is None:
        return
    pod = ds["spec"]["template"]["spec"]
    trusted = bool(trusted_ca_name(proxy))
    for c in pod.get("containers") or []:
        if DRIVER_CONTAINER_MARK not in str(c.get("name", "")):
            continue
        c.setdefault("env", []).extend(proxy_env(proxy))
        if not trusted:
            continue
        c.setdefault("volumeMounts", []).append(
            mount(TRUSTED_CA_CONFIGMAP, TRUSTED_CA_DIR, read_only=True)
        )
        pod.setdefault("volumes", []).append(
            config_map_volume(
                TRUSTED_CA_CONFIGMAP,
                TRUSTED_CA_CONFIGMAP,
                items=[{"key": TRUSTED_CA_KEY, "path": TRUSTED_CA_FILE}],
            )
        )
