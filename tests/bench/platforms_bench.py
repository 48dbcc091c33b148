"""Benchmark: one NIMService per platform variant, from apply to Ready, on ``nimctl local``'s ecosystem.

Run: ``.venv/bin/python -m tests.bench.platforms_bench``

For each variant (single node, multi-node MPI and Ray, ComputeDomain, DRA
claim creation, endpoint picker, KServe Standard and Knative) in its own
namespace of one LocalCluster with what ``nimctl local`` installs, printed:

* seconds from applying the NIMCache and NIMService to the NIMService Ready
  (the NIMCache's own caching time included);
* the operator's writes in the namespace until Ready (the NIMCache's and the
  NIMService's: objects, and status patches apart; Events not counted), as the
  audit log shows them;
* the operator's writes during 2 s after an owned object was touched
  (a reconcile that finds nothing to do): must be 0.
"""

from __future__ import annotations

import asyncio
import collections
import tempfile
import time
from pathlib import Path
from typing import Any

from localcluster.addons import install_ecosystem
from nimctl.demo import apply_objects, demo_objects
from tests.integration.controllers.harness import cluster_with_crds, start_operator
from tests.integration.platforms.conftest import OPERATOR_USER, Env, annotate, status_of

MULTI = {"parallelism": {"pipeline": 2, "tensor": 1}}
DRA = [
    {
        "claimCreationSpec": {
            "devices": [{"name": "gpu", "count": 1, "deviceClassName": "gpu.nvidia.com"}]
        }
    }
]
EPP = {
    "containerSpec": {
        "name": "epp",
        "image": {"repository": "registry.k8s.io/epp", "tag": "v1.0.0"},
    },
    "config": {
        "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
        "kind": "EndpointPickerConfig",
        "plugins": [{"type": "queue-scorer"}],
        "schedulingProfiles": [{"name": "default", "plugins": [{"pluginRef": "queue-scorer"}]}],
    },
}
VARIANTS: dict[str, tuple[dict[str, Any], tuple[str, str, str]]] = {
    "single-node": ({}, ("apps/v1", "Deployment", "")),
    "multi-node MPI": (
        {"multiNode": {**MULTI, "mpi": {"mpiStartTimeout": 300}}},
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "-lws"),
    ),
    "multi-node Ray": (
        {"multiNode": {**MULTI, "ray": {}}},
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "-lws"),
    ),
    "ComputeDomain": (
        {"multiNode": {**MULTI, "ray": {}, "computeDomain": {"create": True}}},
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", "-lws"),
    ),
    "DRA claimCreationSpec": ({"draResources": DRA}, ("apps/v1", "Deployment", "")),
    "endpoint picker": (
        {"expose": {"service": {"port": 8000}, "router": {"eppConfig": EPP}}},
        ("apps/v1", "Deployment", ""),
    ),
    "KServe Standard": (
        {"inferencePlatform": "kserve",
         "annotations": {"serving.kserve.io/deploymentMode": "Standard"}},
        ("serving.kserve.io/v1beta1", "InferenceService", ""),
    ),
    "KServe Knative": (
        {"inferencePlatform": "kserve",
         "annotations": {"serving.kserve.io/deploymentMode": "Knative"}},
        ("serving.kserve.io/v1beta1", "InferenceService", ""),
    ),
}


def _objects(ns: str, spec: dict[str, Any]) -> list[dict[str, Any]]:
    objs = demo_objects(ns)
    svc = next(o for o in objs if o["kind"] == "NIMService")
    svc["spec"].update(spec)
    return objs


async def _variant(env: Env, ns: str, spec: dict[str, Any], poke: tuple[str, str, str]) -> str:
    since = env.audit_seq()
    start = time.monotonic()
    await apply_objects(env.admin, _objects(ns, spec))
    name = next(o for o in _objects(ns, spec) if o["kind"] == "NIMService")["metadata"]["name"]
    while (await status_of(env.admin, ns, name)).get("state") != "Ready":
        if time.monotonic() - start > 120:
            return "did not become Ready in 120 s"
        await asyncio.sleep(0.05)
    seconds = time.monotonic() - start
    await asyncio.sleep(0.5)
    writes = env.operator_writes(ns, since)
    by_verb = collections.Counter(
        "status" if w[2] == "status" else f"{w[0]} {w[1]}" for w in writes
    )
    api_version, kind, suffix = poke
    idle = await env.idle_reconcile_writes(
        ns, annotate(env.admin, api_version, kind, f"{name}{suffix}", ns)
    )
    objects = sum(n for k, n in by_verb.items() if k != "status")
    return (
        f"Ready in {seconds:5.2f} s; {objects:2d} object writes + {by_verb['status']} status "
        f"patches until Ready; idle reconcile: {len(idle)} writes"
    )


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        async with cluster_with_crds(workdir, profile="many-nodes") as (cluster, admin):
            await install_ecosystem(admin)
            kubeconfig = cluster.write_kubeconfig(workdir / "op.kubeconfig", user=OPERATOR_USER)
            operator = await start_operator(kubeconfig)
            env = Env(cluster, admin, operator, workdir)
            try:
                for i, (label, (spec, poke)) in enumerate(VARIANTS.items()):
                    print(f"{label:24s} {await _variant(env, f'bench-{i}', spec, poke)}")
            finally:
                await operator.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
