"""What a real cluster refuses reaches the NIMService the operator reconciles.

A NIMService whose Deployment kube-apiserver would refuse ends Failed with
kube-apiserver's message; a NIM whose image cannot be pulled (a bad tag, a
missing pull secret) never becomes Ready and its pod shows the kubelet's reasons
and Events.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from nimctl.demo import apply_objects, demo_objects
from nimctl_runtime.client import Client
from tests.integration.controllers.harness import cluster_with_crds, start_operator, wait_for

API = "apps.nvidia.com/v1alpha1"
NS = "refusals"


def _services() -> list[dict[str, Any]]:
    objs = demo_objects(NS)
    base = next(o for o in objs if o["kind"] == "NIMService")
    typo = copy.deepcopy(base)
    typo["metadata"]["name"] = "typo"
    typo["spec"]["image"]["pullPolicy"] = "IfNotPresnt"
    bad_tag = copy.deepcopy(base)
    bad_tag["metadata"]["name"] = "bad-tag"
    bad_tag["spec"]["image"]["tag"] = "1.3.3x"
    no_secret = copy.deepcopy(base)
    no_secret["metadata"]["name"] = "no-secret"
    no_secret["spec"]["image"]["pullSecrets"] = ["missing-secret"]
    return [*objs, typo, bad_tag, no_secret]


async def test_refusals_reach_the_nimservice(tmp_path: Path) -> None:
    async with cluster_with_crds(tmp_path) as (cluster, admin):
        operator = await start_operator(cluster.kubeconfig_path)
        try:
            await _exercise(cluster, admin)
        finally:
            await operator.shutdown()


async def _exercise(cluster: Any, admin: Client) -> None:
    await apply_objects(admin, _services())

    async def failed() -> dict[str, Any] | None:
        obj = await admin.get(API, "NIMService", "typo", NS)
        return obj if (obj.get("status") or {}).get("state") == "Failed" else None

    typo = await wait_for(failed, timeout=60)
    messages = " ".join(c.get("message", "") for c in typo["status"]["conditions"])
    assert (
        'Deployment.apps "typo" is invalid: spec.template.spec.containers[0].imagePullPolicy: '
        'Unsupported value: "IfNotPresnt": supported values: "Always", "IfNotPresent", "Never"'
    ) in messages

    def waiting(name: str) -> dict[str, Any]:
        for pod in cluster.storage.list("v1", "Pod", NS):
            if pod["metadata"]["name"].startswith(f"{name}-"):
                statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
                return dict((statuses[0].get("state") or {}).get("waiting") or {})
        return {}

    async def backing_off() -> bool:
        return all(waiting(n).get("reason") == "ImagePullBackOff" for n in ("bad-tag", "no-secret"))

    await wait_for(backing_off, timeout=60)
    assert "1.3.3x: not found" in waiting("bad-tag")["message"]
    assert waiting("no-secret")["message"].endswith("401 Unauthorized")
    for name in ("bad-tag", "no-secret"):
        obj = await admin.get(API, "NIMService", name, NS)
        assert obj["status"]["state"] == "NotReady"

    async def says_why(name: str, reason: str) -> str | None:
        obj = await admin.get(API, "NIMService", name, NS)
        ready = next(
            (c for c in (obj.get("status") or {}).get("conditions", []) if c["type"] == "Ready"),
            {},
        )
        return str(ready.get("message", "")) if ready.get("reason") == reason else None

    # The Ready condition names the blocker: its reason, and the pod and image in its message.
    message = await wait_for(lambda: says_why("bad-tag", "ImagePullFailed"), timeout=30)
    assert message.startswith("pod bad-tag-") and ":1.3.3x" in message
    message = await wait_for(lambda: says_why("no-secret", "PullSecretNotFound"), timeout=30)
    assert message.startswith("pod no-secret-")
    assert 'image pull secret "missing-secret" not found' in message
    events = {(e["reason"], e["message"]) for e in cluster.storage.list("v1", "Event", NS)}
    assert (
        "FailedToRetrieveImagePullSecret",
        "Unable to retrieve some image pull secrets (missing-secret); attempting to pull the "
        "image may not succeed.",
    ) in events
    assert ("Failed", "Error: ImagePullBackOff") in events
