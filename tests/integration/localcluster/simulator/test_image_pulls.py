"""Image pulls and env sources decide whether a container starts, as on a real node.

A NIM image without an nvcr.io pull secret ends in ImagePullBackOff with the
kubelet's Events; creating the pull secret lets the next retry succeed; a missing
Secret key referenced by env holds the container in CreateContainerConfigError.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from localcluster.cluster import LocalCluster

NIM = "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3"


@pytest.fixture
async def fast() -> AsyncIterator[LocalCluster]:
    cluster = LocalCluster()
    cluster.simulator_options = {"speed": 20}
    async with cluster as c:
        yield c


def _pod(name: str, container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "nim", **container}], **spec},
    }


async def _until(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    async with asyncio.timeout(timeout):
        while True:
            value = check()
            if value:
                return value
            await asyncio.sleep(0.05)


def _waiting(cluster: LocalCluster, name: str) -> dict[str, Any]:
    pod = cluster.storage.get("v1", "Pod", name, "default")
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return dict((statuses[0].get("state") or {}).get("waiting") or {})


def _events(cluster: LocalCluster, name: str) -> list[tuple[str, str, str]]:
    return [
        (e["type"], e["reason"], e["message"])
        for e in cluster.storage.list("v1", "Event", "default")
        if e["involvedObject"]["name"] == name
    ]


def _pull_secret(name: str) -> dict[str, Any]:
    config = {"auths": {"nvcr.io": {"username": "$oauthtoken", "password": "nvapi-x"}}}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(json.dumps(config).encode()).decode()},
    }


async def test_missing_pull_secret_backs_off_until_it_exists(fast: LocalCluster) -> None:
    store = fast.storage
    store.create(_pod("llm", {"image": NIM}, imagePullSecrets=[{"name": "ngc-secret"}]))
    await _until(lambda: _waiting(fast, "llm").get("reason") == "ImagePullBackOff")
    message = _waiting(fast, "llm")["message"]
    assert message.startswith(f'Back-off pulling image "{NIM}": ErrImagePull: ')
    assert message.endswith("401 Unauthorized")
    events = _events(fast, "llm")
    assert (
        "Warning",
        "FailedToRetrieveImagePullSecret",
        "Unable to retrieve some image pull secrets (ngc-secret); attempting to pull the image "
        "may not succeed.",
    ) in events
    assert ("Normal", "Pulling", f'Pulling image "{NIM}"') in events
    assert ("Warning", "Failed", "Error: ErrImagePull") in events
    assert ("Normal", "BackOff", f'Back-off pulling image "{NIM}"') in events
    assert ("Warning", "Failed", "Error: ImagePullBackOff") in events
    assert store.get("v1", "Pod", "llm", "default")["status"]["phase"] == "Pending"

    store.create(_pull_secret("ngc-secret"))  # the next retry (<= 10s simulated) pulls
    await _until(lambda: store.get("v1", "Pod", "llm", "default")["status"]["phase"] == "Running")
    assert ("Normal", "Started", "Started container nim") in _events(fast, "llm")


async def test_opaque_secret_is_no_pull_secret_and_bad_tags_are_not_found(
    fast: LocalCluster,
) -> None:
    store = fast.storage
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ngc-opaque", "namespace": "default"},
            "stringData": {"NGC_API_KEY": "nvapi-x"},
        }
    )
    store.create(_pod("opaque", {"image": NIM}, imagePullSecrets=[{"name": "ngc-opaque"}]))
    store.create(_pull_secret("ngc-secret"))
    bad_tag = NIM.replace("1.3.3", "1.3.3x")
    store.create(_pod("badtag", {"image": bad_tag}, imagePullSecrets=[{"name": "ngc-secret"}]))
    await _until(
        lambda: _waiting(fast, "opaque").get("reason") in ("ErrImagePull", "ImagePullBackOff")
    )
    assert "401 Unauthorized" in _waiting(fast, "opaque")["message"]
    await _until(
        lambda: _waiting(fast, "badtag").get("reason") in ("ErrImagePull", "ImagePullBackOff")
    )
    assert f"{bad_tag}: not found" in _waiting(fast, "badtag")["message"]


async def test_env_from_missing_secret_key_is_create_container_config_error(
    fast: LocalCluster,
) -> None:
    store = fast.storage
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ngc-api", "namespace": "default"},
            "stringData": {"HF_TOKEN": "x"},
        }
    )
    env = [
        {
            "name": "NGC_API_KEY",
            "valueFrom": {"secretKeyRef": {"name": "ngc-api", "key": "NGC_API_KEY"}},
        }
    ]
    store.create(_pod("cfg", {"image": "nginx:1.27", "env": env}))
    await _until(lambda: _waiting(fast, "cfg").get("reason") == "CreateContainerConfigError")
    assert (
        _waiting(fast, "cfg")["message"]
        == "couldn't find key NGC_API_KEY in Secret default/ngc-api"
    )
    assert (
        "Warning",
        "Failed",
        "Error: couldn't find key NGC_API_KEY in Secret default/ngc-api",
    ) in _events(fast, "cfg")
    secret = store.get("v1", "Secret", "ngc-api", "default")
    secret["data"]["NGC_API_KEY"] = base64.b64encode(b"nvapi-x").decode()
    store.update(secret)
    await _until(lambda: store.get("v1", "Pod", "cfg", "default")["status"]["phase"] == "Running")


async def test_service_proxy_answers_like_the_nim_behind_it(fast: LocalCluster) -> None:
    import shutil
    import subprocess

    store = fast.storage
    store.create(_pull_secret("ngc-secret"))
    image = "nvcr.io/nim/nvidia/nv-embedqa-e5-v5:1.5.0"
    pod = _pod("embed", {"image": image}, imagePullSecrets=[{"name": "ngc-secret"}])
    pod["metadata"]["labels"] = {"app": "embed"}
    store.create(pod)
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "embed", "namespace": "default"},
            "spec": {"selector": {"app": "embed"}, "ports": [{"port": 8000}]},
        }
    )
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")

    def raw(path: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [kubectl, "--kubeconfig", str(fast.kubeconfig_path), "get", "--raw", path],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )

    base = "/api/v1/namespaces/default/services/embed:8000/proxy"
    def ready() -> bool:
        status = store.get("v1", "Pod", "embed", "default")["status"]
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        return status["phase"] == "Running" and conditions.get("Ready") == "True"

    await _until(ready)
    models = await asyncio.to_thread(raw, f"{base}/v1/models")
    assert models.returncode == 0, models.stderr
    body = json.loads(models.stdout)
    assert [m["id"] for m in body["data"]] == ["nvidia/nv-embedqa-e5-v5"]
    ready = await asyncio.to_thread(raw, f"{base}/v1/health/ready")
    assert json.loads(ready.stdout)["message"] == "Service is ready."
    store.delete("v1", "Pod", "embed", "default", grace_period_seconds=0)
    gone = await asyncio.to_thread(raw, f"{base}/v1/models")
    assert gone.returncode != 0 and "no endpoints available for service" in gone.stderr


async def test_a_volume_from_a_missing_secret_holds_the_pod_in_container_creating(
    fast: LocalCluster,
) -> None:
    store = fast.storage
    pod = _pod("certs", {"image": "nginx:1.27"})
    pod["spec"]["volumes"] = [{"name": "ca", "secret": {"secretName": "custom-ca"}}]
    store.create(pod)
    await _until(
        lambda: ("Warning", "FailedMount", 'MountVolume.SetUp failed for volume "ca" : secret '
                 '"custom-ca" not found') in _events(fast, "certs")
    )  # fmt: skip
    assert _waiting(fast, "certs") == {"reason": "ContainerCreating"}
    assert store.get("v1", "Pod", "certs", "default")["status"]["phase"] == "Pending"
    store.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "custom-ca", "namespace": "default"},
            "stringData": {"ca.crt": "x"},
        }
    )
    await _until(lambda: store.get("v1", "Pod", "certs", "default")["status"]["phase"] == "Running")
