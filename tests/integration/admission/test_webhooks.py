"""Admission webhooks called over HTTPS by localcluster, seen from kubectl and kubernetes-asyncio."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from kubernetes_asyncio import client as k8s
from kubernetes_asyncio import config as k8s_config

from localcluster.cluster import LocalCluster
from localcluster.extensions import extensions_of
from nimctl_runtime import certs

Review = dict[str, Any]


async def eventually(check: Callable[[], Any], timeout: float = 15.0) -> Any:
    async with asyncio.timeout(timeout):
        while True:
            result = await check()
            if result:
                return result
            await asyncio.sleep(0.05)


@dataclass
class TinyWebhook:
    """An aiohttp TLS admission webhook; ``decide(request) -> response fields``."""

    ca: certs.CertPair
    port: int = 0
    reviews: list[Review] = field(default_factory=list)
    routes: dict[str, Callable[[Review], dict[str, Any]]] = field(default_factory=dict)

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.ca.cert_pem).decode()

    async def handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        self.reviews.append(review)
        decide = self.routes[request.path]
        response = {"uid": review["request"]["uid"], **decide(review["request"])}
        return web.json_response(
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
        )


@pytest.fixture
async def webhook() -> AsyncIterator[TinyWebhook]:
    ca = certs.generate_ca("test-webhook-ca")
    serving = certs.generate_serving_cert(
        ca, ["127.0.0.1", "tiny-webhook.default.svc", "sliced.default.svc"]
    )
    hook = TinyWebhook(ca)
    app = web.Application()
    app.router.add_post("/{tail:.*}", hook.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.server_ssl_context(serving))
    await site.start()
    hook.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield hook
    await runner.cleanup()


@pytest.fixture
async def cluster() -> AsyncIterator[LocalCluster]:
    async with LocalCluster() as c:
        yield c


@pytest.fixture
async def api(cluster: LocalCluster) -> AsyncIterator[k8s.ApiClient]:
    configuration = k8s.Configuration()
    await k8s_config.load_kube_config(
        config_file=str(cluster.kubeconfig_path), client_configuration=configuration
    )
    async with k8s.ApiClient(configuration) as api_client:
        yield api_client


def webhook_entry(name: str, client_config: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "clientConfig": client_config,
        "rules": [
            {
                "operations": ["CREATE"],
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "resources": ["configmaps"],
            }
        ],
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "timeoutSeconds": 5,
        **extra,
    }


def configmap(name: str, labels: dict[str, str] | None = None, **data: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def deny_forbidden(request: Review) -> dict[str, Any]:
    data = (request["object"] or {}).get("data") or {}
    if "forbidden" in data:
        return {
            "allowed": False,
            "status": {
                "code": 403,
                "reason": "Forbidden",
                "message": "the key 'forbidden' is not allowed here",
            },
            "warnings": ["configmap keys are reviewed by tiny-webhook"],
        }
    return {"allowed": True, "warnings": ["configmap keys are reviewed by tiny-webhook"]}


def add_label(request: Review) -> dict[str, Any]:
    patch = [{"op": "add", "path": "/metadata/labels", "value": {"mutated-by": "tiny-webhook"}}]
    if (request["object"]["metadata"]).get("labels"):
        patch = [{"op": "add", "path": "/metadata/labels/mutated-by", "value": "tiny-webhook"}]
    return {
        "allowed": True,
        "patchType": "JSONPatch",
        "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
    }


@pytest.mark.kubectl
@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
async def test_validating_webhook_denial_and_warning_shown_by_kubectl(
    cluster: LocalCluster, api: k8s.ApiClient, webhook: TinyWebhook, tmp_path: Path
) -> None:
    webhook.routes["/validate"] = deny_forbidden
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "tiny"},
        "webhooks": [
            webhook_entry(
                "deny.tiny.example.com",
                {
                    "url": f"https://127.0.0.1:{webhook.port}/validate",
                    "caBundle": webhook.ca_bundle,
                },
            )
        ],
    }
    await k8s.AdmissionregistrationV1Api(api).create_validating_webhook_configuration(config)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(configmap("bad", forbidden="x")))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(configmap("good", fine="y")))

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["kubectl", "--kubeconfig", str(cluster.kubeconfig_path), *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    denied = await asyncio.to_thread(kubectl, "create", "-f", str(bad))
    assert denied.returncode != 0
    assert (
        "admission webhook \"deny.tiny.example.com\" denied the request: the key 'forbidden' is not allowed here"
        in denied.stderr
    )
    assert "Error from server (Forbidden)" in denied.stderr
    assert "Warning: configmap keys are reviewed by tiny-webhook" in denied.stderr
    allowed = await asyncio.to_thread(kubectl, "create", "-f", str(good))
    assert allowed.returncode == 0, allowed.stderr
    assert "Warning: configmap keys are reviewed by tiny-webhook" in allowed.stderr
    review = webhook.reviews[0]
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    assert review["request"]["operation"] == "CREATE"
    assert review["request"]["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert review["request"]["userInfo"]["username"] == "admin"
    names = [
        cm.metadata.name
        for cm in (await k8s.CoreV1Api(api).list_namespaced_config_map("default")).items
    ]
    assert "good" in names and "bad" not in names


async def test_mutating_webhook_adds_label_through_jsonpatch_via_service(
    cluster: LocalCluster, api: k8s.ApiClient, webhook: TinyWebhook
) -> None:
    webhook.routes["/mutate"] = add_label
    core = k8s.CoreV1Api(api)
    # A selector-less Service whose Endpoints point at the webhook on loopback.
    await core.create_namespaced_service(
        "default",
        {
            "metadata": {"name": "tiny-webhook"},
            "spec": {"ports": [{"port": 443, "targetPort": webhook.port}]},
        },
    )
    await core.create_namespaced_endpoints(
        "default",
        {
            "metadata": {"name": "tiny-webhook"},
            "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": webhook.port}]}],
        },
    )
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "tiny-mutator"},
        "webhooks": [
            webhook_entry(
                "label.tiny.example.com",
                {
                    "service": {
                        "namespace": "default",
                        "name": "tiny-webhook",
                        "path": "/mutate",
                        "port": 443,
                    },
                    "caBundle": webhook.ca_bundle,
                },
                objectSelector={"matchExpressions": [{"key": "skip", "operator": "DoesNotExist"}]},
            )
        ],
    }
    await k8s.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(config)
    created = await core.create_namespaced_config_map(
        "default", configmap("mutated", labels={"team": "a"})
    )
    assert created.metadata.labels == {"team": "a", "mutated-by": "tiny-webhook"}
    stored = await core.read_namespaced_config_map("mutated", "default")
    assert stored.metadata.labels["mutated-by"] == "tiny-webhook"
    skipped = await core.create_namespaced_config_map(
        "default", configmap("skipped", labels={"skip": "yes"})
    )
    assert skipped.metadata.labels == {"skip": "yes"}
    assert len(webhook.reviews) == 1
    calls = extensions_of(cluster).webhooks.calls
    assert [(c.webhook, c.outcome) for c in calls] == [("label.tiny.example.com", "allowed")]


async def test_failure_policy_fail_and_ignore_when_webhook_is_down(
    cluster: LocalCluster, api: k8s.ApiClient, webhook: TinyWebhook
) -> None:
    admission = k8s.AdmissionregistrationV1Api(api)
    core = k8s.CoreV1Api(api)
    dead = {"url": "https://127.0.0.1:1/nowhere", "caBundle": webhook.ca_bundle}
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "dead"},
        "webhooks": [webhook_entry("dead.tiny.example.com", dead, failurePolicy="Ignore")],
    }
    await admission.create_validating_webhook_configuration(config)
    await core.create_namespaced_config_map("default", configmap("ignored"))
    config["webhooks"][0]["failurePolicy"] = "Fail"
    config["metadata"]["name"] = "dead-fail"
    await admission.create_validating_webhook_configuration(config)
    with pytest.raises(k8s.ApiException) as err:
        await core.create_namespaced_config_map("default", configmap("refused"))
    assert err.value.status == 500
    assert 'failed calling webhook "dead.tiny.example.com"' in json.loads(err.value.body)["message"]


async def test_webhook_with_wrong_ca_is_not_trusted(
    cluster: LocalCluster, api: k8s.ApiClient, webhook: TinyWebhook
) -> None:
    webhook.routes["/validate"] = deny_forbidden
    other_ca = base64.b64encode(certs.generate_ca("someone-else").cert_pem).decode()
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "untrusted"},
        "webhooks": [
            webhook_entry(
                "untrusted.tiny.example.com",
                {"url": f"https://127.0.0.1:{webhook.port}/validate", "caBundle": other_ca},
            )
        ],
    }
    await k8s.AdmissionregistrationV1Api(api).create_validating_webhook_configuration(config)
    with pytest.raises(k8s.ApiException) as err:
        await k8s.CoreV1Api(api).create_namespaced_config_map("default", configmap("x"))
    assert err.value.status == 500
    assert "certificate verify failed" in json.loads(err.value.body)["message"]
    assert webhook.reviews == []


async def test_timeout_dry_run_and_namespace_selector(
    cluster: LocalCluster, api: k8s.ApiClient, webhook: TinyWebhook
) -> None:
    core = k8s.CoreV1Api(api)
    admission = k8s.AdmissionregistrationV1Api(api)
    webhook.routes["/validate"] = deny_forbidden
    await core.create_namespace({"metadata": {"name": "guarded", "labels": {"policy": "strict"}}})
    config = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "scoped"},
        "webhooks": [
            webhook_entry(
                "scoped.tiny.example.com",
                {
                    "url": f"https://127.0.0.1:{webhook.port}/validate",
                    "caBundle": webhook.ca_bundle,
                },
                namespaceSelector={"matchLabels": {"policy": "strict"}},
                sideEffects="Some",
            )
        ],
    }
    await admission.create_validating_webhook_configuration(config)
    # Outside the selected namespace the webhook is not called at all.
    await core.create_namespaced_config_map("default", configmap("free", forbidden="ok"))
    assert webhook.reviews == []
    body = configmap("strict", forbidden="x")
    body["metadata"]["namespace"] = "guarded"
    with pytest.raises(k8s.ApiException) as denied:
        await core.create_namespaced_config_map("guarded", body)
    assert denied.value.status == 403
    # A webhook with side effects refuses dry runs instead of being called.
    body = configmap("dry")
    body["metadata"]["namespace"] = "guarded"
    with pytest.raises(k8s.ApiException) as dry:
        await core.create_namespaced_config_map("guarded", body, dry_run="All")
    assert dry.value.status == 400
    assert "does not support dry run" in json.loads(dry.value.body)["message"]
    assert len(webhook.reviews) == 1

    sleeper = asyncio.Event()

    async def slow_handler(request: web.Request) -> web.Response:
        await sleeper.wait()
        return web.json_response({})

    # A webhook slower than timeoutSeconds fails the request (failurePolicy Fail).
    slow_app = web.Application()
    slow_app.router.add_post("/slow", slow_handler)
    runner = web.AppRunner(slow_app)
    await runner.setup()
    serving = certs.generate_serving_cert(webhook.ca, ["127.0.0.1"])
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=certs.server_ssl_context(serving))
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        await admission.create_validating_webhook_configuration(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "slow"},
                "webhooks": [
                    webhook_entry(
                        "slow.tiny.example.com",
                        {"url": f"https://127.0.0.1:{port}/slow", "caBundle": webhook.ca_bundle},
                        timeoutSeconds=1,
                    )
                ],
            }
        )
        with pytest.raises(k8s.ApiException) as timed_out:
            await core.create_namespaced_config_map("default", configmap("late"))
        assert timed_out.value.status == 500
        assert "context deadline exceeded" in json.loads(timed_out.value.body)["message"]
    finally:
        sleeper.set()
        await runner.cleanup()


async def test_if_needed_webhook_is_reinvoked_after_a_later_change(
    cluster: LocalCluster, api: k8s.ApiClient, webhook: TinyWebhook
) -> None:
    def count_labels(request: Review) -> dict[str, Any]:
        labels = dict(request["object"]["metadata"].get("labels") or {})
        labels.pop("label-count", None)
        patch = [
            {
                "op": "add",
                "path": "/metadata/labels",
                "value": {**labels, "label-count": str(len(labels))},
            }
        ]
        return {
            "allowed": True,
            "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(patch).encode()).decode(),
        }

    webhook.routes["/count"] = count_labels
    webhook.routes["/mutate"] = add_label
    url = f"https://127.0.0.1:{webhook.port}"
    await k8s.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "pair"},
            "webhooks": [
                webhook_entry(
                    "count.tiny.example.com",
                    {"url": f"{url}/count", "caBundle": webhook.ca_bundle},
                    reinvocationPolicy="IfNeeded",
                ),
                webhook_entry(
                    "label.tiny.example.com",
                    {"url": f"{url}/mutate", "caBundle": webhook.ca_bundle},
                ),
            ],
        }
    )
    created = await k8s.CoreV1Api(api).create_namespaced_config_map("default", configmap("counted"))
    assert created.metadata.labels == {"mutated-by": "tiny-webhook", "label-count": "1"}
    assert [r["request"]["name"] for r in webhook.reviews] == ["counted"] * 3


async def test_service_resolved_by_registration_or_endpointslice(
    cluster: LocalCluster, api: k8s.ApiClient, webhook: TinyWebhook
) -> None:
    webhook.routes["/mutate"] = add_label
    # An operator running as a local process registers where its webhook Service lives.
    extensions_of(cluster).webhooks.register_service(
        "default", "tiny-webhook", "127.0.0.1", webhook.port
    )
    entry = webhook_entry(
        "registered.tiny.example.com",
        {
            "service": {"namespace": "default", "name": "tiny-webhook", "path": "/mutate"},
            "caBundle": webhook.ca_bundle,
        },
    )
    sliced = webhook_entry(
        "sliced.tiny.example.com",
        {
            "service": {"namespace": "default", "name": "sliced", "path": "/mutate", "port": 8443},
            "caBundle": webhook.ca_bundle,
        },
    )
    sliced["rules"][0]["resources"] = ["secrets"]
    core = k8s.CoreV1Api(api)
    await core.create_namespaced_service(
        "default",
        {"metadata": {"name": "sliced"}, "spec": {"ports": [{"name": "https", "port": 8443}]}},
    )
    await k8s.DiscoveryV1Api(api).create_namespaced_endpoint_slice(
        "default",
        {
            "metadata": {"name": "sliced-abc", "labels": {"kubernetes.io/service-name": "sliced"}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            "ports": [{"name": "https", "port": webhook.port}],
        },
    )
    await k8s.AdmissionregistrationV1Api(api).create_mutating_webhook_configuration(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "resolved"},
            "webhooks": [entry, sliced],
        }
    )
    cm = await core.create_namespaced_config_map("default", configmap("via-registration"))
    assert cm.metadata.labels == {"mutated-by": "tiny-webhook"}
    secret = await core.create_namespaced_secret(
        "default", {"metadata": {"name": "via-slice"}, "stringData": {"a": "b"}}
    )
    assert secret.metadata.labels == {"mutated-by": "tiny-webhook"}


async def test_pods_made_by_controllers_pass_through_webhooks_too(
    api: k8s.ApiClient, webhook: TinyWebhook
) -> None:
    def no_privileged(request: Review) -> dict[str, Any]:
        containers = request["object"]["spec"]["containers"]
        if any((c.get("securityContext") or {}).get("privileged") for c in containers):
            return {
                "allowed": False,
                "status": {"code": 403, "message": "privileged pods are not allowed"},
            }
        return {"allowed": True}

    webhook.routes["/pods"] = no_privileged
    entry = webhook_entry(
        "pods.tiny.example.com",
        {"url": f"https://127.0.0.1:{webhook.port}/pods", "caBundle": webhook.ca_bundle},
    )
    entry["rules"][0]["resources"] = ["pods"]
    await k8s.AdmissionregistrationV1Api(api).create_validating_webhook_configuration(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "pods"},
            "webhooks": [entry],
        }
    )
    apps = k8s.AppsV1Api(api)
    template = {
        "metadata": {"labels": {"app": "priv"}},
        "spec": {
            "containers": [{"name": "c", "image": "x", "securityContext": {"privileged": True}}]
        },
    }
    await apps.create_namespaced_replica_set(
        "default",
        {
            "metadata": {"name": "priv"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "priv"}},
                "template": template,
            },
        },
    )
    core = k8s.CoreV1Api(api)

    async def refused() -> Any:
        events = (await core.list_namespaced_event("default")).items
        return [
            e for e in events if e.reason == "FailedCreate" and e.involved_object.name == "priv"
        ]

    events = await eventually(refused)
    assert "privileged pods are not allowed" in events[0].message
    assert (await core.list_namespaced_pod("default", label_selector="app=priv")).items == []
    user = webhook.reviews[0]["request"]["userInfo"]["username"]
    assert user == "system:serviceaccount:kube-system:replicaset-controller"
