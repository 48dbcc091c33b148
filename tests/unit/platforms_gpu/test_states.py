"""The 20 states: NVIDIA's names and order, enable rules, and what every object carries."""

from __future__ import annotations

from typing import Any

import pytest

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from manifests.hashing import LAST_APPLIED_HASH_ANNOTATION, desired_hash
from platforms.gpu import ORPHAN, STATE_NAMES, ClusterFacts, RenderError, owned_kinds, render
from platforms.gpu.facts import SERVICE_MONITOR
from tests.unit.platforms.helpers import assert_valid_k8s

from .helpers import NS, UID, facts, node, objects, policy, states

NVIDIA_STATES = [
    "pre-requisites",
    "state-operator-metrics",
    "state-driver",
    "state-container-toolkit",
    "state-operator-validation",
    "state-device-plugin",
    "state-mps-control-daemon",
    "state-dcgm",
    "state-dcgm-exporter",
    "gpu-feature-discovery",
    "state-mig-manager",
    "state-node-status-exporter",
    "state-vgpu-manager",
    "state-vgpu-device-manager",
    "state-sandbox-validation",
    "state-vfio-manager",
    "state-sandbox-device-plugin",
    "state-kata-device-plugin",
    "state-kata-manager",
    "state-cc-manager",
]
SAMPLE_ENABLED = {
    "pre-requisites",
    "state-operator-metrics",
    "state-driver",
    "state-container-toolkit",
    "state-operator-validation",
    "state-device-plugin",
    "state-mps-control-daemon",
    "state-dcgm-exporter",
    "gpu-feature-discovery",
    "state-mig-manager",
}
SANDBOX: dict[str, Any] = {"sandboxWorkloads": {"enabled": True}}
KATA: dict[str, Any] = {"sandboxWorkloads": {"enabled": True, "mode": "kata"}}


def test_state_names_are_nvidias_twenty_in_order() -> None:
    assert list(STATE_NAMES) == NVIDIA_STATES
    assert [s.name for s in render(policy(), facts())] == NVIDIA_STATES


def test_nvidias_sample_enables_the_container_stack() -> None:
    enabled = {n for n, s in states().items() if s.enabled}
    assert enabled == SAMPLE_ENABLED


@pytest.mark.parametrize(
    ("spec", "turned_on", "turned_off"),
    [
        ({"driver": {"enabled": False}}, set(), {"state-driver"}),
        ({"driver": {"useNvidiaDriverCRD": True}}, set(), {"state-driver"}),
        ({"toolkit": {"enabled": False}}, set(), {"state-container-toolkit"}),
        (
            {"devicePlugin": {"enabled": False}},
            set(),
            {"state-device-plugin", "state-mps-control-daemon"},
        ),
        ({"dcgm": {"enabled": True}}, {"state-dcgm"}, set()),
        ({"dcgmExporter": {"enabled": False}}, set(), {"state-dcgm-exporter"}),
        ({"gfd": {"enabled": False}}, set(), {"gpu-feature-discovery"}),
        ({"migManager": {"enabled": False}}, set(), {"state-mig-manager"}),
        ({"nodeStatusExporter": {"enabled": True}}, {"state-node-status-exporter"}, set()),
        ({"cdi": {"nriPluginEnabled": True}}, set(), {"pre-requisites"}),
        # Sandbox on (kubevirt): the sample enables vgpuDeviceManager, vfioManager and the
        # sandbox device plugin; vgpuManager and ccManager stay off.
        (
            SANDBOX,
            {
                "state-vgpu-device-manager",
                "state-sandbox-validation",
                "state-vfio-manager",
                "state-sandbox-device-plugin",
            },
            set(),
        ),
        (
            {
                **SANDBOX,
                "vgpuManager": {
                    "enabled": True,
                    "repository": "r",
                    "image": "vgpu",
                    "version": "1",
                },
            },
            {
                "state-vgpu-manager",
                "state-vgpu-device-manager",
                "state-sandbox-validation",
                "state-vfio-manager",
                "state-sandbox-device-plugin",
            },
            set(),
        ),
        (
            {**KATA, "ccManager": {"enabled": True}},
            {
                "state-vgpu-device-manager",
                "state-sandbox-validation",
                "state-vfio-manager",
                "state-kata-device-plugin",
                "state-cc-manager",
            },
            set(),
        ),
        # ccManager needs the kata mode; kata-manager is never on.
        (
            {**SANDBOX, "ccManager": {"enabled": True}, "kataManager": {"enabled": True}},
            {
                "state-vgpu-device-manager",
                "state-sandbox-validation",
                "state-vfio-manager",
                "state-sandbox-device-plugin",
            },
            set(),
        ),
        # vgpuManager is skipped like the driver when NVIDIADriver owns drivers.
        (
            {
                **SANDBOX,
                "driver": {"useNvidiaDriverCRD": True},
                "vgpuManager": {
                    "enabled": True,
                    "repository": "r",
                    "image": "vgpu",
                    "version": "1",
                },
            },
            {
                "state-vgpu-device-manager",
                "state-sandbox-validation",
                "state-vfio-manager",
                "state-sandbox-device-plugin",
            },
            {"state-driver"},
        ),
    ],
)
def test_enable_conditions(spec: dict[str, Any], turned_on: set[str], turned_off: set[str]) -> None:
    rendered = states(spec)
    enabled = {n for n, s in rendered.items() if s.enabled}
    assert enabled == (SAMPLE_ENABLED | turned_on) - turned_off
    for name in set(NVIDIA_STATES) - enabled:
        assert rendered[name].objects == [], f"disabled {name} must have no objects"


def test_unset_enabled_uses_nvidias_code_defaults() -> None:
    doc_spec: dict[str, Any] = {
        "operator": {},
        "daemonsets": {},
        "driver": {},
        "toolkit": {},
        "devicePlugin": {},
        "dcgm": {},
        "dcgmExporter": {},
        "gfd": {},
        "nodeStatusExporter": {},
    }
    bare = ClusterPolicy.model_validate(
        {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "metadata": {"name": "p"},
            "spec": doc_spec,
        }
    )
    enabled = {s.name for s in render(bare, facts()) if s.enabled}
    # nil means on for the driver, toolkit, device plugin, DCGM (unlike Helm), exporter,
    # GFD and MIG manager; off for the node status exporter and the sandbox.
    assert enabled == SAMPLE_ENABLED | {"state-dcgm"}


def test_driver_owned_by_nvidiadriver_is_deleted_orphaning_its_pods() -> None:
    driver = states({"driver": {"useNvidiaDriverCRD": True}})["state-driver"]
    assert (driver.enabled, driver.objects, driver.propagation) == (False, [], ORPHAN)
    assert states()["state-driver"].propagation != ORPHAN


def test_every_object_is_owned_labelled_hashed_and_in_the_operator_namespace() -> None:
    objs = objects({"dcgm": {"enabled": True}, "nodeStatusExporter": {"enabled": True}})
    assert objs
    for obj in objs:
        meta = obj["metadata"]
        where = f"{obj['kind']}/{meta['name']}"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "k8s-nim-operator", where
        (ref,) = meta["ownerReferences"]
        assert ref == {
            "apiVersion": "nvidia.com/v1",
            "kind": "ClusterPolicy",
            "name": "cluster-policy",
            "uid": UID,
            "controller": True,
            "blockOwnerDeletion": True,
        }, where
        assert meta["annotations"][LAST_APPLIED_HASH_ANNOTATION] == desired_hash(obj), where
        cluster_scoped = obj["kind"] in {"ClusterRole", "ClusterRoleBinding", "RuntimeClass"}
        assert meta.get("namespace") == (None if cluster_scoped else NS), where


def test_rendered_objects_are_valid_kubernetes() -> None:
    spec = {
        "dcgm": {"enabled": True},
        "nodeStatusExporter": {"enabled": True},
        "devicePlugin": {"config": {"name": "plugin-config", "default": "any"}},
        "dcgmExporter": {"enablePodLabels": True, "hpcJobMapping": {"enabled": True}},
    }
    assert_valid_k8s(objects(spec))
    sandbox = {**SANDBOX, "ccManager": {"enabled": True}}
    assert_valid_k8s(objects(sandbox))
    driver = {
        "driver": {
            "rdma": {"enabled": True},
            "licensingConfig": {"secretName": "lic", "nlsEnabled": True},
            "secretEnv": "env",
            "kernelModuleConfig": {"name": "kmod"},
        },
        "gds": {"enabled": True},
        "gdrcopy": {"enabled": True},
        "daemonsets": {"updateStrategy": "OnDelete"},
        "hostPaths": {"rootFS": "/host-fs", "driverInstallDir": "/opt/nvidia"},
    }
    rhel = facts(node(os_id="rhel", version="9.4"), config_map_keys={"kmod": ["a.conf"]})
    assert_valid_k8s(objects(driver, rhel))
    precompiled = {"driver": {"usePrecompiled": True}}
    two_kernels = facts(
        node("a", kernel="5.15.0-1"), node("b", kernel="6.8.0-1"), openshift="4.16.3"
    )
    assert_valid_k8s(objects(precompiled, two_kernels))


def test_render_is_deterministic_and_leaves_no_trace() -> None:
    first = objects()
    assert objects() == first
    # A render that rewrites volumes, mounts, security contexts and env must not leak
    # into the shared building blocks the next render starts from.
    objects(
        {
            "hostPaths": {"rootFS": "/host-fs", "driverInstallDir": "/opt/nvidia"},
            "toolkit": {"installDir": "/opt/tk"},
            "devicePlugin": {"config": {"name": "cfg"}, "mps": {"root": "/mps"}},
            "validator": {"driver": {"env": [{"name": "X", "value": "1"}]}},
            "daemonsets": {"podSecurityContext": {"runAsUser": 7}},
        }
    )
    assert objects() == first


def test_no_gpu_node_renders_no_daemonset_but_everything_else() -> None:
    empty = ClusterFacts.from_nodes([node("cpu", gpu=False)], operator_namespace=NS)
    objs = objects(cluster=empty)
    assert "DaemonSet" not in {o["kind"] for o in objs}
    assert {"ServiceAccount", "ConfigMap", "RuntimeClass", "Service"} <= {o["kind"] for o in objs}


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"cdi": {"enabled": False, "nriPluginEnabled": True}},
            "the NRI Plugin cannot be enabled when CDI is disabled",
        ),
        (
            {"cdi": {"nriPluginEnabled": True}, "toolkit": {"enabled": False}},
            "the NRI Plugin cannot be enabled when the NVIDIA Container Toolkit is disabled",
        ),
        (
            {"driver": {"repository": "nvcr.io/nvidia", "image": "driver", "version": None}},
            "state-driver: spec.driver: invalid image specification",
        ),
        (
            {"daemonsets": {"rollingUpdate": {"maxUnavailable": "one"}}},
            "spec.daemonsets.rollingUpdate.maxUnavailable: 'one' is neither a number",
        ),
    ],
)
def test_contradictions_are_errors_naming_the_field(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(RenderError, match=message):
        render(policy(spec), facts())


def test_missing_os_labels_name_the_node() -> None:
    bare = node()
    del bare["metadata"]["labels"]["feature.node.kubernetes.io/system-os_release.VERSION_ID"]
    with pytest.raises(RenderError, match=r"GPU node gpu-1 has no .*VERSION_ID"):
        render(policy(), facts(bare))


def test_owned_kinds_follow_the_cluster() -> None:
    base = owned_kinds(facts())
    assert ("apps/v1", "DaemonSet") in base
    assert ("node.k8s.io/v1", "RuntimeClass") in base
    assert SERVICE_MONITOR not in base
    assert SERVICE_MONITOR in owned_kinds(facts(crds=[SERVICE_MONITOR]))
    old = owned_kinds(facts(kubernetes_version="v1.20.0"))
    assert ("node.k8s.io/v1beta1", "RuntimeClass") in old
    rendered = {
        (o["apiVersion"], o["kind"]) for o in objects(cluster=facts(crds=[SERVICE_MONITOR]))
    }
    assert rendered <= set(owned_kinds(facts(crds=[SERVICE_MONITOR])))


def test_openshift_adds_an_scc_per_operand_before_its_daemonset() -> None:
    ocp = facts(node(os_id="rhcos", version="4.16"), openshift="4.16.3")
    driver = states(cluster=ocp)["state-driver"].objects
    kinds = [o["kind"] for o in driver]
    assert kinds.index("SecurityContextConstraints") == kinds.index("DaemonSet") - 1
    scc = next(o for o in driver if o["kind"] == "SecurityContextConstraints")
    assert scc["metadata"]["name"] == "nvidia-driver"
    assert scc["users"] == [f"system:serviceaccount:{NS}:nvidia-driver"]
    assert "namespace" not in scc["metadata"]
    sccs = {
        o["metadata"]["name"]
        for o in objects(cluster=ocp)
        if o["kind"] == "SecurityContextConstraints"
    }
    assert sccs == {
        "nvidia-driver",
        "nvidia-operator-validator",
        "nvidia-dcgm-exporter",
        "nvidia-gpu-feature-discovery",
        "nvidia-mig-manager",
    }
    assert ("security.openshift.io/v1", "SecurityContextConstraints") in owned_kinds(ocp)
    assert not [o for o in objects() if o["kind"] == "SecurityContextConstraints"]
    prometheus = [
        o
        for o in states(cluster=ocp)["state-operator-metrics"].objects
        if o["kind"] in ("Role", "RoleBinding")
    ]
    assert [(o["kind"], o["metadata"]["name"]) for o in prometheus] == [
        ("Role", "prometheus-k8s"),
        ("RoleBinding", "prometheus-k8s"),
    ]
    assert prometheus[1]["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"}
    ]


MATRIX: list[dict[str, Any]] = [
    {},
    {
        "dcgm": {"enabled": True},
        "nodeStatusExporter": {"enabled": True},
        "devicePlugin": {"config": {"name": "cfg"}},
        "hostPaths": {"rootFS": "/r", "driverInstallDir": "/d"},
    },
    {**SANDBOX, "vgpuManager": {"enabled": True, "repository": "r", "image": "v", "version": "1"}},
    {**KATA, "ccManager": {"enabled": True}},
    {
        "driver": {
            "rdma": {"enabled": True},
            "licensingConfig": {"secretName": "s", "nlsEnabled": True},
        },
        "gds": {"enabled": True},
        "gdrcopy": {"enabled": True},
    },
]


@pytest.mark.parametrize("spec", MATRIX)
@pytest.mark.parametrize("runtime", ["containerd://1.7", "cri-o://1.30"])
def test_daemonsets_are_complete(spec: dict[str, Any], runtime: str) -> None:
    """Every container has an image, every mount a volume; no name is used twice."""
    cluster = facts(node(os_id="rhel", version="9.4", runtime=runtime))
    for ds in (o for o in objects(spec, cluster) if o["kind"] == "DaemonSet"):
        pod = ds["spec"]["template"]["spec"]
        where = ds["metadata"]["name"]
        volumes = [v["name"] for v in pod["volumes"]]
        assert len(volumes) == len(set(volumes)), where
        for c in [*pod.get("initContainers", []), *pod["containers"]]:
            assert c["image"], f"{where}/{c['name']}"
            mounts = c.get("volumeMounts", [])
            assert {m["name"] for m in mounts} <= set(volumes), f"{where}/{c['name']}"
            paths = [m["mountPath"] for m in mounts]
            assert len(paths) == len(set(paths)), f"{where}/{c['name']}"
            env_names = [e["name"] for e in c.get("env", [])]
            assert len(env_names) == len(set(env_names)), f"{where}/{c['name']}"
