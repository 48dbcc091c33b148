"""NVIDIADriver node pools, ownership, names and selector conflicts (gpu-operator.md §6.1)."""

from __future__ import annotations

import pytest

from platforms.gpu.nvidiadriver_pools import (
    DriverSelector,
    app_name,
    assign_owners,
    conflicts,
    driver_name,
    node_pools,
)
from tests.unit.gpu_nvidiadriver.helpers import node

NODES = [
    node("a1", labels={"pool": "a"}),
    node("a2", labels={"pool": "a"}, version="24.04"),
    node("a3", labels={"pool": "a"}, version="24.04", kernel="6.8.0-45-generic"),
    node(
        "b1",
        labels={"pool": "b"},
        os_id="rhel",
        version="9.4",
        kernel="5.14.0-427.13.1.el9_4.x86_64",
    ),
    node("cpu", gpu=False, labels={"pool": "a"}),
]


def test_pools_group_the_owned_nodes_by_os() -> None:
    owners = assign_owners([DriverSelector("a", {"pool": "a"})], NODES)
    pools, missing = node_pools("a", NODES, owners, precompiled=False)
    assert [(p.name, p.nodes) for p in pools] == [
        ("ubuntu22.04", ("a1",)),
        ("ubuntu24.04", ("a2", "a3")),
    ]
    assert missing == []
    assert pools[1].node_selector == {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu-operator.driver.owner": "a",
        "feature.node.kubernetes.io/system-os_release.ID": "ubuntu",
        "feature.node.kubernetes.io/system-os_release.VERSION_ID": "24.04",
    }


def test_precompiled_pools_split_by_kernel_and_pin_it() -> None:
    owners = assign_owners([DriverSelector("a", {"pool": "a"})], NODES)
    pools, _ = node_pools("a", NODES, owners, precompiled=True)
    assert [(p.name, p.nodes) for p in pools] == [
        ("ubuntu22.04-5.15.0-122-generic", ("a1",)),
        ("ubuntu24.04-5.15.0-122-generic", ("a2",)),
        ("ubuntu24.04-6.8.0-45-generic", ("a3",)),
    ]
    assert pools[2].node_selector["feature.node.kubernetes.io/kernel-version.full"] == (
        "6.8.0-45-generic"
    )


def test_rhel_pools_use_the_major_version_tag() -> None:
    owners = assign_owners([DriverSelector("b", {"pool": "b"})], NODES)
    pools, _ = node_pools("b", NODES, owners, precompiled=False)
    assert [p.os_tag for p in pools] == ["rhel9"]


def test_a_node_without_nfd_os_labels_is_left_out_and_named() -> None:
    bare = {"metadata": {"name": "bare", "labels": {"nvidia.com/gpu.present": "true"}}}
    owners = assign_owners([DriverSelector("d", {})], [bare, NODES[0]])
    pools, missing = node_pools("d", [bare, NODES[0]], owners, precompiled=False)
    assert [p.nodes for p in pools] == [("a1",)]
    assert missing == ["bare"]


def test_selecting_driver_wins_over_the_default_and_non_gpu_nodes_are_never_owned() -> None:
    owners = assign_owners(
        [DriverSelector("fallback", {}, default=True), DriverSelector("a", {"pool": "a"})], NODES
    )
    assert owners == {"a1": "a", "a2": "a", "a3": "a", "b1": "fallback"}


def test_a_node_two_drivers_select_gets_no_new_owner_and_keeps_its_old_one() -> None:
    drivers = [DriverSelector("a", {"pool": "a"}), DriverSelector("all", {})]
    owners = assign_owners(drivers, NODES)
    assert owners["a1"] is None
    assert owners["b1"] == "all"
    owned = node("a1", labels={"pool": "a", "nvidia.com/gpu-operator.driver.owner": "a"})
    assert assign_owners(drivers, [owned]) == {"a1": "a"}


def test_overlapping_selectors_conflict_in_nvidias_words() -> None:
    drivers = [
        DriverSelector("a", {"pool": "a"}),
        DriverSelector("ubuntu", {"feature.node.kubernetes.io/system-os_release.ID": "ubuntu"}),
        DriverSelector("b", {"pool": "b"}),
        DriverSelector("fallback", {}, default=True),
    ]
    found = conflicts(drivers, NODES)
    message = "multiple NVIDIADrivers match the same node a1: [a ubuntu]"
    assert found == {"a": message, "ubuntu": message}


def test_disjoint_selectors_do_not_conflict() -> None:
    drivers = [DriverSelector("a", {"pool": "a"}), DriverSelector("b", {"pool": "b"})]
    assert conflicts(drivers, NODES) == {}


@pytest.mark.parametrize(
    ("precompiled", "expected_prefix"),
    [(False, "nvidia-gpu-driver-ubuntu22.04-"), (True, "nvidia-gpu-driver-ubuntu22.04-")],
)
def test_daemonset_names_follow_nvidia(precompiled: bool, expected_prefix: str) -> None:
    owners = assign_owners([DriverSelector("a", {"pool": "a"})], NODES)
    pool = node_pools("a", NODES, owners, precompiled=precompiled)[0][0]
    name = app_name("gpu", "uid-1", pool)
    assert name.startswith(expected_prefix)
    assert len(name) <= 63
    assert driver_name("gpu", "a", pool) == "nvidia-gpu-driver-a-ubuntu22.04"


def test_precompiled_pools_of_one_os_get_distinct_names_and_names_stay_stable() -> None:
    owners = assign_owners([DriverSelector("a", {"pool": "a"})], NODES)
    pools, _ = node_pools("a", NODES, owners, precompiled=True)
    names = [app_name("gpu", "uid-1", p) for p in pools]
    assert len(set(names)) == 3
    assert names == [app_name("gpu", "uid-1", p) for p in pools]
    # Another CR's DaemonSets never take these names.
    assert not set(names) & {app_name("gpu", "uid-2", p) for p in pools}


def test_long_names_are_cut_to_63_keeping_the_hash() -> None:
    owners = {"a1": "a"}
    pool = node_pools("a", [node("a1", os_id="x" * 70)], owners, precompiled=False)[0][0]
    name = app_name("gpu", "uid-1", pool)
    assert len(name) == 63
    assert name.rsplit("-", 1)[1] == app_name("gpu", "uid-1", pool).rsplit("-", 1)[1]
