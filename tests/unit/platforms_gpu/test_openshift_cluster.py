"""OpenShift facts from its objects, as NVIDIA's operator reads them (platforms.gpu.openshift_cluster),
and what the GPU controllers cache for them (controllers.gpu.openshift)."""

from __future__ import annotations

from typing import Any

import pytest

from controllers.gpu.openshift import cache_options
from platforms.capabilities import (
    CLUSTER_PROXY,
    CLUSTER_VERSION,
    IMAGE_STREAM,
    OPENSHIFT_GVKS,
    Capabilities,
)
from platforms.gpu.errors import RenderError
from platforms.gpu.openshift_cluster import dtk_images, openshift_version, proxy_spec


def cluster_version(*history: tuple[str, str], desired: str = "4.17.1") -> dict[str, Any]:
    return {
        "metadata": {"name": "version"},
        "status": {
            "desired": {"version": desired},
            "history": [{"state": state, "version": v} for state, v in history],
        },
    }


@pytest.mark.parametrize(
    ("history", "want"),
    [
        ([("Completed", "4.16.3")], "4.16"),
        # an update in progress: the newest entry is Partial, the cluster still runs 4.16
        ([("Partial", "4.17.1"), ("Completed", "4.16.3"), ("Completed", "4.15.9")], "4.16"),
        ([("Completed", "4")], "4"),
    ],
)
def test_version_is_major_minor_of_the_first_completed_update(
    history: list[tuple[str, str]], want: str
) -> None:
    assert openshift_version(cluster_version(*history)) == want


def test_no_completed_update_is_an_error_that_says_so() -> None:
    with pytest.raises(RenderError, match=r"no Completed update in status\.history"):
        openshift_version(cluster_version(("Partial", "4.16.3")))


def test_driver_toolkit_images_skip_latest_and_broken_tags() -> None:
    stream = {
        "spec": {
            "tags": [
                {
                    "name": "416.94.1",
                    "from": {"kind": "DockerImage", "name": "quay.io/dtk@sha256:a"},
                },
                {"name": "latest", "from": {"kind": "DockerImage", "name": "quay.io/dtk@sha256:a"}},
                {"name": "", "from": {"name": "quay.io/dtk@sha256:b"}},
                {"name": "417.94.2"},
            ]
        }
    }
    assert dtk_images(stream) == {"416.94.1": "quay.io/dtk@sha256:a"}


def test_proxy_spec_is_the_spec() -> None:
    spec = {"httpProxy": "http://p:3128", "trustedCA": {"name": "user-ca-bundle"}}
    assert proxy_spec({"spec": spec}) == spec
    assert proxy_spec({}) == {}


def test_nothing_is_cached_on_kubernetes() -> None:
    assert cache_options(Capabilities.everything(), driver=True) == {}


def test_only_the_objects_nvidia_reads_are_cached_on_openshift() -> None:
    caps = Capabilities.from_gvks(OPENSHIFT_GVKS)
    assert set(cache_options(caps)) == {CLUSTER_VERSION, CLUSTER_PROXY}
    options = cache_options(caps, driver=True)
    assert {gvk: (o.field_selector, o.namespace) for gvk, o in options.items()} == {
        CLUSTER_VERSION: ("metadata.name=version", None),
        CLUSTER_PROXY: ("metadata.name=cluster", None),
        IMAGE_STREAM: ("metadata.name=driver-toolkit", "openshift"),
    }
    transform = options[CLUSTER_VERSION].transform
    assert transform is not None
    trimmed = transform(
        {
            "apiVersion": "config.openshift.io/v1",
            "kind": "ClusterVersion",
            "metadata": {"name": "version", "resourceVersion": "7", "managedFields": [{}]},
            "spec": {"clusterID": "x"},
            "status": {
                "history": [{"state": "Completed", "version": "4.16.3", "image": "i"}],
                "conditions": [{"type": "Available"}],
            },
        }
    )
    assert trimmed["status"] == {"history": [{"state": "Completed", "version": "4.16.3"}]}
    assert "spec" not in trimmed
    assert openshift_version(trimmed) == "4.16"
