from typing import Any

from localcluster.simulator.nodes import build_nodes, load_profile
from localcluster.simulator.scheduling import (
    fit_failures,
    pinned_node_names,
    schedule,
)


def pod(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"containers": [{"name": "c", "image": "x"}]}
    base.update(spec)
    return {"metadata": {"name": "p", "namespace": "default"}, "spec": base}


def gpu_pod(n: int, **spec: Any) -> dict[str, Any]:
    p = pod(**spec)
    p["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": str(n)}}
    return p


NODES = build_nodes(load_profile("default"))


def test_default_profile_has_two_gpu_nodes_with_nfd_labels() -> None:
    gpu = [n for n in NODES if "nvidia.com/gpu" in n["status"]["allocatable"]]
    assert [n["metadata"]["name"] for n in gpu] == ["gpu-node-0", "gpu-node-1"]
    labels = gpu[0]["metadata"]["labels"]
    assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
    assert labels["feature.node.kubernetes.io/system-os_release.ID"] == "ubuntu"
    assert gpu[0]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert gpu[0]["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    assert "feature.node.kubernetes.io/pci-10de.present" not in NODES[2]["metadata"]["labels"]


def test_gpu_request_lands_on_gpu_node_and_too_many_gpus_is_unschedulable() -> None:
    assert schedule(gpu_pod(8), NODES, {}).node_name in ("gpu-node-0", "gpu-node-1")
    result = schedule(gpu_pod(9), NODES, {})
    assert result.node_name is None
    assert result.message.startswith("0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")


def test_gpus_already_used_count_against_the_node() -> None:
    used = {"gpu-node-0": [gpu_pod(6)], "gpu-node-1": [gpu_pod(6)]}
    assert schedule(gpu_pod(4), NODES, used).node_name is None
    assert schedule(gpu_pod(2), NODES, used).node_name is not None


def test_node_selector_affinity_and_taints() -> None:
    sel = pod(nodeSelector={"feature.node.kubernetes.io/pci-10de.present": "true"})
    assert schedule(sel, NODES, {}).node_name in ("gpu-node-0", "gpu-node-1")
    aff = pod(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": ["cpu-node-0"]}
                            ]
                        }
                    ]
                }
            }
        }
    )
    assert schedule(aff, NODES, {}).node_name == "cpu-node-0"
    tainted = build_nodes(load_profile("many-nodes"))
    t_node = next(n for n in tainted if n["metadata"]["name"] == "gpu-tainted-node-0")
    assert fit_failures(pod(), t_node, []) == [
        "node(s) had untolerated taint {nvidia.com/gpu: present}"
    ]
    tolerating = pod(
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    )
    assert fit_failures(tolerating, t_node, []) == []
    missing = pod(nodeSelector={"nope": "x"})
    msg = schedule(missing, NODES, {}).message
    assert "3 node(s) didn't match Pod's node affinity/selector" in msg


def test_mig_and_no_gpu_profiles() -> None:
    mig = build_nodes(load_profile("mig"))
    assert mig[0]["metadata"]["labels"]["nvidia.com/mig.capable"] == "true"
    none = build_nodes(load_profile("no-gpu"))
    assert schedule(gpu_pod(1), none, {}).node_name is None


def test_gpu_operator_profile_has_gfd_labels() -> None:
    nodes = build_nodes(load_profile("gpu-operator"))
    labels = nodes[0]["metadata"]["labels"]
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert "nvidia.com/gpu.present" not in nodes[2]["metadata"]["labels"]


def _pinned(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return pod(
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchFields": t} for t in terms]
                }
            }
        }
    )


def _name_in(*names: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": "In", "values": list(names)}


def test_pinned_node_names_bound_the_nodes_a_daemonset_pod_can_use() -> None:
    # One term per node name (a DaemonSet pod): only that node; several terms: their union.
    assert pinned_node_names(_pinned([_name_in("gpu-node-1")])) == {"gpu-node-1"}
    assert pinned_node_names(_pinned([_name_in("a")], [_name_in("b", "c")])) == {"a", "b", "c"}
    # Two pins in one term must both hold.
    assert pinned_node_names(_pinned([_name_in("a", "b"), _name_in("b", "c")])) == {"b"}
    # A term with no name pin (or NotIn) could match any node: no bound.
    assert pinned_node_names(_pinned([_name_in("a")], [])) is None
    not_in = {"key": "metadata.name", "operator": "NotIn", "values": ["a"]}
    assert pinned_node_names(_pinned([not_in])) is None
    assert pinned_node_names(pod()) is None
