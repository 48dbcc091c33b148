"""What ``nimctl local`` prints where users read it: logs of piped runs, pasted commands."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from nimctl_runtime.statustable import LiveTable, Row


def test_piped_demo_table_prints_one_line_per_change() -> None:
    out = io.StringIO()  # not a terminal, as under `| tee` or in CI logs
    table = LiveTable(out)
    cache, service = "meta-llama-3-1-8b-instruct", "meta-llama-3-1-8b-instruct"
    table.update(
        [
            Row("NIMCache", cache, "NotReady", "-", "-"),
            Row("NIMService", service, "<none>", "-", "-"),
        ]
    )
    table.update(
        [
            Row("NIMCache", cache, "InProgress", "NIM_CACHE_JOB_CREATED=True", "-"),
            Row("NIMService", service, "<none>", "-", "-"),
        ]
    )
    assert not table.update(
        [
            Row("NIMCache", cache, "InProgress", "NIM_CACHE_JOB_CREATED=True", "-"),
            Row("NIMService", service, "<none>", "-", "-"),
        ]
    )
    table.update(
        [
            Row("NIMCache", cache, "Ready", "NIM_CACHE_JOB_COMPLETED=True", "-"),
            Row("NIMService", service, "Ready", "Ready=True", "1/1"),
        ]
    )
    lines = out.getvalue().splitlines()
    assert [line.split()[:3] for line in lines] == [
        ["KIND", "NAME", "STATE"],
        ["NIMCache", cache, "NotReady"],
        ["NIMService", service, "<none>"],
        ["NIMCache", cache, "InProgress"],
        ["NIMCache", cache, "Ready"],
        ["NIMService", service, "Ready"],
    ]
    assert "\x1b[" not in out.getvalue()  # no cursor movement in a log


def test_help_speaks_to_users() -> None:
    from nimctl.cli import build_parser

    text = build_parser().format_help()
    assert "composition root" not in text  # the developers' word for cli.py
    assert "nimctl local --demo" in text and "nimctl crds | kubectl apply" in text
    for command in ("localcluster", "local", "run", "crds", "render"):
        assert f"    {command} " in text


def test_render_passes_other_kinds_through(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from platforms.cli import main

    manifest = tmp_path / "nim.yaml"
    manifest.write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: nim}\n"
        "data: {a: '1'}\n---\n"
        "apiVersion: apps.nvidia.com/v1alpha1\nkind: NIMService\n"
        "metadata: {name: llm, namespace: nim}\n"
        "spec:\n  image: {repository: nvcr.io/nim/meta/llama-3.1-8b-instruct, tag: '1.3.3'}\n"
        "  authSecret: ngc-api-secret\n  storage: {emptyDir: {}}\n"
        "  expose: {service: {port: 8000}}\n"
    )
    assert main(str(manifest), None) == 0
    captured = capsys.readouterr()
    kinds = [
        line.split(": ", 1)[1] for line in captured.out.splitlines() if line.startswith("kind:")
    ]
    assert kinds[0] == "ConfigMap" and "Deployment" in kinds  # passed through, then rendered
    assert "ConfigMap settings passed through unchanged" in captured.err
