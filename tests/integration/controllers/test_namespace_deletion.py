"""Deleting a namespace full of NIMCaches and NIMServices: the operator lets it go.

The namespace controller empties the namespace (pods first, then the rest).
A pod held by a finalizer keeps the namespace Terminating with everything else
still there; deleting a NIMService's Service then wakes the NIMService, as the
namespace controller's deletions do on a real cluster. The operator creates
nothing in the terminating namespace (audit log), rewrites no status, logs
nothing at error level, and the namespace is gone once the pod is let go.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from localcluster.extensions import extensions_of
from nimctl.demo import DEMO_NAME, apply_objects, demo_objects
from nimctl_runtime.client import NotFound
from tests.integration.controllers.harness import (
    API,
    cluster_with_crds,
    start_operator,
    wait_for,
)

OPERATOR_USER = "nimctl-operator"
NS = "doomed"
SERVICES = 5
HOLD = "example.com/hold"


@pytest.mark.asyncio
async def test_a_deleted_namespace_gets_no_creates_and_no_errors(tmp_path: Path) -> None:
    async with cluster_with_crds(tmp_path) as (cluster, admin):
        kubeconfig = cluster.write_kubeconfig(tmp_path / "op.kubeconfig", user=OPERATOR_USER)
        operator = await start_operator(kubeconfig)
        try:
            objs = demo_objects(NS)
            base = next(o for o in objs if o["kind"] == "NIMService")
            extra = []
            for i in range(1, SERVICES):
                svc = copy.deepcopy(base)
                svc["metadata"]["name"] = f"{DEMO_NAME}-{i}"
                svc["spec"]["resources"] = {}
                extra.append(svc)
            await apply_objects(admin, objs + extra)

            async def all_ready() -> bool:
                items = (await admin.list(API, "NIMService", NS))["items"]
                return len(items) == SERVICES and all(
                    (o.get("status") or {}).get("state") == "Ready" for o in items
                )

            await wait_for(all_ready, timeout=90)
            held = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "held", "namespace": NS, "finalizers": [HOLD]},
                "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
            }
            await admin.create(held)
            audit = extensions_of(cluster).audit
            with capture_logs() as logs:
                start = max(r.seq for r in audit.records())
                await admin.delete("v1", "Namespace", NS)

                async def terminating_with_services() -> bool:
                    ns = await admin.get("v1", "Namespace", NS)
                    pods = (await admin.list("v1", "Pod", NS))["items"]
                    return (ns.get("status") or {}).get("phase") == "Terminating" and [
                        p["metadata"]["name"] for p in pods
                    ] == ["held"]

                await wait_for(terminating_with_services, timeout=30)
                await admin.delete("v1", "Service", DEMO_NAME, NS)
                await asyncio.sleep(2.0)  # the NIMService is woken and must not re-create it
                with contextlib.suppress(NotFound):
                    await admin.get("v1", "Service", DEMO_NAME, NS)
                    raise AssertionError("the operator re-created its Service")
                await admin.patch(
                    "v1", "Pod", "held", {"metadata": {"finalizers": []}}, namespace=NS
                )

                async def gone() -> bool:
                    try:
                        await admin.get("v1", "Namespace", NS)
                    except NotFound:
                        return True
                    return False

                await wait_for(gone, timeout=90)
                await asyncio.sleep(1.0)  # anything the operator would still send
            creates = [
                (r.resource, r.name, r.code)
                for r in audit.records(user=OPERATOR_USER)
                if r.seq > start and r.verb == "create" and r.namespace == NS
                and r.resource != "events"
            ]
            assert creates == [], creates
            errors = [e for e in logs if e.get("log_level") == "error"]
            assert errors == [], errors
            writes = [
                (r.verb, r.resource, r.subresource)
                for r in audit.records(user=OPERATOR_USER)
                if r.seq > start
                and r.namespace == NS
                and r.verb not in ("watch", "list", "get")
                and r.resource != "events"
            ]
            # Only the NIMCache's finalizer is released (a second try may race the cache);
            # no status is rewritten while the namespace controller empties the namespace.
            assert set(writes) <= {("patch", "nimcaches", "")}, writes
        finally:
            await operator.shutdown()
