"""The commands `nimctl local` prints work as printed, from any directory.

QA found the old hint (a repo-relative path, no namespace, no secrets) failed for a
user who followed it. This test runs the printed lines verbatim (the placeholder key
filled in) and expects the NIMCache and NIMService to become Ready.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from nimctl_runtime.cli import _first_nim_commands
from tests.e2e.journeys.harness import Kubectl, NimctlProcess, wait_for


def test_printed_first_nim_commands_reach_ready(
    local_nimctl: NimctlProcess, kubectl: Kubectl, tmp_path: Path
) -> None:
    printed = local_nimctl.stdout
    commands = _first_nim_commands()
    for line in commands:
        assert line in printed, f"nimctl local did not print {line!r}"
    for line in commands:
        argv = shlex.split(line.replace("<your NGC API key>", "nvapi-test"))
        assert argv[0] == "kubectl"
        if argv[1:3] == ["-n", "nim-service"] and argv[3] == "get":
            continue
        # from a directory that is not the repository, as a user would
        res = subprocess.run(
            [kubectl.binary, *argv[1:]],
            cwd=tmp_path,
            env=kubectl.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert res.returncode == 0, f"{line}\n{res.stdout}{res.stderr}"

    def ready() -> bool | None:
        states = kubectl.jsonpath(
            "nimcache,nimservice", "-n", "nim-service", path="{.items[*].status.state}"
        )
        return True if states.split() == ["Ready", "Ready"] else None

    wait_for(ready, 120, "the printed example to become Ready")
    kubectl.run("delete", "namespace", "nim-service", "--wait=true", timeout=90)
