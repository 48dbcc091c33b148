"""Which image pulls succeed on a simulated node, and what the kubelet says when they do not."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from localcluster.registries import (
    parse_reference,
    pull_problem,
    served_model,
)
from localcluster.simulator.pulls import (
    config_problem,
    credential_hosts,
    pull_secret_names,
)

NIM = "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3"


@pytest.mark.parametrize(
    ("image", "canonical"),
    [
        ("nginx", "docker.io/library/nginx:latest"),
        ("nginx:1.27", "docker.io/library/nginx:1.27"),
        ("bitnami/kubectl:1.32", "docker.io/bitnami/kubectl:1.32"),
        ("localhost:5000/app", "localhost:5000/app:latest"),
        (NIM, NIM),
        ("nvcr.io/nvidia/cuda@sha256:abc", "nvcr.io/nvidia/cuda@sha256:abc"),
    ],
)
def test_references_are_normalised_as_containerd_does(image: str, canonical: str) -> None:
    assert parse_reference(image).canonical == canonical


def test_nim_images_need_nvcr_credentials() -> None:
    problem = pull_problem(NIM, set())
    assert problem is not None
    assert problem.endswith("401 Unauthorized")
    assert "scope=repository%3Anim%2Fmeta%2Fllama-3.1-8b-instruct%3Apull" in problem
    assert pull_problem(NIM, {"nvcr.io"}) is None
    assert pull_problem(NIM, {"docker.io"}) is not None  # credentials for another registry


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nim/meta/llama-3.1-8b-instrcut:1.3.3",  # misspelt repository
        "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3x",  # no such tag
        "nvcr.io/nim/meta/llama-3.1-8b-instruct:lastest",
    ],
)
def test_nvcr_is_a_closed_registry(image: str) -> None:
    problem = pull_problem(image, {"nvcr.io"})
    ref = parse_reference(image).canonical
    assert problem == (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": '
        f'failed to resolve reference "{ref}": {ref}: not found'
    )


def test_public_images_pull_without_credentials() -> None:
    assert pull_problem("nvcr.io/nvidia/gpu-operator:v26.7.0", set()) is None
    assert pull_problem("nginx:1.27", set()) is None
    assert pull_problem("registry.example.com/team/app:3", set()) is None


def test_nim_images_serve_the_model_they_name() -> None:
    assert served_model(NIM) == "meta/llama-3.1-8b-instruct"
    assert served_model("nvcr.io/nim/nvidia/nv-embedqa-e5-v5:1.5.0") == "nvidia/nv-embedqa-e5-v5"
    assert served_model("nginx") == ""


def _docker_secret(config: dict[str, Any], type_: str = "kubernetes.io/dockerconfigjson") -> Any:
    key = ".dockerconfigjson" if type_.endswith("json") else ".dockercfg"
    return {"type": type_, "data": {key: base64.b64encode(json.dumps(config).encode()).decode()}}


def test_only_docker_config_secrets_carry_credentials() -> None:
    good = _docker_secret({"auths": {"nvcr.io": {"auth": "eA=="}}})
    legacy = _docker_secret(
        {"https://index.docker.io/v1/": {"auth": "eA=="}}, "kubernetes.io/dockercfg"
    )
    opaque = {"type": "Opaque", "data": {"NGC_API_KEY": "eA=="}}
    assert credential_hosts([good, legacy, opaque]) == {"nvcr.io", "docker.io"}
    assert credential_hosts([opaque]) == set()


def test_pull_secrets_come_from_the_pod_and_its_service_account() -> None:
    pod = {"spec": {"imagePullSecrets": [{"name": "ngc-secret"}]}}
    account = {"imagePullSecrets": [{"name": "mirror"}, {"name": "ngc-secret"}]}
    assert pull_secret_names(pod, account) == ["ngc-secret", "mirror"]


def test_env_from_a_missing_secret_or_key_is_a_config_error() -> None:
    store = {("Secret", "ngc-api"): {"data": {"NGC_API_KEY": "eA=="}}}

    def lookup(kind: str, name: str) -> Any:
        return store.get((kind, name))

    def env(name: str, key: str, optional: bool = False) -> Any:
        ref = {"name": name, "key": key, **({"optional": True} if optional else {})}
        return {"env": [{"name": "X", "valueFrom": {"secretKeyRef": ref}}]}

    assert config_problem(env("ngc-api", "NGC_API_KEY"), "nim", lookup) is None
    assert config_problem(env("ngc", "NGC_API_KEY"), "nim", lookup) == 'secret "ngc" not found'
    assert config_problem(env("ngc-api", "HF_TOKEN"), "nim", lookup) == (
        "couldn't find key HF_TOKEN in Secret nim/ngc-api"
    )
    assert config_problem(env("ngc", "K", optional=True), "nim", lookup) is None
    from_cm = {"envFrom": [{"configMapRef": {"name": "settings"}}]}
    assert config_problem(from_cm, "nim", lookup) == 'configmap "settings" not found'
