"""Cluster facts read from Node objects, the same way for the reconciler and the CLI."""

from __future__ import annotations

from platforms.gpu import ClusterFacts

from .helpers import NS, node


def test_gpu_nodes_are_the_labelled_ones_sorted_by_name() -> None:
    facts = ClusterFacts.from_nodes(
        [node("gpu-b"), node("cpu", gpu=False), node("gpu-a", os_id="rhel", version="9.4")],
        operator_namespace=NS,
    )
    assert [n.name for n in facts.nodes] == ["gpu-a", "gpu-b"]
    assert facts.os_tag == "rhel9"
    assert facts.has_nfd_labels
    assert facts.gpu_node_count == 2


def test_nfd_gpu_without_node_labelling_is_not_a_gpu_node_yet() -> None:
    unlabelled = node(
        "gpu", gpu=False, labels={"feature.node.kubernetes.io/pci-10de.present": "true"}
    )
    facts = ClusterFacts.from_nodes([unlabelled], operator_namespace=NS)
    assert facts.nodes == ()


def test_no_nfd_labels_at_all() -> None:
    bare = {"metadata": {"name": "n", "labels": {"kubernetes.io/hostname": "n"}}}
    facts = ClusterFacts.from_nodes([bare], operator_namespace=NS)
    assert not facts.has_nfd_labels
    assert facts.container_runtime == "containerd"


def test_node_fields() -> None:
    (gpu,) = ClusterFacts.from_nodes(
        [node(runtime="cri-o://1.30.2", kernel="6.8.0")], operator_namespace=NS
    ).nodes
    assert (gpu.kernel, gpu.os_id, gpu.os_version, gpu.container_runtime) == (
        "6.8.0",
        "ubuntu",
        "22.04",
        "crio",
    )


def test_kernels_map_each_kernel_to_its_first_node() -> None:
    facts = ClusterFacts.from_nodes(
        [node("c", kernel="6.8"), node("a", kernel="5.15"), node("b", kernel="6.8")],
        operator_namespace=NS,
    )
    assert {k: n.name for k, n in facts.kernels().items()} == {"5.15": "a", "6.8": "b"}


def test_runtime_class_api_version_follows_kubernetes() -> None:
    for version, api in (
        ("v1.20.0", "node.k8s.io/v1beta1"),
        ("v1.20.1", "node.k8s.io/v1"),
        ("v1.32.0+k3s1", "node.k8s.io/v1"),
    ):
        facts = ClusterFacts.from_nodes([], operator_namespace=NS, kubernetes_version=version)
        assert facts.runtime_class_api_version == api, version
