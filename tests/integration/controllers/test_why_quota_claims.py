"""Why is it not Ready? Causes outside the pod: a ResourceQuota, a missing
ResourceClaimTemplate, and a KServe predictor's pod.

- A namespace quota that refuses the NIM's pod: localcluster's ReplicaSet
  controller sets ``ReplicaFailure`` (reason ``FailedCreate``) as Kubernetes'
  does; the NIMService says ``QuotaExceeded`` naming the quota, and raising the
  quota brings it Ready without restarting anything.
- A NIMService whose ``draResources`` names a ResourceClaimTemplate that does
  not exist: the resourceclaim controller's ``FailedResourceClaimCreation``
  Event becomes ``ResourceClaimTemplateNotFound`` naming the template;
  creating it brings Ready.
- A validating admission webhook that denies the NIM's pods: the same
  ``ReplicaFailure``, named ``AdmissionDenied`` with the webhook's words;
  removing the webhook brings Ready.
- A NIMCache whose caching Job cannot create its pod (a webhook refuses Job
  pods): the Job controller's ``FailedCreate`` Event (no Job condition), named
  ``AdmissionDenied`` on the NIMCache's ``NIM_CACHE_JOB_PENDING`` condition;
  removing the webhook lets it cache.
- A KServe NIMService: the predictor's pods carry the InferenceService's labels
  (as KServe labels them), so they are in the operator's filtered cache and
  their blocker is named like any other.

Each counts the status writes: one per change of blocker, not one per retry.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from localcluster import LocalCluster
from localcluster.addons import install_ecosystem
from nimctl.demo import apply_objects, demo_objects
from nimctl.operator import install_crds
from nimctl_runtime import certs
from nimctl_runtime.client import Client
from tests.integration.controllers.harness import CountingClient, start_operator, wait_for

API = "apps.nvidia.com/v1alpha1"
NS = "why2"


def _base() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    objs = demo_objects(NS)
    service = next(o for o in objs if o["kind"] == "NIMService")
    # no NIMCache: a PVC the operator creates keeps these tests to the NIM's own pod
    others = [o for o in objs if o["kind"] not in ("NIMService", "NIMCache")]
    service = copy.deepcopy(service)
    service["spec"]["storage"] = {
        "pvc": {"create": True, "size": "1Gi", "volumeAccessMode": "ReadWriteOnce"}
    }
    return others, service


def _variant(base: dict[str, Any], name: str, **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(base)
    out["metadata"]["name"] = name
    out["spec"].update(spec)
    return out


def _ready(obj: dict[str, Any]) -> dict[str, Any]:
    conds = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c["type"] == "Ready"), {})


async def _condition(admin: Client, name: str, reason: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        obj = await admin.get(API, "NIMService", name, NS)
        return obj if _ready(obj).get("reason") == reason else None

    try:
        obj: dict[str, Any] = await wait_for(check, timeout=60)
    except TimeoutError:
        now = await admin.get(API, "NIMService", name, NS)
        raise AssertionError(f"{name}: not {reason}: {now.get('status')}") from None
    assert obj["status"]["state"] == "NotReady", "Pending is not Failed"
    return _ready(obj)


async def _until_ready(admin: Client, name: str) -> None:
    async def check() -> bool:
        obj = await admin.get(API, "NIMService", name, NS)
        return (obj.get("status") or {}).get("state") == "Ready"

    await wait_for(check, timeout=90)


def _status_writes(client: CountingClient, name: str) -> int:
    return sum(
        1
        for method, path in client.writes
        if method == "PATCH" and path.endswith(f"/nimservices/{name}/status")
    )


def _quota(gpus: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": NS},
        "spec": {"hard": {"requests.nvidia.com/gpu": gpus}},
    }


async def _cluster(tmp_path: Path) -> Any:
    cluster = LocalCluster(workdir=tmp_path)
    cluster.simulator_options = {"speed": 10.0}
    return cluster


async def test_quota_template_and_kserve_blockers_are_named(tmp_path: Path) -> None:
    cluster = await _cluster(tmp_path)
    async with cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            await install_crds(admin)
            await install_ecosystem(admin)
            operator = await start_operator(kubeconfig)
            try:
                await _quota_is_named(cluster, admin, operator.client)
                await _missing_template_is_named(admin, operator.client)
                await _webhook_denial_is_named(admin)
                await _cache_job_denial_is_named(admin)
                await _kserve_pod_blocker_is_named(admin)
            finally:
                await operator.shutdown()


async def _quota_is_named(cluster: Any, admin: Client, client: CountingClient) -> None:
    others, base = _base()
    await apply_objects(admin, [*others, _quota("0")])
    await apply_objects(admin, [_variant(base, "quota")])
    cond = await _condition(admin, "quota", "QuotaExceeded")
    assert cond["message"].startswith("deployment quota cannot create pods: ")
    assert "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1" in cond["message"]
    assert "limited: requests.nvidia.com/gpu=0" in cond["message"]
    # As on a real cluster: the ReplicaSet and Deployment say so, with a FailedCreate Event.
    deployment = await admin.get("apps/v1", "Deployment", "quota", NS)
    failure = next(c for c in deployment["status"]["conditions"] if c["type"] == "ReplicaFailure")
    assert failure["status"] == "True" and failure["reason"] == "FailedCreate"
    events = [
        e
        for e in cluster.storage.list("v1", "Event", NS)
        if e.get("reason") == "FailedCreate" and e["involvedObject"]["kind"] == "ReplicaSet"
    ]
    assert events and events[0]["message"].startswith('Error creating: pods "quota-')
    assert "exceeded quota: gpu-quota" in events[0]["message"]
    # The ReplicaSet keeps retrying (the Event's count grows): no new status write.
    writes = _status_writes(client, "quota")

    async def retried() -> bool:
        found = [
            e
            for e in cluster.storage.list("v1", "Event", NS)
            if e.get("reason") == "FailedCreate" and int(e.get("count") or 1) >= 3
        ]
        return bool(found)

    await wait_for(retried, timeout=30)
    assert _status_writes(client, "quota") == writes

    await admin.patch(
        "v1",
        "ResourceQuota",
        "gpu-quota",
        {"spec": {"hard": {"requests.nvidia.com/gpu": "8"}}},
        namespace=NS,
        patch_type="merge",
    )
    await _until_ready(admin, "quota")

    async def counted() -> bool:
        quota = await admin.get("v1", "ResourceQuota", "gpu-quota", NS)
        status = quota.get("status") or {}
        return status.get("used") == {"requests.nvidia.com/gpu": "1"} and status.get("hard") == {
            "requests.nvidia.com/gpu": "8"
        }

    await wait_for(counted, timeout=30)  # the quota controller's status, as kubectl shows it
    deployment = await admin.get("apps/v1", "Deployment", "quota", NS)
    assert not [c for c in deployment["status"]["conditions"] if c["type"] == "ReplicaFailure"]
    assert _status_writes(client, "quota") - writes <= 3


async def _missing_template_is_named(admin: Client, client: CountingClient) -> None:
    _, base = _base()
    service = _variant(base, "claim", draResources=[{"resourceClaimTemplateName": "one-gpu"}])
    service["spec"].pop("resources", None)
    await apply_objects(admin, [service])
    cond = await _condition(admin, "claim", "ResourceClaimTemplateNotFound")
    assert cond["message"].startswith("pod claim-")
    assert cond["message"].endswith(
        'cannot get its resource claim: resourceclaimtemplate "one-gpu" not found'
    )
    writes = _status_writes(client, "claim")
    await admin.create(
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": NS},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [
                            {
                                "name": "gpu",
                                "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 1},
                            }
                        ]
                    }
                }
            },
        }
    )
    await _until_ready(admin, "claim")
    assert _status_writes(client, "claim") - writes <= 3


async def _kserve_pod_blocker_is_named(admin: Client) -> None:
    _, base = _base()
    service = _variant(
        base,
        "kserve",
        inferencePlatform="kserve",
        authSecret="kserve-api-secret",
        storage={"emptyDir": {"sizeLimit": "20Gi"}},
        annotations={"serving.kserve.io/deploymentMode": "RawDeployment"},
    )
    await apply_objects(admin, [service])
    cond = await _condition(admin, "kserve", "SecretNotFound")
    assert cond["message"].startswith("pod kserve-predictor-")
    assert cond["message"].endswith('cannot start: secret "kserve-api-secret" not found')
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "kserve-api-secret", "namespace": NS},
        "data": {"NGC_API_KEY": base64.b64encode(b"simulated").decode()},
    }
    await admin.create(json.loads(json.dumps(secret)))
    await _until_ready(admin, "kserve")


@asynccontextmanager
async def _denying_webhook() -> AsyncIterator[tuple[int, str]]:
    """A TLS admission webhook that denies every pod it is asked about; (port, caBundle)."""
    ca = certs.generate_ca("why-webhook-ca")
    serving = certs.generate_serving_cert(ca, ["127.0.0.1"])

    async def handle(request: web.Request) -> web.Response:
        review = await request.json()
        response = {
            "uid": review["request"]["uid"],
            "allowed": False,
            "status": {"code": 403, "message": "GPU pods need a cost-center label"},
        }
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )

    app = web.Application()
    app.router.add_post("/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.server_ssl_context(serving))
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield port, base64.b64encode(ca.cert_pem).decode()
    finally:
        await runner.cleanup()


async def _webhook_denial_is_named(admin: Client) -> None:
    _, base = _base()
    async with _denying_webhook() as (port, ca_bundle):
        await admin.create(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "cost-center"},
                "webhooks": [
                    {
                        "name": "cost-center.example.com",
                        "clientConfig": {"url": f"https://127.0.0.1:{port}/pods",
                                         "caBundle": ca_bundle},
                        "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                                   "apiVersions": ["v1"], "resources": ["pods"]}],
                        # only this NIMService's pods
                        "objectSelector": {"matchLabels": {"app.kubernetes.io/instance": "denied"}},
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "timeoutSeconds": 5,
                    }
                ],
            }
        )  # fmt: skip
        await apply_objects(admin, [_variant(base, "denied")])
        cond = await _condition(admin, "denied", "AdmissionDenied")
        assert cond["message"].startswith("deployment denied cannot create pods: ")
        assert (
            'admission webhook "cost-center.example.com" denied the request: '
            "GPU pods need a cost-center label"
        ) in cond["message"]
        await admin.delete(
            "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "cost-center"
        )
        await _until_ready(admin, "denied")


EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


async def _cache_job_denial_is_named(admin: Client) -> None:
    import yaml

    ns = "why3"
    (cache,) = [d for d in yaml.safe_load_all((EXAMPLES / "nimcache-hf.yaml").read_text()) if d]
    cache["metadata"]["namespace"] = ns
    name = cache["metadata"]["name"]
    pull = {"auths": {"nvcr.io": {"username": "$oauthtoken", "password": "x"}}}
    async with _denying_webhook() as (port, ca_bundle):
        await admin.create(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "no-jobs"},
                "webhooks": [
                    {
                        "name": "no-jobs.example.com",
                        "clientConfig": {"url": f"https://127.0.0.1:{port}/pods",
                                         "caBundle": ca_bundle},
                        "rules": [{"operations": ["CREATE"], "apiGroups": [""],
                                   "apiVersions": ["v1"], "resources": ["pods"]}],
                        # the Job's pods only (not the model-manifest pod the operator makes)
                        "objectSelector": {"matchExpressions": [
                            {"key": "batch.kubernetes.io/job-name", "operator": "Exists"}]},
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "timeoutSeconds": 5,
                    }
                ],
            }
        )  # fmt: skip
        await apply_objects(
            admin,
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "ngc-secret", "namespace": ns},
                    "type": "kubernetes.io/dockerconfigjson",
                    "data": {
                        ".dockerconfigjson": base64.b64encode(json.dumps(pull).encode()).decode()
                    },
                },
                {
                    "apiVersion": "v1",
                    "kind": "Secret",
                    "metadata": {"name": "hf-api-secret", "namespace": ns},
                    "stringData": {"HF_TOKEN": "hf_x"},
                },
                cache,
            ],
        )

        async def pending() -> dict[str, Any] | None:
            obj = await admin.get(API, "NIMCache", name, ns)
            conds = (obj.get("status") or {}).get("conditions") or []
            cond: dict[str, Any] = next(
                (c for c in conds if c["type"] == "NIM_CACHE_JOB_PENDING"), {}
            )
            return cond if cond.get("reason") == "AdmissionDenied" else None

        cond = await wait_for(pending, timeout=60)
        assert cond["message"].startswith(f"job {name}-job cannot create pods: ")
        assert 'admission webhook "no-jobs.example.com" denied the request' in cond["message"]
        assert (await admin.get(API, "NIMCache", name, ns))["status"]["state"] == "Pending"
        await admin.delete(
            "admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration", "no-jobs"
        )

        async def cached() -> bool:
            obj = await admin.get(API, "NIMCache", name, ns)
            return (obj.get("status") or {}).get("state") == "Ready"

        await wait_for(cached, timeout=90)
