"""``nimctl localcluster`` freezes its start-up heap once it serves (issue 30).

Counted: ``settle`` runs once, after the kubeconfig is written (the schemas and
catalog are loaded by then).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from localcluster import standalone
from nimctl.cli import build_parser
from tests.ports import free_ports


async def test_the_server_process_settles_its_heap_once_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = tmp_path / "kc"
    calls: list[bool] = []

    def settle() -> int:
        calls.append(kubeconfig.exists())
        return 0

    monkeypatch.setattr(standalone, "settle", settle)
    (port,) = free_ports(1)
    args = build_parser().parse_args(
        ["localcluster", "--kubeconfig", str(kubeconfig), "--port", str(port), "--no-simulator"]
    )
    stop = asyncio.Event()
    task = asyncio.create_task(standalone.serve(args, kubeconfig, stop))
    while not calls and not task.done():
        await asyncio.sleep(0.01)
    stop.set()
    assert await task == 0
    assert calls == [True]
