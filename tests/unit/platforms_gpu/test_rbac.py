"""Operand RBAC, state by state, as NVIDIA's GPU Operator grants it (its
``assets/state-*/0200_role.yaml``, ``0210_clusterrole.yaml`` and bindings).

The expected rules below are NVIDIA's, written out as data: each rule is
(apiGroups, resources, verbs, resourceNames) in NVIDIA's order, verbs in its
order. A rule more or less than NVIDIA's fails the test (no operand may hold more
than NVIDIA grants it, and one holding less breaks on a real cluster).
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.platforms_gpu.helpers import NS, facts, node, objects, states

Rule = tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...], tuple[str, ...]]

PRIVILEGED: Rule = (
    ("security.openshift.io",),
    ("securitycontextconstraints",),
    ("use",),
    ("privileged",),
)
CLUSTER_VERSIONS: Rule = (("config.openshift.io",), ("clusterversions",), ("get", "list"), ())
NODES_READ: Rule = (("",), ("nodes",), ("get", "list", "watch"), ())
SANDBOX_PLUGIN_ROLE: list[Rule] = [
    PRIVILEGED,
    (("",), ("pods",), ("create", "get", "list", "watch", "delete"), ()),
    (("nfd.k8s-sigs.io",), ("nodefeatures",), ("create", "get", "list", "watch", "update"), ()),
]
SANDBOX_PLUGIN_CLUSTER: list[Rule] = [CLUSTER_VERSIONS, (("",), ("nodes", "pods"), ("get",), ())]

# state -> (ServiceAccount/Role name, Role rules or None, ClusterRole name, ClusterRole rules
# or None, labels of SA/Role/RoleBinding, labels of ClusterRole/ClusterRoleBinding)
NVIDIA: dict[
    str, tuple[str, list[Rule] | None, str, list[Rule] | None, dict[str, str], dict[str, str]]
] = {
    "state-container-toolkit": (
        "nvidia-container-toolkit",
        [PRIVILEGED, (("apps",), ("daemonsets",), ("list",), ())],
        "",
        None,
        {},
        {},
    ),
    "state-operator-validation": (
        "nvidia-operator-validator",
        [
            PRIVILEGED,
            (("",), ("pods",), ("create", "get", "list", "watch", "update", "patch", "delete"), ()),
            (("apps",), ("daemonsets",), ("get", "list", "watch"), ()),
        ],
        "nvidia-operator-validator",
        [
            NODES_READ,
            (
                ("nvidia.com",),
                ("clusterpolicies/finalizers", "nvidiadrivers/finalizers"),
                ("create", "get", "list", "watch", "update", "patch", "delete"),
                (),
            ),
        ],
        {},
        {},
    ),
    "state-device-plugin": (
        "nvidia-device-plugin",
        [PRIVILEGED],
        "nvidia-device-plugin",
        [NODES_READ],
        {},
        {},
    ),
    "state-mps-control-daemon": (
        "nvidia-device-plugin-mps-control-daemon",
        [PRIVILEGED],
        "nvidia-device-plugin-mps-control-daemon",
        [NODES_READ],
        {},
        {},
    ),
    "state-dcgm": ("nvidia-dcgm", [PRIVILEGED], "", None, {}, {}),
    "state-dcgm-exporter": (
        "nvidia-dcgm-exporter",
        [PRIVILEGED, (("",), ("configmaps",), ("get", "list"), ())],
        "nvidia-dcgm-exporter-read-pods",
        [(("",), ("pods",), ("get", "list", "watch"), ())],
        {"app": "nvidia-dcgm-exporter"},
        {"app": "nvidia-dcgm-exporter"},
    ),
    "gpu-feature-discovery": (
        "nvidia-gpu-feature-discovery",
        [
            PRIVILEGED,
            (
                ("nfd.k8s-sigs.io",),
                ("nodefeatures",),
                ("get", "list", "watch", "create", "update"),
                (),
            ),
            (("",), ("pods",), ("get",), ()),
        ],
        "nvidia-gpu-feature-discovery",
        [NODES_READ],
        {},
        {},
    ),
    "state-mig-manager": (
        "nvidia-mig-manager",
        [
            PRIVILEGED,
            (("",), ("pods",), ("get", "list", "watch", "delete"), ()),
            (("",), ("configmaps",), ("create", "get", "list", "update", "patch"), ()),
        ],
        "nvidia-mig-manager",
        [
            (("",), ("nodes",), ("get", "list", "watch", "update", "patch"), ()),
            (("",), ("pods",), ("list",), ()),
        ],
        {},
        {},
    ),
    "state-node-status-exporter": (
        "nvidia-node-status-exporter",
        [
            (("security.openshift.io",), ("securitycontextconstraints",), ("use",), ()),
            (("",), ("pods",), ("get", "list"), ()),
            (("apps",), ("daemonsets",), ("get", "list", "watch"), ()),
        ],
        "nvidia-node-status-exporter",
        [NODES_READ],
        {"app": "nvidia-node-status-exporter"},
        {},
    ),
    "state-vgpu-manager": (
        "nvidia-vgpu-manager",
        [PRIVILEGED],
        "nvidia-vgpu-manager",
        [
            CLUSTER_VERSIONS,
            (("",), ("nodes",), ("get", "list", "patch", "watch"), ()),
            (("",), ("pods",), ("get", "list", "watch"), ()),
            (("",), ("pods/eviction",), ("create",), ()),
            (("apps",), ("daemonsets",), ("get",), ()),
        ],
        {},
        {},
    ),
    "state-vgpu-device-manager": (
        "nvidia-vgpu-device-manager",
        [PRIVILEGED, (("",), ("pods",), ("get", "list", "watch"), ())],
        "nvidia-vgpu-device-manager",
        [CLUSTER_VERSIONS, (("",), ("nodes",), ("get", "list", "watch", "update"), ())],
        {},
        {},
    ),
    "state-sandbox-validation": (
        "nvidia-sandbox-validator",
        [PRIVILEGED],
        "nvidia-sandbox-validator",
        [(("",), ("nodes",), ("get",), ())],
        {},
        {},
    ),
    "state-vfio-manager": (
        "nvidia-vfio-manager",
        [PRIVILEGED],
        "nvidia-vfio-manager",
        [
            CLUSTER_VERSIONS,
            (("",), ("nodes",), ("get", "list", "patch", "watch"), ()),
            (("",), ("pods",), ("get", "list", "watch"), ()),
            (("",), ("pods/eviction",), ("create",), ()),
        ],
        {},
        {},
    ),
    "state-sandbox-device-plugin": (
        "nvidia-sandbox-device-plugin",
        SANDBOX_PLUGIN_ROLE,
        "nvidia-sandbox-device-plugin",
        SANDBOX_PLUGIN_CLUSTER,
        {},
        {},
    ),
    "state-kata-device-plugin": (
        "nvidia-kata-sandbox-device-plugin",
        SANDBOX_PLUGIN_ROLE,
        "nvidia-kata-sandbox-device-plugin",
        SANDBOX_PLUGIN_CLUSTER,
        {},
        {},
    ),
    "state-cc-manager": (
        "nvidia-cc-manager",
        [PRIVILEGED, (("",), ("pods",), ("get", "list", "watch"), ())],
        "nvidia-cc-manager",
        [(("",), ("nodes",), ("get", "list", "patch", "watch"), ())],
        {},
        {},
    ),
}

# ClusterPolicy changes that turn each state on.
EVERYTHING: dict[str, Any] = {
    "dcgm": {"enabled": True},
    "dcgmExporter": {"enablePodLabels": True},
    "nodeStatusExporter": {"enabled": True},
}
KUBEVIRT: dict[str, Any] = {
    "sandboxWorkloads": {"enabled": True, "mode": "kubevirt"},
    "vgpuManager": {"enabled": True, "repository": "r.example", "image": "vgpu", "version": "1"},
}
KATA: dict[str, Any] = {
    "sandboxWorkloads": {"enabled": True, "mode": "kata"},
    "kataSandboxDevicePlugin": {"enabled": True},
    "ccManager": {"enabled": True},
}
VARIANT = {
    **{s: EVERYTHING for s in NVIDIA},
    **{
        s: KUBEVIRT
        for s in (
            "state-vgpu-manager",
            "state-vgpu-device-manager",
            "state-sandbox-validation",
            "state-vfio-manager",
            "state-sandbox-device-plugin",
        )
    },
    **{s: KATA for s in ("state-kata-device-plugin", "state-cc-manager")},
}


def _rules(obj: dict[str, Any]) -> list[Rule]:
    return [
        (
            tuple(r["apiGroups"]),
            tuple(r["resources"]),
            tuple(r["verbs"]),
            tuple(r.get("resourceNames", ())),
        )
        for r in obj["rules"]
    ]


def _state_objects(state: str) -> list[dict[str, Any]]:
    return states(VARIANT[state])[state].objects


def _labels(obj: dict[str, Any]) -> dict[str, str]:
    labels = dict(obj["metadata"].get("labels") or {})
    labels.pop("app.kubernetes.io/managed-by", None)
    return labels


@pytest.mark.parametrize("state", sorted(NVIDIA))
def test_operand_rbac_is_nvidias(state: str) -> None:
    name, role_rules, cluster_name, cluster_rules, labels, cluster_labels = NVIDIA[state]
    rbac = {
        (o["kind"], o["metadata"]["name"]): o
        for o in _state_objects(state)
        if o["kind"]
        in ("ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding")
    }
    expected = {("ServiceAccount", name)}
    if role_rules is not None:
        expected |= {("Role", name), ("RoleBinding", name)}
    if cluster_rules is not None:
        expected |= {("ClusterRole", cluster_name), ("ClusterRoleBinding", cluster_name)}
    assert set(rbac) == expected
    for kind in ("ServiceAccount", "Role", "RoleBinding"):
        if (kind, name) in rbac:
            assert _labels(rbac[kind, name]) == labels, (kind, name)
    if role_rules is not None:
        assert _rules(rbac["Role", name]) == role_rules
        binding = rbac["RoleBinding", name]
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": name,
        }
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NS}]
    if cluster_rules is not None:
        assert _rules(rbac["ClusterRole", cluster_name]) == cluster_rules
        binding = rbac["ClusterRoleBinding", cluster_name]
        assert binding["roleRef"]["name"] == cluster_name
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": NS}]
        for kind in ("ClusterRole", "ClusterRoleBinding"):
            assert _labels(rbac[kind, cluster_name]) == cluster_labels, kind


def test_dcgm_exporter_reads_pods_only_while_metrics_carry_pod_metadata() -> None:
    """NVIDIA gates the read-pods ClusterRole on pod labels/UIDs (fields or env)."""
    plain = {(o["kind"], o["metadata"]["name"]) for o in objects()}
    assert ("ClusterRole", "nvidia-dcgm-exporter-read-pods") not in plain
    by_env = objects(
        {
            "dcgmExporter": {
                "env": [{"name": "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_UID", "value": "true"}]
            }
        }
    )
    assert ("ClusterRoleBinding", "nvidia-dcgm-exporter-read-pods") in {
        (o["kind"], o["metadata"]["name"]) for o in by_env
    }


def test_openshift_monitoring_may_scrape_the_operator() -> None:
    """state-operator-metrics: NVIDIA's prometheus-k8s Role and RoleBinding, OpenShift only."""
    assert not [o for o in objects() if o["metadata"]["name"] == "prometheus-k8s"]
    ocp = facts(node(os_id="rhcos", version="4.16"), openshift="4.16.3")
    found = {
        o["kind"]: o for o in objects(cluster=ocp) if o["metadata"]["name"] == "prometheus-k8s"
    }
    assert set(found) == {"Role", "RoleBinding"}
    assert _rules(found["Role"]) == [
        (("",), ("services", "endpoints", "pods"), ("get", "list", "watch"), ())
    ]
    assert _labels(found["Role"]) == _labels(found["RoleBinding"]) == {"app": "gpu-operator"}
    assert found["RoleBinding"]["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"}
    ]


def test_every_operand_role_grants_only_known_rules() -> None:
    """No operand Role or ClusterRole of any variant holds a rule outside NVIDIA's table."""
    allowed = {
        (kind, name): rules
        for state, (sa, role_rules, cluster, cluster_rules, _, _) in NVIDIA.items()
        for kind, name, rules in (("Role", sa, role_rules), ("ClusterRole", cluster, cluster_rules))
        if rules is not None
    }
    for spec in (EVERYTHING, KUBEVIRT, KATA):
        for obj in objects(spec):
            key = (obj["kind"], obj["metadata"]["name"])
            if obj["kind"] in ("Role", "ClusterRole") and key in allowed:
                assert _rules(obj) == allowed[key], key
