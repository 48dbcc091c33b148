"""Operand readiness (gpu-operator.md §2.4) and its aggregation into ClusterPolicy status."""

from __future__ import annotations

from typing import Any

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from controllers.gpu.cache import trim_node
from controllers.gpu.clusterpolicy import active_policy, policy_status
from platforms.contract import Observed, Readiness
from platforms.gpu import ClusterFacts
from platforms.gpu.contract import ClusterPolicyContract, PolicyFacts
from platforms.gpu.images import DEFAULT_OPERATOR_ENV
from platforms.gpu.readiness import daemonset_ready, newest_revision_hash


def ds(strategy: str = "RollingUpdate", generation: int = 2, **status: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-driver-daemonset", "uid": "ds-uid", "generation": generation},
        "spec": {
            "updateStrategy": {"type": strategy},
            "selector": {"matchLabels": {"app": "nvidia-driver-daemonset"}},
        },
        "status": {"observedGeneration": generation, **status},
    }


def pod(name: str, revision: str, *, ready: bool = True, owner: str = "ds-uid") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"app": "nvidia-driver-daemonset", "controller-revision-hash": revision},
            "ownerReferences": [{"uid": owner, "controller": True}],
        },
        "status": {"phase": "Running", "containerStatuses": [{"name": "c", "ready": ready}]},
    }


def rev(name: str, number: int, owner: str = "ds-uid") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "ownerReferences": [{"uid": owner}]},
        "revision": number,
    }


REVISIONS = [rev("nvidia-driver-daemonset-aaa", 1), rev("nvidia-driver-daemonset-bbb", 2)]


def test_rolling_update_readiness() -> None:
    full: dict[str, int] = {
        "desiredNumberScheduled": 2,
        "updatedNumberScheduled": 2,
        "numberAvailable": 2,
    }
    assert daemonset_ready(ds("RollingUpdate", 2, **full)) == (True, "")
    assert not daemonset_ready(ds("RollingUpdate", 2, **{**full, "numberAvailable": 1}))[0]
    assert not daemonset_ready(ds("RollingUpdate", 2, **{**full, "numberUnavailable": 1}))[0]
    assert daemonset_ready(ds(desiredNumberScheduled=0)) == (True, "")


def test_unobserved_spec_is_not_ready() -> None:
    fresh = ds(generation=1)
    fresh["status"] = {}
    assert daemonset_ready(fresh) == (False, "status not observed yet")
    assert daemonset_ready(None) == (False, "not found")


def test_on_delete_reads_pods_against_the_newest_revision() -> None:
    d = ds("OnDelete", desiredNumberScheduled=2)
    assert newest_revision_hash(d, REVISIONS) == "bbb"
    current = [pod("a", "bbb"), pod("b", "bbb")]
    assert daemonset_ready(d, pods=current, revisions=REVISIONS) == (True, "")
    stale = [pod("a", "bbb"), pod("b", "aaa")]
    assert daemonset_ready(d, pods=stale, revisions=REVISIONS) == (
        False,
        "pods run an old revision",
    )
    unready = [pod("a", "bbb"), pod("b", "bbb", ready=False)]
    assert daemonset_ready(d, pods=unready, revisions=REVISIONS) == (False, "pods not ready")
    others = [pod("a", "bbb", owner="other")]
    assert daemonset_ready(d, pods=others, revisions=REVISIONS) == (False, "no pods")


def test_revisions_of_a_same_prefixed_daemonset_are_not_ours() -> None:
    d = ds("OnDelete")
    foreign = [*REVISIONS, rev("nvidia-driver-daemonset-zzz", 9, owner="other")]
    assert newest_revision_hash(d, foreign) == "bbb"
    per_kernel = [rev("nvidia-driver-daemonset-5.15.0-ubuntu22.04-ccc", 7, owner="")]
    assert newest_revision_hash(d, per_kernel) is None


def test_active_policy_is_the_oldest_then_lowest_name() -> None:
    def cp(name: str, ts: str, deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "creationTimestamp": ts}
        if deleting:
            meta["deletionTimestamp"] = ts
        return {"metadata": meta}

    assert active_policy([cp("b", "2026-01-02T00:00:00Z"), cp("z", "2026-01-01T00:00:00Z")]) == "z"
    assert active_policy([cp("b", "2026-01-01T00:00:00Z"), cp("a", "2026-01-01T00:00:00Z")]) == "a"
    assert (
        active_policy([cp("a", "2026-01-01T00:00:00Z", True), cp("b", "2026-01-02T00:00:00Z")])
        == "b"
    )
    assert active_policy([]) is None


def test_status_conditions_follow_nvidia() -> None:
    ready = policy_status({}, Readiness("ready", "Reconciled", "all good", ready=True), "gpu-op")
    assert ready["state"] == "ready" and ready["namespace"] == "gpu-op"
    by_type = {c["type"]: c for c in ready["conditions"]}
    assert (by_type["Ready"]["status"], by_type["Ready"]["reason"]) == ("True", "Reconciled")
    assert (by_type["Error"]["status"], by_type["Error"]["reason"]) == ("False", "Ready")
    bad = policy_status(ready, Readiness("notReady", "OperandNotReady", "states"), "gpu-op")
    by_type = {c["type"]: c for c in bad["conditions"]}
    assert (by_type["Ready"]["status"], by_type["Ready"]["reason"]) == ("False", "Error")
    assert (by_type["Error"]["reason"], by_type["Error"]["message"]) == (
        "OperandNotReady",
        "states",
    )
    assert len(bad["conditions"]) == 2
    # The same readiness again gives the same status: nothing to write.
    assert policy_status(bad, Readiness("notReady", "OperandNotReady", "states"), "gpu-op") == bad


def _policy(**spec: Any) -> ClusterPolicy:
    base: dict[str, Any] = {
        k: {}
        for k in (
            "daemonsets",
            "dcgm",
            "dcgmExporter",
            "devicePlugin",
            "driver",
            "gfd",
            "nodeStatusExporter",
            "operator",
            "toolkit",
        )
    }
    base.update(spec)
    return ClusterPolicy.model_validate({"metadata": {"name": "cp", "uid": "cp-uid"}, "spec": base})


GPU_NODE: dict[str, Any] = {
    "metadata": {
        "name": "gpu-0",
        "labels": {
            "nvidia.com/gpu.present": "true",
            "feature.node.kubernetes.io/pci-10de.present": "true",
            "feature.node.kubernetes.io/kernel-version.full": "5.15.0-122-generic",
            "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
            "feature.node.kubernetes.io/system-os_release.VERSION_ID": "22.04",
        },
    }
}


def _facts(*nodes: dict[str, Any]) -> PolicyFacts:
    cluster = ClusterFacts.from_nodes(
        nodes, operator_namespace="gpu-operator", operator_env=DEFAULT_OPERATOR_ENV
    )
    return PolicyFacts(cluster)


def test_readiness_aggregates_every_state_not_ready() -> None:
    contract = ClusterPolicyContract()
    cp, facts = _policy(), _facts(GPU_NODE)
    desired = contract.render(cp, facts)
    daemonsets = [o for o in desired if o["kind"] == "DaemonSet"]
    assert daemonsets, "GPU nodes get operand DaemonSets"
    observed = Observed.of(
        {**d, "metadata": {**d["metadata"], "generation": 1}, "status": {"observedGeneration": 1}}
        for d in desired
    )
    ready = contract.readiness(cp, facts, observed)
    assert (ready.state, ready.reason, ready.ready) == ("ready", "Reconciled", True)

    missing = Observed.of(o for o in desired if o["metadata"]["name"] != "nvidia-driver-daemonset")
    not_ready = contract.readiness(cp, facts, missing)
    assert (not_ready.state, not_ready.reason, not_ready.requeue_after) == (
        "notReady",
        "OperandNotReady",
        5.0,
    )
    assert not_ready.message.startswith(
        "ClusterPolicy is not ready; states not ready: [state-driver"
    )


def test_readiness_without_gpu_nodes_or_nfd_labels() -> None:
    contract = ClusterPolicyContract()
    cp = _policy()
    cpu = {"metadata": {"name": "cpu", "labels": {"feature.node.kubernetes.io/cpu-x": "true"}}}
    no_gpu = contract.readiness(cp, _facts(cpu), Observed())
    assert (no_gpu.state, no_gpu.reason) == ("ready", "NoGPUNodes")
    bare = {"metadata": {"name": "cpu", "labels": {}}}
    no_nfd = contract.readiness(cp, _facts(bare), Observed())
    assert (no_nfd.state, no_nfd.reason, no_nfd.requeue_after) == (
        "ready",
        "NFDLabelsMissing",
        45.0,
    )


def test_disabled_state_renders_nothing() -> None:
    contract = ClusterPolicyContract()
    names = {o["metadata"]["name"] for o in contract.render(_policy(), _facts(GPU_NODE))}
    assert "nvidia-dcgm-exporter" in names
    off = _policy(dcgmExporter={"enabled": False})
    names = {o["metadata"]["name"] for o in contract.render(off, _facts(GPU_NODE))}
    assert "nvidia-dcgm-exporter" not in names


def test_trim_node_keeps_what_the_controllers_read() -> None:
    many = {f"feature.node.kubernetes.io/cpu-cpuid.X{i}": "true" for i in range(300)}
    node = {
        "metadata": {
            "name": "gpu-0",
            "uid": "u",
            "resourceVersion": "7",
            "labels": {**GPU_NODE["metadata"]["labels"], **many, "kubernetes.io/os": "linux"},
            "annotations": {"big": "x" * 10000, "nvidia.com/gpu-driver-upgrade-enabled": "true"},
            "managedFields": [{"manager": "kubelet"}],
        },
        "status": {
            "images": [{"names": ["img"], "sizeBytes": 1}] * 50,
            "capacity": {"cpu": "8", "nvidia.com/gpu": "8"},
            "nodeInfo": {"containerRuntimeVersion": "containerd://1.7", "osImage": "Ubuntu"},
        },
    }
    trimmed = trim_node(node)
    labels = trimmed["metadata"]["labels"]
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["feature.node.kubernetes.io/kernel-version.full"] == "5.15.0-122-generic"
    assert not any(k.startswith("feature.node.kubernetes.io/cpu-cpuid") for k in labels)
    assert "kubernetes.io/os" not in labels
    assert trimmed["metadata"]["annotations"] == {"nvidia.com/gpu-driver-upgrade-enabled": "true"}
    assert trimmed["status"] == {
        "nodeInfo": {"containerRuntimeVersion": "containerd://1.7"},
        "capacity": {"nvidia.com/gpu": "8"},
    }
    # A node with only non-GPU NFD labels still shows that NFD runs.
    only_cpu = trim_node({"metadata": {"name": "c", "labels": dict(many)}})
    assert len(only_cpu["metadata"]["labels"]) == 1


def test_gpu_nodes_waiting_for_labelling_keep_the_policy_not_ready() -> None:
    contract = ClusterPolicyContract()
    cluster = _facts().cluster
    waiting = contract.readiness(
        _policy(), PolicyFacts(cluster, unlabelled_gpu_nodes=3), Observed()
    )
    assert (waiting.state, waiting.reason, waiting.requeue_after) == (
        "notReady",
        "OperandNotReady",
        5.0,
    )
    assert "node labelling" in waiting.message


def test_pods_of_a_replaced_driver_daemonset_keep_the_driver_state_not_ready() -> None:
    contract = ClusterPolicyContract()
    cp, facts = _policy(), _facts(GPU_NODE)
    desired = contract.render(cp, facts)
    live = []
    for d in desired:
        meta = {**d["metadata"], "generation": 1, "uid": f"uid-{d['metadata']['name']}"}
        live.append({**d, "metadata": meta, "status": {"observedGeneration": 1}})
    observed = Observed.of(live)
    old_pod = {
        "metadata": {
            "name": "old-driver",
            "ownerReferences": [
                {
                    "kind": "DaemonSet",
                    "name": "nvidia-driver-daemonset-5.4.0-ubuntu20.04",
                    "uid": "gone",
                    "controller": True,
                }
            ],
        }
    }
    stale = contract.readiness(cp, PolicyFacts(facts.cluster, driver_pods=(old_pod,)), observed)
    assert stale.state == "notReady"
    assert "states not ready: [state-driver]" in stale.message
    assert "removed driver DaemonSet" in stale.message
    assert contract.readiness(cp, facts, observed).state == "ready"


def test_trimmed_driver_pods_still_answer_the_on_delete_check() -> None:
    from controllers.gpu.cache import trim_driver_pod

    full = pod("a", "bbb")
    full["metadata"]["labels"].update({"helm.sh/chart": "gpu-operator", "extra": "x" * 500})
    full["metadata"]["ownerReferences"][0].update({"apiVersion": "apps/v1", "kind": "DaemonSet"})
    full["spec"] = {"containers": [{"name": "c", "image": "driver", "env": [{"name": "X"}] * 50}]}
    trimmed = trim_driver_pod(full)
    assert "extra" not in trimmed["metadata"]["labels"]
    assert "spec" not in trimmed
    d = ds("OnDelete", desiredNumberScheduled=1)
    assert daemonset_ready(d, pods=[trimmed], revisions=REVISIONS) == (True, "")
    stale = trim_driver_pod(pod("b", "aaa"))
    assert daemonset_ready(d, pods=[stale], revisions=REVISIONS)[0] is False


def test_a_crashing_driver_pod_is_named_with_its_node() -> None:
    from controllers.gpu.cache import trim_driver_pod
    from platforms.gpu.readiness import daemonset_blocker

    d = ds("OnDelete", desiredNumberScheduled=2, numberReady=1, numberUnavailable=1)
    crashing = pod("nvidia-driver-daemonset-x2x4q", "bbb", ready=False)
    crashing["metadata"].update(uid="p1", creationTimestamp="2026-11-28T00:00:00Z")
    crashing["spec"] = {"nodeName": "gpu-1", "containers": [{"name": "nvidia-driver-ctr"}]}
    crashing["status"]["containerStatuses"] = [
        {
            "name": "nvidia-driver-ctr",
            "ready": False,
            "restartCount": 4,
            "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
        }
    ]
    healthy = pod("nvidia-driver-daemonset-aaaaa", "bbb")
    # the cache holds trimmed pods: the finder reads the same from them
    found = daemonset_blocker(d, [trim_driver_pod(crashing), trim_driver_pod(healthy)])
    assert found is not None and found.reason == "CrashLoopBackOff"
    assert found.message == (
        "container nvidia-driver-ctr of pod nvidia-driver-daemonset-x2x4q keeps crashing: "
        "last exit code 1 (Error) (on node gpu-1)"
    )
    # pods of another DaemonSet say nothing about this one
    assert daemonset_blocker(d, [{**crashing, "metadata": {**crashing["metadata"],
                                  "ownerReferences": [{"uid": "x", "controller": True}]}}]) is None  # fmt: skip


def test_an_operand_with_no_ready_pod_and_no_named_cause() -> None:
    from platforms.gpu.readiness import daemonset_blocker

    d = ds(desiredNumberScheduled=3, numberReady=0)
    d["metadata"]["name"] = "nvidia-device-plugin-daemonset"
    found = daemonset_blocker(d, [])
    assert found is not None and found.reason == "DaemonSetNotReady"
    assert found.message == "DaemonSet nvidia-device-plugin-daemonset: none of its 3 pods is ready"
    assert daemonset_blocker(ds(desiredNumberScheduled=3, numberReady=1), []) is None


def test_cluster_policy_message_keeps_nvidias_words_then_names_the_pod() -> None:
    contract = ClusterPolicyContract()
    cp, facts = _policy(), _facts(GPU_NODE)
    desired = contract.render(cp, facts)
    live = []
    for want in desired:
        name = want["metadata"]["name"]
        obj = {**want, "metadata": {**want["metadata"], "generation": 1, "uid": f"u-{name}"}}
        obj["status"] = {"observedGeneration": 1}
        if obj["kind"] == "DaemonSet" and name == "nvidia-driver-daemonset":
            obj["status"].update(desiredNumberScheduled=1, numberUnavailable=1)
        live.append(obj)
    stuck = {
        "metadata": {
            "name": "nvidia-driver-daemonset-x2x4q",
            "uid": "p1",
            "labels": {"app": "nvidia-driver-daemonset"},
            "ownerReferences": [{"uid": "u-nvidia-driver-daemonset", "controller": True}],
        },
        "spec": {"nodeName": "gpu-node-0"},
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "k8s-driver-manager", "ready": False,
                 "state": {"waiting": {"reason": "ImagePullBackOff",
                                       "message": 'Back-off pulling image "nvcr.io/x:1"'}}}
            ],
        },
    }  # fmt: skip
    facts = PolicyFacts(facts.cluster, driver_pods=(stuck,))
    got = contract.readiness(cp, facts, Observed.of(live))
    assert (got.state, got.reason) == ("notReady", "OperandNotReady")
    assert got.message.startswith("ClusterPolicy is not ready; states not ready: [state-driver")
    assert "state-driver: DaemonSet nvidia-driver-daemonset: pods unavailable: " in got.message
    assert 'pod nvidia-driver-daemonset-x2x4q cannot pull image "nvcr.io/x:1"' in got.message
    assert "(on node gpu-node-0)" in got.message
    assert got.blocker == ("ImagePullFailed", "pod/nvidia-driver-daemonset-x2x4q")
