"""What a GPUCluster renders beyond NVIDIA's goldens: the DRA API version chosen from
what the cluster serves, switches, health checks, labels and the contract's errors."""

from __future__ import annotations

from typing import Any

import pytest

from api.nvidia.v1.clusterpolicy import ResourceRequirements as R
from api.nvidia.v1alpha1.gpucluster import GPUCluster
from platforms.capabilities import Capabilities
from platforms.contract import ReconcileError
from platforms.gpu.gpucluster import GPUClusterContract, render_states
from platforms.gpu.gpucluster_common import DRA_NOT_SERVED_MESSAGE, GPUClusterFacts
from platforms.gpu.gpucluster_dra_driver import init_resources
from platforms.gpu.images import DEFAULT_OPERATOR_ENV

ENV = {**DEFAULT_OPERATOR_ENV, "DRA_DRIVER_IMAGE": "example.com/dra:v1"}


def _cr(**spec: Any) -> GPUCluster:
    body: dict[str, Any] = {"draDriver": {}, **spec}
    return GPUCluster.model_validate(
        {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster",
         "metadata": {"name": "gpu-cluster", "uid": "u1"}, "spec": body}
    )  # fmt: skip


def _facts(*versions: str, service_monitor: bool = False) -> GPUClusterFacts:
    return GPUClusterFacts(
        operator_namespace="gpu-operator",
        operator_env=ENV,
        dra_versions=frozenset(versions),
        service_monitor=service_monitor,
    )


def _all(cr: GPUCluster, facts: GPUClusterFacts) -> list[dict[str, Any]]:
    return [o for _s, objs in render_states(cr, facts) for o in objs]


def _by(objs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs if o["kind"] == kind}


@pytest.mark.parametrize(
    ("served", "expected"),
    [
        (("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2", "resource.k8s.io/v1"),
         "resource.k8s.io/v1"),
        (("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"), "resource.k8s.io/v1beta2"),
        (("resource.k8s.io/v1beta1",), "resource.k8s.io/v1beta1"),
    ],
)  # fmt: skip
def test_deviceclasses_and_claim_templates_use_the_newest_served_version(
    served: tuple[str, ...], expected: str
) -> None:
    objs = _all(_cr(dcgmExporter={}), _facts(*served))
    versions = {
        o["apiVersion"] for o in objs if o["kind"] in ("DeviceClass", "ResourceClaimTemplate")
    }
    assert versions == {expected}
    request = _by(objs, "ResourceClaimTemplate")["nvidia-dra-validator-gpu"]["spec"]["spec"][
        "devices"
    ]["requests"][0]
    if expected.endswith("v1beta1"):
        assert request["deviceClassName"] == "gpu.nvidia.com" and "exactly" not in request
    else:
        assert request["exactly"]["adminAccess"] is True


def test_no_dra_api_is_a_plain_error_naming_the_state() -> None:
    with pytest.raises(ReconcileError) as err:
        GPUClusterContract().render(_cr(), _facts())
    assert err.value.reason == "ReconcileFailed"
    assert err.value.message.startswith("Error syncing state state-dra-driver: ")
    assert DRA_NOT_SERVED_MESSAGE in err.value.message


def test_dcgm_is_off_unless_enabled_and_the_exporter_follows_its_block() -> None:
    facts = _facts("resource.k8s.io/v1")
    states = dict(render_states(_cr(dcgm={}, dcgmExporter={"enabled": False}), facts))
    assert states["state-dcgm"] == [] and states["state-dcgm-exporter"] == []
    states = dict(render_states(_cr(dcgm={"enabled": True}, dcgmExporter={}), facts))
    assert _by(states["state-dcgm"], "DaemonSet")["nvidia-dcgm-dra"]
    assert _by(states["state-dcgm-exporter"], "DaemonSet")["nvidia-dcgm-exporter-dra"]


def test_servicemonitor_only_when_enabled_and_served() -> None:
    cr = _cr(dcgmExporter={"serviceMonitor": {"enabled": True, "interval": "15s"}})
    assert not _by(_all(cr, _facts("resource.k8s.io/v1")), "ServiceMonitor")
    (monitor,) = _by(
        _all(cr, _facts("resource.k8s.io/v1", service_monitor=True)), "ServiceMonitor"
    ).values()
    assert monitor["spec"]["endpoints"][0]["interval"] == "15s"


def test_healthcheck_disabled_drops_probes_and_sets_port_minus_one() -> None:
    cr = _cr(draDriver={"gpus": {"kubeletPlugin": {"healthcheck": {"enabled": False}}}})
    ds = _by(_all(cr, _facts("resource.k8s.io/v1")), "DaemonSet")[
        "nvidia-dra-driver-kubelet-plugin"
    ]
    (gpus,) = ds["spec"]["template"]["spec"]["containers"]
    assert "startupProbe" not in gpus and "livenessProbe" not in gpus
    assert {"name": "HEALTHCHECK_PORT", "value": "-1"} in gpus["env"]
    assert gpus["image"] == "example.com/dra:v1"


def test_daemonset_labels_reach_objects_but_app_and_part_of_not_pods() -> None:
    labels = {"team": "a", "app": "x", "app.kubernetes.io/part-of": "y"}
    cr = _cr(daemonsets={"labels": labels, "annotations": {"note": "n"}})
    ds = _by(_all(cr, _facts("resource.k8s.io/v1")), "DaemonSet")["nvidia-dra-validator"]
    assert ds["metadata"]["labels"]["team"] == "a" and ds["metadata"]["labels"]["app"] == "x"
    pod = ds["spec"]["template"]["metadata"]
    assert pod["labels"]["app"] == "nvidia-operator-validator"
    assert "app.kubernetes.io/part-of" not in pod["labels"] and pod["labels"]["team"] == "a"
    assert pod["annotations"] == {"note": "n"}


def test_init_container_resources_take_the_larger_and_lift_limits_to_requests() -> None:
    merged = init_resources(
        R(requests={"cpu": "1"}, limits={"cpu": "500m"}), R(requests={"memory": "1Gi"}), None
    )
    assert merged == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1"}}
    assert init_resources(None) is None


def test_the_contract_owns_and_labels_every_object() -> None:
    objs = GPUClusterContract().render(_cr(), _facts("resource.k8s.io/v1"))
    kinds = {(o["apiVersion"], o["kind"]) for o in objs}
    assert kinds <= set(GPUClusterContract().owned_kinds(Capabilities.everything()))
    for o in objs:
        assert o["metadata"]["ownerReferences"][0]["uid"] == "u1"
