"""`nimctl run` with a kubeconfig whose CA does not sign the server's certificate (issue 26).

Before, the operator logged the reason and then ran on forever without doing
anything. A wrong CA does not fix itself: the process exits 1 after a few
bounded attempts, with one line that names the certificate problem.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from localcluster.kubeconfig import render_kubeconfig, write_kubeconfig_file
from nimctl_runtime.certs import generate_ca

from .conftest import Env

REPO = Path(__file__).resolve().parents[3]


async def test_run_with_a_wrong_ca_exits_1_naming_the_certificate_problem(env: Env) -> None:
    cluster = env.cluster
    wrong = generate_ca("not-the-cluster-ca").cert_pem
    kubeconfig = write_kubeconfig_file(
        env.tmp / "wrong-ca", render_kubeconfig(cluster.url, wrong, "admin", cluster.token_for("admin"))
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "nimctl", "--log-format", "console", "run",
        "--kubeconfig", str(kubeconfig), "--health-probe-bind-address", "0",
        cwd=str(REPO),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    async with asyncio.timeout(90):  # a bound for a hang, not a measurement
        out, err = await proc.communicate()
    assert proc.returncode == 1
    lines = [line for line in (out + err).decode().splitlines() if "certificate" in line.lower()]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"nimctl run: cannot use the API server {cluster.url}: ")
    assert "TLS certificate verification failed" in lines[0]
    assert "certificate-authority" in lines[0], "says what to check in the kubeconfig"
    # nothing reached the server's API: no request was authenticated
    assert not env.audit.records(user="admin")
