"""``nimctl render -f nvidiadriver.yaml --nodes nodes.yaml``: what the controller would create.

The NVIDIADrivers of a file render together against the Nodes of ``--nodes``:
ownership, conflicts and pools as the controller decides them, DaemonSet names
as the cluster has them when the object carries its uid, and a note (no
objects) where the controller would report instead of rendering.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

from platforms.cli import main
from platforms.gpu.nvidiadriver_pools import NodePool, app_name

from .helpers import node

OWNER = "nvidia.com/gpu-operator.driver.owner"
POLICY_SAMPLE = Path(__file__).resolve().parents[3] / "docs/examples/clusterpolicy-defaults.yaml"
NODES = [
    node("gpu-a-0", labels={"pool": "a"}),
    node("gpu-a-1", labels={"pool": "a"}),
    node("gpu-b-0", version="24.04", labels={"pool": "b"}),
    node("cpu-0", gpu=False),
]


def _driver(name: str, selector: dict[str, str] | None = None, uid: str | None = None,
            default: bool = False) -> dict[str, Any]:  # fmt: skip
    meta: dict[str, Any] = {"name": name, **({"uid": uid} if uid else {})}
    spec: dict[str, Any] = {"repository": "nvcr.io/nvidia", "image": "driver",
                            "version": "570.148.08"}  # fmt: skip
    if selector is not None:
        spec["nodeSelector"] = selector
    if default:
        spec["default"] = True
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "NVIDIADriver", "metadata": meta,
            "spec": spec}  # fmt: skip


def _write(path: Path, *objs: dict[str, Any]) -> str:
    buf = io.StringIO()
    YAML().dump_all(list(objs), buf)
    path.write_text(buf.getvalue())
    return str(path)


def _render(tmp_path: Path, *drivers: dict[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    manifest = _write(tmp_path / "nvd.yaml", *drivers)
    nodes = _write(tmp_path / "nodes.yaml", {"apiVersion": "v1", "kind": "List", "items": NODES})
    out = io.StringIO()
    code = main(manifest, None, nodes=nodes, out=out)
    return code, [d for d in YAML(typ="safe").load_all(out.getvalue()) if d]


def _daemonsets(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == "DaemonSet"}


def test_two_nvidiadrivers_render_their_pools_with_the_clusters_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, docs = _render(
        tmp_path, _driver("pool-a", {"pool": "a"}, uid="ua"), _driver("pool-b", {"pool": "b"})
    )
    assert code == 0
    daemonsets = _daemonsets(docs)
    a_name = app_name("gpu", "ua", NodePool(os_id="ubuntu", os_version="22.04"))
    assert a_name in daemonsets  # the name the controller gives it on the cluster
    a_sel = daemonsets[a_name]["spec"]["template"]["spec"]["nodeSelector"]
    assert a_sel[OWNER] == "pool-a"
    b = [d for n, d in daemonsets.items() if n.startswith("nvidia-gpu-driver-ubuntu24.04-")]
    assert len(daemonsets) == 2 and len(b) == 1
    assert b[0]["spec"]["template"]["spec"]["nodeSelector"][OWNER] == "pool-b"
    assert all(d["metadata"]["namespace"] == "gpu-operator" for d in daemonsets.values())
    err = capsys.readouterr().err
    assert "# NVIDIADriver pool-a: " in err and "pools: ubuntu22.04 (2 nodes)" in err
    assert "NVIDIADriver pool-b has no metadata.uid" in err
    assert "NVIDIADriver pool-a has no metadata.uid" not in err


def test_a_default_nvidiadriver_takes_the_nodes_no_other_selects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, docs = _render(tmp_path, _driver("fallback", default=True), _driver("a", {"pool": "a"}))
    assert code == 0
    owners = {
        d["spec"]["template"]["spec"]["nodeSelector"][OWNER]: name
        for name, d in _daemonsets(docs).items()
    }
    assert sorted(owners) == ["a", "fallback"]
    assert owners["fallback"].startswith("nvidia-gpu-driver-ubuntu24.04-")


def test_overlapping_selectors_render_nothing_and_say_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, docs = _render(tmp_path, _driver("x", {}), _driver("y", {"pool": "a"}))
    assert code == 0
    assert _daemonsets(docs) == {}
    err = capsys.readouterr().err
    assert (
        "note: NVIDIADriver x: ConflictingNodeSelector: multiple NVIDIADrivers match the same "
        "node gpu-a-0: [x y]; nothing rendered"
    ) in err


def test_a_clusterpolicy_without_use_nvidia_driver_crd_disables_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = YAML(typ="safe").load(POLICY_SAMPLE.read_text())
    policy["spec"]["driver"]["useNvidiaDriverCRD"] = False
    code, docs = _render(tmp_path, policy, _driver("x", {"pool": "a"}))
    assert code == 0
    assert not [
        d for d in docs if d["kind"] == "DaemonSet" and "gpu-driver" in d["metadata"]["name"]
    ]
    assert (
        "note: NVIDIADriver x: disabled: useNvidiaDriverCRD is not enabled in ClusterPolicy "
        "cluster-policy; nothing rendered"
    ) in capsys.readouterr().err


def test_no_matching_node_is_a_note(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, docs = _render(tmp_path, _driver("z", {"pool": "z"}))
    assert (code, docs) == (0, [])
    assert "note: NVIDIADriver z: no nodes matching the given node selector for z" in (
        capsys.readouterr().err
    )


def test_a_spec_the_controller_refuses_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = _driver("v", {"pool": "a"})
    bad["spec"]["usePrecompiled"] = True
    bad["spec"]["gds"] = {"enabled": True}
    code, _ = _render(tmp_path, bad)
    assert code == 1
    assert "NVIDIADriver v: Error syncing state state-driver: node pool" in (
        capsys.readouterr().err
    )
