"""`nimctl local` pieces that need no cluster: the demo objects and the live table."""

from __future__ import annotations

import io

import pytest

from api.serialize import load
from nimctl.cli import build_parser
from nimctl.demo import DEMO_NAME, demo_objects
from nimctl.local import usage
from nimctl_runtime.statustable import LiveTable, render_table, row_for


def test_demo_objects_are_valid_nim_resources() -> None:
    objs = demo_objects()
    kinds = [o["kind"] for o in objs]
    assert kinds == ["Namespace", "Secret", "Secret", "NIMCache", "NIMService"]
    for obj in objs[3:]:
        model = load(obj)
        assert model is not None
    svc = objs[4]
    assert svc["spec"]["storage"]["nimCache"]["name"] == objs[3]["metadata"]["name"] == DEMO_NAME


def test_usage_prints_kubectl_commands(tmp_path: object) -> None:
    from pathlib import Path

    text = usage(Path("/x/.nimctl/kubeconfig"), demo=True)
    assert "export KUBECONFIG=/x/.nimctl/kubeconfig" in text
    assert "kubectl get nimcaches,nimservices -A" in text
    assert f"describe nimservice {DEMO_NAME}" in text


def test_local_defaults_keep_ports_closed() -> None:
    args = build_parser().parse_args(["local"])
    assert args.kubeconfig == ".nimctl/kubeconfig"
    assert args.metrics_bind_address == "0" and args.health_probe_bind_address == "0"


def test_table_rows_show_state_conditions_and_replicas() -> None:
    cache = {
        "kind": "NIMCache",
        "metadata": {"name": "c"},
        "status": {
            "state": "Ready",
            "conditions": [{"type": "NIM_CACHE_JOB_COMPLETED", "status": "True"}],
        },
    }
    svc = {
        "kind": "NIMService",
        "metadata": {"name": "s"},
        "status": {"state": "NotReady", "conditions": [{"type": "Ready", "status": "False"}]},
    }
    dep = {"spec": {"replicas": 1}, "status": {"readyReplicas": 0}}
    text = render_table([row_for(cache), row_for(svc, dep)])
    lines = text.splitlines()
    assert lines[0].split() == ["KIND", "NAME", "STATE", "CONDITIONS", "REPLICAS"]
    assert lines[1].split() == ["NIMCache", "c", "Ready", "NIM_CACHE_JOB_COMPLETED=True", "-"]
    assert lines[2].split() == ["NIMService", "s", "NotReady", "Ready=False", "0/1"]
    out = io.StringIO()
    table = LiveTable(out)
    assert table.update([row_for(cache)]) is True
    assert table.update([row_for(cache)]) is False


def test_run_without_any_cluster_config_says_what_to_do(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from nimctl.cli import main

    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["run"]) == 1
    err = capsys.readouterr().err
    assert "--kubeconfig" in err and "KUBECONFIG" in err
