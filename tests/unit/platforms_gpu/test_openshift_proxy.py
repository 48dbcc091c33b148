"""ClusterPolicy's driver on OpenShift: the cluster-wide proxy and trusted CA as NVIDIA's
``applyOCPProxySpec`` applies them (only to a driver built on the node)."""

from __future__ import annotations

from typing import Any

import pytest

from .helpers import ctr, daemonset, facts, node, objects

RHCOS = node(os_id="rhcos", version="4.16")
PROXY = {
    "httpProxy": "http://proxy.example.com:3128",
    "httpsProxy": "http://proxy.example.com:3129",
    "noProxy": ".cluster.local,.svc",
    "trustedCA": {"name": "user-ca-bundle"},
}


def driver(spec: dict[str, Any] | None = None, **cluster: Any) -> dict[str, Any]:
    name = "nvidia-driver-daemonset"
    if spec and spec.get("driver", {}).get("usePrecompiled"):
        found = [o for o in objects(spec, facts(RHCOS, **cluster)) if o["kind"] == "DaemonSet"
                 and o["metadata"]["name"].startswith(name)]  # fmt: skip
        return found[0]
    return daemonset(name, spec, facts(RHCOS, **cluster))


def test_proxy_env_upper_and_lowercase_in_nvidias_order_after_the_openshift_version() -> None:
    env = ctr(driver(openshift="4.16.3", openshift_proxy=PROXY), "nvidia-driver-ctr")["env"]
    names = [e["name"] for e in env]
    tail = names[names.index("OPENSHIFT_VERSION") :]
    assert tail[:7] == [
        "OPENSHIFT_VERSION",
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "NO_PROXY",
        "no_proxy",
    ]
    values = {e["name"]: e.get("value") for e in env}
    assert values["https_proxy"] == PROXY["httpsProxy"]
    assert values["NO_PROXY"] == PROXY["noProxy"]


def test_trusted_ca_configmap_is_created_and_mounted() -> None:
    cluster = facts(RHCOS, openshift="4.16.3", openshift_proxy=PROXY)
    (cm,) = [
        o for o in objects(None, cluster) if o["metadata"]["name"] == "gpu-operator-trusted-ca"
    ]
    assert cm["kind"] == "ConfigMap"
    assert cm["metadata"]["labels"]["config.openshift.io/inject-trusted-cabundle"] == "true"
    assert cm["data"] == {"ca-bundle.crt": ""}
    ds = driver(openshift="4.16.3", openshift_proxy=PROXY)
    mounts = {m["name"]: m for m in ctr(ds, "nvidia-driver-ctr")["volumeMounts"]}
    assert mounts["gpu-operator-trusted-ca"] == {
        "name": "gpu-operator-trusted-ca",
        "mountPath": "/etc/pki/ca-trust/extracted/pem",
        "readOnly": True,
    }
    volumes = {v["name"]: v for v in ds["spec"]["template"]["spec"]["volumes"]}
    assert volumes["gpu-operator-trusted-ca"]["configMap"] == {
        "name": "gpu-operator-trusted-ca",
        "items": [{"key": "ca-bundle.crt", "path": "tls-ca-bundle.pem"}],
    }
    # only the driver container (NVIDIA: names containing "nvidia-driver")
    others = [
        c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] != "nvidia-driver-ctr"
    ]
    assert all("HTTP_PROXY" not in {e["name"] for e in c.get("env") or []} for c in others)


@pytest.mark.parametrize(
    ("spec", "cluster"),
    [
        ({}, {}),  # Kubernetes: a Proxy given for OpenShift is not read there
        ({}, {"openshift_proxy": PROXY}),
        ({"driver": {"usePrecompiled": True}}, {"openshift": "4.16.3", "openshift_proxy": PROXY}),
    ],
    ids=["kubernetes", "kubernetes-with-proxy", "openshift-precompiled"],
)
def test_no_proxy_and_no_openshift_version_elsewhere(
    spec: dict[str, Any], cluster: dict[str, Any]
) -> None:
    ds = driver(spec, **cluster)
    names = {e["name"] for e in ctr(ds, "nvidia-driver-ctr").get("env") or []}
    assert not names & {"OPENSHIFT_VERSION", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"}
    assert "gpu-operator-trusted-ca" not in {
        o["metadata"]["name"] for o in objects(spec, facts(RHCOS, **cluster))
    }


def test_a_proxy_without_trusted_ca_mounts_nothing() -> None:
    proxy = {"httpProxy": "http://p:3128"}
    ds = driver(openshift="4.16.3", openshift_proxy=proxy)
    c = ctr(ds, "nvidia-driver-ctr")
    names = [e["name"] for e in c["env"]]
    at = names.index("OPENSHIFT_VERSION")
    assert names[at : at + 3] == ["OPENSHIFT_VERSION", "HTTP_PROXY", "http_proxy"]
    assert "HTTPS_PROXY" not in names
    assert "gpu-operator-trusted-ca" not in {m["name"] for m in c["volumeMounts"]}
