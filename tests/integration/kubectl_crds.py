"""Shared by the kubectl-apply API tests: install our CRDs, read kubectl's errors."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from api.crdgen import generate_crds
from api.crdgen import main as write_crds
from tests.conftest import Kubectl


async def install_crds(kubectl: Kubectl, tmp_path: Path) -> None:
    """``nimctl crds --output`` + ``kubectl apply``, then wait until every kind is served."""
    crd_dir = tmp_path / "crds"
    write_crds(str(crd_dir))
    await kubectl.run("apply", "-f", str(crd_dir))
    wanted = {
        f"{crd['spec']['names']['plural']}.{crd['spec']['group']}" for crd in generate_crds()
    }
    for _ in range(100):
        out = await kubectl.run("api-resources", "-o", "name", check=False)
        if wanted <= set(out.stdout.split()):
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"CRDs not served: {sorted(wanted - set(out.stdout.split()))}")


def error_blocks(stderr: str) -> dict[str, str]:
    """kubectl's ``... "<name>" is invalid: ...`` error blocks, by object name."""
    blocks: dict[str, str] = {}
    current = ""
    for line in stderr.splitlines():
        match = re.search(r'"([^"]+)" is invalid', line)
        if match:
            current = match.group(1)
            blocks[current] = line + "\n"
        elif current:
            blocks[current] += line + "\n"
    return blocks
