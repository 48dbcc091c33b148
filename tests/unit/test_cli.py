"""The nimctl command line: sub-commands exist and logging is JSON by default."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from nimctl.cli import build_parser


def test_every_subcommand_is_registered() -> None:
    parser = build_parser()
    for command in ["localcluster", "local", "run", "crds", "render"]:
        args = parser.parse_args(
            [command, "-f", "x.yaml"] if command == "render" else [command]
        )
        assert args.command == command
        assert callable(args.handler)


def test_enable_webhooks_env_var_turns_webhooks_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENABLE_WEBHOOKS", "true")
    assert build_parser().parse_args(["run"]).enable_webhooks is True
    monkeypatch.delenv("ENABLE_WEBHOOKS")
    assert build_parser().parse_args(["run"]).enable_webhooks is False


def test_logs_are_json_lines_by_default() -> None:
    code = (
        "from nimctl_runtime.logsetup import configure_logging, get_logger;"
        "configure_logging();"
        "get_logger('t').info('hello', namespace='ns', name='n')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    line = json.loads(out.stderr.strip().splitlines()[-1])
    assert line["event"] == "hello"
    assert line["namespace"] == "ns"
    assert line["level"] == "info"


def test_module_level_loggers_follow_later_configuration() -> None:
    code = (
        "from nimctl_runtime.logsetup import configure_logging, get_logger;"
        "log = get_logger('early');"
        "configure_logging('json', 'warning');"
        "log.info('hidden'); log.warning('shown')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = [json.loads(line) for line in out.stderr.strip().splitlines()]
    assert [line["event"] for line in lines] == ["shown"]
    assert lines[0]["component"] == "early"


def test_logging_survives_a_closed_stderr(monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from nimctl_runtime.logsetup import configure_logging, get_logger

    old = io.StringIO()
    monkeypatch.setattr(sys, "stderr", old)
    configure_logging("json", "info")
    old.close()
    fresh = io.StringIO()
    monkeypatch.setattr(sys, "stderr", fresh)
    get_logger("t").info("after swap")
    assert "after swap" in fresh.getvalue()
    monkeypatch.setattr(sys, "stderr", old)
    get_logger("t").info("into a closed stream")  # must not raise


def test_nimctl_local_serves_webhooks_unless_disabled() -> None:
    parser = build_parser()
    assert parser.parse_args(["local"]).enable_webhooks is True
    assert parser.parse_args(["local", "--disable-webhooks"]).enable_webhooks is False
    assert parser.parse_args(["run"]).enable_webhooks is False


def test_debug_logging_is_not_flooded_by_the_cel_library() -> None:
    code = (
        "import celpy;"
        "from nimctl_runtime.logsetup import configure_logging, get_logger;"
        "configure_logging('json', 'debug');"
        "env = celpy.Environment();"
        "env.program(env.compile('1 + 2 == 3')).evaluate({});"
        "get_logger('ours').debug('kept')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "kept" in out.stderr
    assert "celpy" not in out.stderr
