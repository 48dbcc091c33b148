"""``nimctl local --demo``'s live table names what blocks the demo NIMService.

A blocked demo prints the line ``nimctl why`` ends with below its table, once
per change; when the cause is fixed the demo goes on to Ready by itself.
"""

from __future__ import annotations

import asyncio
import io
from pathlib import Path

from nimctl.demo import apply_objects, demo_objects, watch_demo
from tests.integration.controllers.harness import cluster_with_crds, start_operator, wait_for

NS = "demo-why"


async def test_a_blocked_demo_prints_its_why_line_until_fixed(tmp_path: Path) -> None:
    objs = demo_objects(NS)
    auth = next(o for o in objs if o["metadata"]["name"] == "ngc-api-secret")
    async with cluster_with_crds(tmp_path) as (cluster, admin):
        operator = await start_operator(cluster.kubeconfig_path)
        try:
            await apply_objects(admin, [o for o in objs if o is not auth])
            out = io.StringIO()
            watcher = asyncio.create_task(watch_demo(admin, out, namespace=NS, interval=0.1))

            async def blocked() -> bool:
                return "Blocked: SecretNotFound" in out.getvalue()

            await wait_for(blocked, timeout=60)
            text = out.getvalue()
            assert "nimctl why nimservice/meta-llama-3-1-8b-instruct -n demo-why:" in text
            assert 'secret "ngc-api-secret" not found' in text
            assert text.count("Blocked: SecretNotFound") == 1, "printed once per change"
            await apply_objects(admin, [auth])
            await asyncio.wait_for(watcher, timeout=90)  # returns when both are Ready
        finally:
            await operator.shutdown()
