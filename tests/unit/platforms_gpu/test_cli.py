"""``nimctl render -f clusterpolicy.yaml --nodes nodes.yaml``: what a user sees offline."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from nimctl.cli import main as nimctl_main
from platforms.cli import main

from .helpers import SAMPLE, node

SANDBOX = SAMPLE.parent / "clusterpolicy-sandbox.yaml"


def _nodes_file(tmp_path: Path, *objs: dict[str, Any]) -> str:
    path = tmp_path / "nodes.yaml"
    buf = io.StringIO()
    YAML().dump({"apiVersion": "v1", "kind": "List", "items": list(objs)}, buf)
    path.write_text(buf.getvalue())
    return str(path)


def _render(policy: Path, nodes: str | None) -> tuple[int, list[dict[str, Any]]]:
    out = io.StringIO()
    code = main(str(policy), None, nodes=nodes, out=out)
    return code, [d for d in YAML(typ="safe").load_all(out.getvalue()) if d]


def test_sample_renders_against_nfd_labelled_nodes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nfd_only = node(
        "gpu-1", gpu=False, labels={"feature.node.kubernetes.io/pci-10de.present": "true"}
    )
    code, docs = _render(SAMPLE, _nodes_file(tmp_path, nfd_only, node("cpu-1", gpu=False)))
    assert code == 0
    daemonsets = [d["metadata"]["name"] for d in docs if d["kind"] == "DaemonSet"]
    assert daemonsets == [
        "nvidia-driver-daemonset",
        "nvidia-container-toolkit-daemonset",
        "nvidia-operator-validator",
        "nvidia-device-plugin-daemonset",
        "nvidia-device-plugin-mps-control-daemon",
        "nvidia-dcgm-exporter",
        "gpu-feature-discovery",
        "nvidia-mig-manager",
    ]
    assert all(d["metadata"].get("namespace", "gpu-operator") == "gpu-operator" for d in docs)
    err = capsys.readouterr().err
    assert "node gpu-1 has NFD's NVIDIA PCI label" in err
    assert "# state-driver: 7 objects" in err
    assert "# state-dcgm: disabled" in err


def test_without_nodes_there_are_no_daemonsets_and_a_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, docs = _render(SAMPLE, None)
    assert code == 0
    assert docs and "DaemonSet" not in {d["kind"] for d in docs}
    assert "no GPU node" in capsys.readouterr().err


def test_missing_config_map_is_an_error_naming_file_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = _nodes_file(tmp_path, node())
    code, _ = _render(SANDBOX, nodes)
    assert code == 1
    err = capsys.readouterr().err
    assert (
        "clusterpolicy-sandbox.yaml: ClusterPolicy cluster-policy-sandbox: state-vgpu-manager:"
        in err
    )
    assert (
        "spec.vgpuManager.kernelModuleConfig.name: ConfigMap vgpu-kernel-module-params not found"
        in err
    )


def test_config_maps_and_crds_in_the_nodes_file(tmp_path: Path) -> None:
    config_map = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "vgpu-kernel-module-params"},
        "data": {"nvidia.conf": "x"},
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
        "spec": {
            "group": "monitoring.coreos.com",
            "names": {"kind": "ServiceMonitor"},
            "versions": [{"name": "v1", "served": True}],
        },
    }
    code, docs = _render(SANDBOX, _nodes_file(tmp_path, node(), config_map, crd))
    assert code == 0
    names = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("DaemonSet", "nvidia-vgpu-manager-daemonset") in names
    assert ("ServiceMonitor", "gpu-operator") in names
    assert ("DaemonSet", "nvidia-driver-daemonset") not in names


def test_nimctl_render_takes_nodes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = _nodes_file(tmp_path, node())
    assert nimctl_main(["render", "-f", str(SAMPLE), "--nodes", nodes]) == 0
    docs = [d for d in YAML(typ="safe").load_all(capsys.readouterr().out) if d]
    assert any(
        d["kind"] == "DaemonSet" and d["metadata"]["name"] == "nvidia-driver-daemonset"
        for d in docs
    )


def test_unreadable_nodes_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _render(SAMPLE, str(tmp_path / "missing.yaml"))
    assert code == 1
    assert "missing.yaml: No such file or directory" in capsys.readouterr().err


def _monitors(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "ServiceMonitor"}


def _policy_file(tmp_path: Path, spec: dict[str, Any]) -> Path:
    doc: dict[str, Any] = YAML(typ="safe").load(SAMPLE.read_text())
    for key, value in spec.items():
        doc["spec"][key] = {**(doc["spec"].get(key) or {}), **value}
    path = tmp_path / "policy.yaml"
    buf = io.StringIO()
    YAML().dump(doc, buf)
    path.write_text(buf.getvalue())
    return path


def test_render_shows_the_service_monitors_a_prometheus_cluster_gets(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without a CRD list the render assumes the Prometheus Operator, as the live
    operator on such a cluster: the operator's ServiceMonitor (NVIDIA makes it even with
    serviceMonitor.enabled=false), the exporters' when they are on."""
    policy = _policy_file(
        tmp_path,
        {
            "operator": {"metrics": {"serviceMonitor": {"enabled": False}}},
            "dcgmExporter": {"serviceMonitor": {"enabled": True, "interval": "15s"}},
            "nodeStatusExporter": {"enabled": True},
        },
    )
    code, docs = _render(policy, _nodes_file(tmp_path, node()))
    assert code == 0
    assert "assuming the Prometheus Operator's ServiceMonitor is served" in capsys.readouterr().err
    monitors = _monitors(docs)
    assert set(monitors) == {"gpu-operator", "nvidia-dcgm-exporter", "nvidia-node-status-exporter"}
    assert monitors["nvidia-dcgm-exporter"]["spec"]["endpoints"][0]["interval"] == "15s"
    assert monitors["gpu-operator"]["spec"]["jobLabel"] == "operator"
    services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
    for name in ("gpu-operator", "nvidia-dcgm-exporter", "nvidia-node-status-exporter"):
        assert services[name]["metadata"]["annotations"]["prometheus.io/scrape"] == "true"


def test_a_crd_list_without_service_monitor_renders_none(tmp_path: Path) -> None:
    other = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "nodefeatures.nfd.k8s-sigs.io"},
        "spec": {
            "group": "nfd.k8s-sigs.io",
            "names": {"kind": "NodeFeature"},
            "versions": [{"name": "v1alpha1", "served": True}],
        },
    }
    code, docs = _render(SAMPLE, _nodes_file(tmp_path, node(), other))
    assert code == 0
    assert _monitors(docs) == {}
