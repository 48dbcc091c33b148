"""The GPUCluster model and CRD: NVIDIA's singleton name, defaults and short name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from api.crdgen import generate_crds
from api.nvidia.v1alpha1.gpucluster import SINGLETON_MESSAGE, GPUCluster
from api.serialize import LoadError, load_all

SAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "gpucluster-sample.yaml"


def _crd() -> dict[str, Any]:
    return next(c for c in generate_crds() if c["spec"]["names"]["kind"] == "GPUCluster")


def test_the_sample_parses_with_rootfs_dropped_as_the_api_server_prunes_it() -> None:
    (cr,) = load_all(SAMPLE.read_text())
    assert isinstance(cr, GPUCluster)
    assert cr.spec.dra_driver.compute_domains_enabled()
    assert not cr.spec.dcgm_enabled()
    assert cr.spec.dcgm_exporter_enabled()
    assert "rootFS" not in cr.spec.host_paths.model_dump(by_alias=True)


def test_a_gpucluster_named_otherwise_is_refused_with_nvidias_message() -> None:
    text = SAMPLE.read_text().replace("name: gpu-cluster", "name: my-cluster")
    with pytest.raises(LoadError) as err:
        load_all(text)
    assert SINGLETON_MESSAGE in str(err.value)


def test_compute_domains_and_dcgm_are_off_unless_asked_for() -> None:
    cr = GPUCluster.model_validate(
        {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
         "metadata": {"name": "gpu-cluster"}, "spec": {"draDriver": {}, "dcgm": {}}}
    )  # fmt: skip
    assert not cr.spec.dra_driver.compute_domains_enabled()
    assert not cr.spec.dcgm_enabled()
    assert not cr.spec.dcgm_exporter_enabled()
    assert cr.spec.host_paths.kubelet_root_dir == "/var/lib/kubelet"


def test_the_crd_is_cluster_scoped_with_short_name_columns_status_and_rule() -> None:
    crd = _crd()
    assert crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["shortNames"] == ["gc"]
    version = crd["spec"]["versions"][0]
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Status", "Age"]
    assert version["subresources"] == {"status": {}}
    root = version["schema"]["openAPIV3Schema"]
    assert root["x-kubernetes-validations"] == [
        {"message": SINGLETON_MESSAGE, "rule": "self.metadata.name == 'gpu-cluster'"}
    ]
    assert root["properties"]["spec"]["required"] == ["draDriver"]
