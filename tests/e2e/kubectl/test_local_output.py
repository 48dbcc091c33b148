"""What ``nimctl local`` prints where users read it: logs of piped runs, pasted commands."""

from __future__ import annotations

import io

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
    from nimctl_runtime.cli import build_parser

    text = build_parser().format_help()
    assert "composition root" not in text  # the developers' word for cli.py
    assert "nimctl local --demo" in text and "nimctl crds | kubectl apply" in text
    for command in ("localcluster", "local", "run", "crds", "render"):
        assert f"    {command} " in text
