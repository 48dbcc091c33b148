"""Two NVIDIADrivers and NVIDIA's shared ``nvidia-driver-startup-probe`` ConfigMap.

NVIDIA's pools all render the one ConfigMap; with two NVIDIADrivers both want
to own it. nimctl must settle (no write ping-pong between the two) and keep the
ConfigMap while either NVIDIADriver exists.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.controllers.harness import wait_for
from tests.integration.gpu_nvidiadriver.env import ND, driver_env, nvidia_driver

pytestmark = pytest.mark.timeout(300)

CM = "nvidia-driver-startup-probe"


async def test_two_nvidiadrivers_share_the_startup_probe_configmap_and_settle(
    tmp_path: Path,
) -> None:
    async with driver_env(tmp_path) as env:
        await env.admin.create(nvidia_driver("pool-a", {"pool": "a"}))
        await env.admin.create(nvidia_driver("pool-b", {"pool": "b"}))
        await env.wait_driver_state("pool-a", "ready", "Reconciled")
        await env.wait_driver_state("pool-b", "ready", "Reconciled")
        # The operator goes quiet: a 2 s window without writes comes (with two owners
        # taking the ConfigMap from each other it never would: 135 writes in 3 s).
        windows: list[list[tuple[str, str]]] = []

        async def quiet() -> bool:
            before = len(env.operator.client.object_writes())
            await asyncio.sleep(2.0)
            windows.append(env.operator.client.object_writes()[before:])
            return windows[-1] == []

        await wait_for(quiet, timeout=90, interval=0.0)
        cm_writes = [w for window in windows for w in window if CM in w[1]]
        assert len(cm_writes) <= 2, cm_writes

        cm = await env.admin.get("v1", "ConfigMap", CM, "gpu-operator")
        assert "startup-probe.sh" in cm["data"]

        # One NVIDIADriver goes: the ConfigMap is (again) there for the other one.
        await env.admin.delete(ND, "NVIDIADriver", "pool-a")

        async def present() -> bool:
            try:
                obj = await env.admin.get("v1", "ConfigMap", CM, "gpu-operator")
            except Exception:
                return False
            owners = [o["name"] for o in obj["metadata"].get("ownerReferences", [])]
            return owners == ["pool-b"]

        await wait_for(present, timeout=60, interval=0.25)
