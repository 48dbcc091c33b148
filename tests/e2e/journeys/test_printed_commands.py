"""The commands `nimctl local` prints work as printed, from any directory.

QA found the old hint (a repo-relative path, no namespace, no secrets) failed for a
user who followed it, and a `<your NGC API key>` placeholder was a redirection when
pasted into bash. This test pastes the printed lines into bash verbatim and expects
the NIMCache and NIMService to become Ready.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from nimctl.local import _first_nim_commands
from tests.e2e.journeys.harness import Kubectl, NimctlProcess, wait_for


def test_printed_first_nim_commands_reach_ready(
    local_nimctl: NimctlProcess, kubectl: Kubectl, tmp_path: Path
) -> None:
    printed = local_nimctl.stdout
    commands = _first_nim_commands()
    for line in commands:
        assert line in printed, f"nimctl local did not print {line!r}"
    # pasted into bash as printed, from a directory that is not the repository
    script = "\n".join(line for line in commands if " get " not in line)
    res = subprocess.run(
        ["bash", "-e", "-c", script],
        cwd=tmp_path,
        env={**kubectl.env, "PATH": f"{Path(kubectl.binary).parent}:{kubectl.env.get('PATH', '')}"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert res.returncode == 0, f"{script}\n{res.stdout}{res.stderr}"
    secret = kubectl.jsonpath(
        "secret", "ngc-api-secret", "-n", "nim-service", path="{.data.NGC_API_KEY}"
    )
    assert secret == "bnZhcGktc2ltdWxhdGVk"  # the exported key, not a shell redirection

    def ready() -> bool | None:
        states = kubectl.jsonpath(
            "nimcache,nimservice", "-n", "nim-service", path="{.items[*].status.state}"
        )
        return True if states.split() == ["Ready", "Ready"] else None

    wait_for(ready, 120, "the printed example to become Ready")
    kubectl.run("delete", "namespace", "nim-service", "--wait=true", timeout=90)
