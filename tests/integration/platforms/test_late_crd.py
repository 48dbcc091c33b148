"""An optional CRD installed after the operator started: a waiting NIMService goes on.

Before: a multi-node NIMService reports NotReady and names the missing
LeaderWorkerSet CRD (and makes no LeaderWorkerSet). Once the CRD is installed
the operator rediscovers it, renders the LeaderWorkerSet and watches it: the
NIMService becomes Ready, and a later change of the LeaderWorkerSet (scaled to
0 by hand) wakes it although it has no requeue pending.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from nimctl.demo import DEMO_NAME, apply_objects
from tests.integration.controllers.harness import cluster_with_crds, start_operator, wait_for
from tests.integration.platforms.conftest import (
    OPERATOR_USER,
    Env,
    install_optional_crds,
    objects_in,
    ready,
    status_of,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

LWS = ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def bare(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Env]:
    """A cluster with the nimctl CRDs only: no optional CRD when the operator starts."""
    tmp: Path = tmp_path_factory.mktemp("late-crd")
    async with cluster_with_crds(tmp, profile="many-nodes") as (cluster, admin):
        kubeconfig = cluster.write_kubeconfig(tmp / "operator.kubeconfig", user=OPERATOR_USER)
        operator = await start_operator(kubeconfig)
        try:
            yield Env(cluster, admin, operator, tmp)
        finally:
            await operator.shutdown()


async def test_lws_crd_installed_late_lets_the_nimservice_proceed(bare: Env) -> None:
    ns = "late"
    multi = {"parallelism": {"pipeline": 2, "tensor": 1}, "ray": {}}
    await apply_objects(bare.admin, objects_in(ns, multiNode=multi))

    async def waiting() -> str | None:
        st = await status_of(bare.admin, ns)
        msg = next((c["message"] for c in st.get("conditions", []) if c["type"] == "Ready"), "")
        return msg if st.get("state") == "NotReady" and "LeaderWorkerSet" in msg else None

    message = await wait_for(waiting, timeout=60)
    assert message == (
        "spec.multiNode needs the LeaderWorkerSet API (leaderworkerset.x-k8s.io/v1), "
        "which is not installed: waiting for its CRD"
    )

    await install_optional_crds(bare.admin, [LWS])
    st: dict[str, Any] = await ready(bare.admin, ns)
    cond = next(c for c in st["conditions"] if c["type"] == "Ready")
    assert cond["message"] == f'leaderworkerset "{DEMO_NAME}-lws" is ready'

    # The LeaderWorkerSet is watched now: its change alone brings the NIMService back.
    await bare.admin.patch(
        "leaderworkerset.x-k8s.io/v1",
        "LeaderWorkerSet",
        f"{DEMO_NAME}-lws",
        {"spec": {"replicas": 0}},
        namespace=ns,
    )

    async def scaled_down() -> str | None:
        st = await status_of(bare.admin, ns)
        msg = next((c["message"] for c in st.get("conditions", []) if c["type"] == "Ready"), "")
        return msg if "scaled down" in msg else None

    assert await wait_for(scaled_down, timeout=20) == (
        f'leaderworkerset "{DEMO_NAME}-lws" is scaled down'
    )
