"""ComputeDomain IMEX daemons under a GPUCluster with computeDomains enabled (localcluster).

NVIDIA's sample GPUCluster enables computeDomains, so its compute-domain
controller Deployment ``nvidia-dra-driver-controller`` runs; the simulated DRA
driver then gives a ComputeDomain a daemon DaemonSet in the operator namespace,
whose pod runs on the node holding the domain's channel claim, and the domain is
Ready only once that pod is.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from nimctl_runtime.client.errors import NotFound
from tests.integration.controllers.harness import optional_crd, wait_for
from tests.integration.gpucluster.test_gpucluster import NS, SAMPLE, _load, running_env

pytestmark = pytest.mark.timeout(240)

CD = "resource.nvidia.com/v1beta1"
DOMAIN_LABEL = "resource.nvidia.com/computeDomain"
USER_NS = "imex"


async def test_a_domain_gets_its_daemon_on_the_channel_node_and_goes_ready(tmp_path: Path) -> None:
    async with running_env(tmp_path) as env:
        admin = env.admin
        await admin.create(optional_crd("resource.nvidia.com", "v1beta1", "computedomains",
                                        "ComputeDomain"))  # fmt: skip
        await wait_for(lambda: admin.mapper.rest_mapping(CD, "ComputeDomain"))
        await admin.create(_load(SAMPLE))
        await env.wait_gc("ready", timeout=120)

        async def controller_ready() -> bool:
            dep = await admin.get("apps/v1", "Deployment", "nvidia-dra-driver-controller", NS)
            return int((dep.get("status") or {}).get("readyReplicas") or 0) >= 1

        await wait_for(controller_ready, timeout=60, interval=0.2)

        await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": USER_NS}})
        domain = await admin.create({
            "apiVersion": CD, "kind": "ComputeDomain",
            "metadata": {"name": "imex", "namespace": USER_NS},
            "spec": {"numNodes": 1, "channel": {"resourceClaimTemplate": {"name": "imex-ch"}}},
        })  # fmt: skip
        uid = domain["metadata"]["uid"]

        async def channel_template() -> Any:
            try:
                return await admin.get("resource.k8s.io/v1", "ResourceClaimTemplate", "imex-ch",
                                       USER_NS)  # fmt: skip
            except NotFound:
                return None

        await wait_for(channel_template, timeout=30, interval=0.2)
        await admin.create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "worker", "namespace": USER_NS},
            "spec": {
                "containers": [{"name": "w", "image": "nvcr.io/nvidia/cuda:12.8.0-base"}],
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
                "resourceClaims": [{"name": "ch", "resourceClaimTemplateName": "imex-ch"}],
            },
        })  # fmt: skip

        async def worker_node() -> str | None:
            pod = await admin.get("v1", "Pod", "worker", USER_NS)
            return (pod.get("spec") or {}).get("nodeName")

        node = await wait_for(worker_node, timeout=60, interval=0.2)

        async def daemon_pods() -> list[dict[str, Any]] | None:
            items = (await admin.list("v1", "Pod", NS, label_selector=f"{DOMAIN_LABEL}={uid}"))[
                "items"
            ]
            ready = [
                p
                for p in items
                if any(
                    c.get("type") == "Ready" and c.get("status") == "True"
                    for c in (p.get("status") or {}).get("conditions") or []
                )
            ]
            return ready or None

        (daemon,) = await wait_for(daemon_pods, timeout=60, interval=0.2)
        assert daemon["spec"]["nodeName"] == node
        assert daemon["spec"]["serviceAccountName"] == "compute-domain-daemon-service-account"
        (claim_status,) = daemon["status"]["resourceClaimStatuses"]
        claim = await admin.get("resource.k8s.io/v1", "ResourceClaim",
                                claim_status["resourceClaimName"], NS)  # fmt: skip
        (result,) = claim["status"]["allocation"]["devices"]["results"]
        assert result["driver"] == "compute-domain.nvidia.com"
        labelled = await admin.get("v1", "Node", node)
        assert labelled["metadata"]["labels"][DOMAIN_LABEL] == uid

        async def domain_ready() -> dict[str, Any] | None:
            obj = await admin.get(CD, "ComputeDomain", "imex", USER_NS)
            status = obj.get("status") or {}
            return status if status.get("status") == "Ready" else None

        status = await wait_for(domain_ready, timeout=60, interval=0.2)
        assert [(n["name"], n["status"]) for n in status["nodes"]] == [(node, "Ready")]

        # Deleting the domain takes its daemons with it.
        await admin.delete(CD, "ComputeDomain", "imex", USER_NS)

        async def daemons_gone() -> bool:
            items = (await admin.list("apps/v1", "DaemonSet", NS,
                                      label_selector=f"{DOMAIN_LABEL}={uid}"))["items"]  # fmt: skip
            return not items

        await wait_for(daemons_gone, timeout=60, interval=0.2)
