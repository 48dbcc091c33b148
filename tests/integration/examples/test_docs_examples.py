"""Every docs/examples NIM manifest, with the prerequisites docs/examples/README.md
lists, reaches the state the README promises on localcluster (Ready, or the
blocker it names).

One cluster for all of them (sped-up simulator, enough GPU nodes for all at
once); each example goes into its own namespace (the files all say
``nim-service``) so same-named NIMCaches do not collide.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from api.serialize import dump
from localcluster import LocalCluster
from localcluster.addons import install_ecosystem
from nimctl.demo import apply_objects
from nimctl.operator import install_crds
from nimctl.why import explain
from nimctl_runtime.client import Client
from nimctl_runtime.meta import Obj
from platforms.nemo.demo import dependency_objects, sample_crs
from tests.integration.controllers.harness import start_operator, wait_for

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
API = "apps.nvidia.com/v1alpha1"

PROFILE = {
    "description": "room for every example at once",
    "pools": [
        {"namePrefix": "gpu-node", "count": 6, "cpu": "96", "memory": "1536Gi", "gpus": 8,
         "gpuProduct": "NVIDIA-H100-80GB-HBM3"},
        {"namePrefix": "cpu-node", "count": 1, "cpu": "32", "memory": "128Gi"},
    ],
}  # fmt: skip


def _secret(name: str, data: dict[str, str], type_: str = "Opaque") -> Obj:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "type": type_,
            "stringData": data}  # fmt: skip


def _pull_secret(name: str, server: str = "nvcr.io") -> Obj:
    cfg = json.dumps({"auths": {server: {"username": "$oauthtoken", "password": "x"}}})
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name},
        "type": "kubernetes.io/dockerconfigjson",
        "data": {".dockerconfigjson": base64.b64encode(cfg.encode()).decode()},
    }


def _config_map(name: str, data: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def _pvc(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "50Gi"}}},
    }


def _commented(file: str) -> Obj:
    """The manifest a file's header comment shows (indented under ``#``), as the user copies it."""
    lines = (EXAMPLES / file).read_text().splitlines()
    body = [line.removeprefix("#   ") for line in lines if line.startswith("#   ")]
    obj: Obj = yaml.safe_load("\n".join(body))
    return obj


NGC = [_pull_secret("ngc-secret"), _secret("ngc-api-secret", {"NGC_API_KEY": "nvapi-x"})]
HF = [_pull_secret("ngc-secret"), _secret("hf-api-secret", {"HF_TOKEN": "hf_x"})]


@dataclass
class Example:
    """A README row: the file, what it needs on top, and what it promises."""

    file: str
    needs: list[Obj] = field(default_factory=lambda: list(NGC))
    promises: dict[str, str] = field(default_factory=dict)
    """``Kind/name`` -> ``Ready`` or the Ready condition's reason; default: every CR Ready."""
    names: str = ""
    """What a blocked CR's Ready message must name (the README's prerequisite)."""


EXAMPLES_PROMISED = [
    Example("nim-minimal.yaml"),
    Example("nimservice-deprecated-ingress.yaml"),
    Example("nimservice-emptydir.yaml"),
    Example("nimservice-pvc-create.yaml"),
    Example("nimcache-ngc-profiles.yaml"),
    Example("nimcache-ngc-all.yaml"),
    Example("nimcache-ngc-selection.yaml"),
    Example("nimbuild-engine.yaml"),
    Example("nimpipeline-rag.yaml"),
    Example("nimpipeline-guardrail.yaml"),
    Example("nim-hf-multi-llm.yaml", needs=HF),
    Example("nimcache-hf.yaml", needs=HF),
    Example("nimservice-hf-model-env.yaml", needs=HF),
    Example("nimservice-autoscaling.yaml"),
    Example("nimservice-gateway-httproute.yaml"),
    Example("nimservice-gateway-grpcroute.yaml"),
    Example("nimservice-router-ingress.yaml", needs=[*NGC, _secret(
        "nim-example-com-tls", {"tls.crt": "x", "tls.key": "x"}, "kubernetes.io/tls")]),
    Example("nimservice-full.yaml", needs=[*NGC, _config_map("corporate-ca", {"ca.crt": "x"})]),
    Example("nimservice-kserve-standard.yaml"),
    Example("nimservice-kserve-knative.yaml"),
    Example("nimservice-lora-existing-pvc.yaml", needs=[*NGC, _pvc("nim-lora-pvc")]),
    Example("nimcache-ngc-mirror-https.yaml", needs=[
        _pull_secret("mirror-registry-secret"), _secret("mirror-api-secret", {"NGC_API_KEY": "x"})]),
    Example("nimcache-ngc-mirror-jfrog.yaml", needs=[
        _pull_secret("artifactory-registry-secret"),
        _secret("artifactory-token", {"NGC_API_KEY": "x"}),
        _config_map("corporate-ca", {"ca.crt": "x"})]),
    Example("nimcache-ngc-mirror-s3.yaml", needs=[*NGC, _secret(
        "s3-mirror-credentials", {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"})]),
    Example("nimservice-dra-claim-template.yaml",
            needs=[*NGC, _commented("nimservice-dra-claim-template.yaml")]),
    Example("nimservice-dra-claim-creation.yaml"),
    Example("nimservice-epp-inferencepool.yaml"),
    Example(
        "nimservice-confidential-computing.yaml",
        promises={"NIMCache/meta-llama3-8b-instruct": "Ready",
                  "NIMService/meta-llama3-8b-instruct-cc": "Unschedulable"},
        names="Insufficient nvidia.com/pgpu",
    ),
]  # fmt: skip


def _load(example: Example, namespace: str) -> tuple[list[Obj], list[Obj]]:
    """The namespace and prerequisites, and the example's objects, all in *namespace*."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / example.file).read_text()) if d]
    objs = [copy.deepcopy(d) for d in [*example.needs, *docs]]
    for obj in objs:
        obj["metadata"]["namespace"] = namespace
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    return [ns, *objs[: len(example.needs)]], objs[len(example.needs) :]


def _state(obj: Obj) -> tuple[str, str]:
    """``Ready``, else the Ready condition's reason; and its message."""
    status = obj.get("status") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
    if status.get("state") == "Ready":
        return "Ready", ""
    return str(ready.get("reason") or status.get("state") or ""), str(ready.get("message", ""))


async def _reaches(
    admin: Client, namespace: str, kind: str, name: str, want: str, names: str = ""
) -> str:
    async def check() -> bool:
        obj: Obj = await admin.get(API, kind, name, namespace)
        state, message = _state(obj)
        return state == want and (want == "Ready" or names in message)

    try:
        await wait_for(check, timeout=60, interval=0.5)
        return ""
    except TimeoutError:
        now, _ = _state(await admin.get(API, kind, name, namespace))
        report = await explain(admin, kind, name, namespace)
        why = "; ".join(report.ending())
        return f"{namespace} {kind}/{name}: wanted {want}, is {now or '<none>'} ({why})"


async def test_each_example_reaches_what_the_readme_promises(tmp_path: Path) -> None:
    cluster = LocalCluster(workdir=tmp_path)
    cluster.simulator_options = {"profile": PROFILE, "speed": 20.0}
    async with cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            await install_crds(admin)
            await install_ecosystem(admin)
            operator = await start_operator(kubeconfig)
            try:
                checks = []
                for i, example in enumerate(EXAMPLES_PROMISED):
                    namespace = f"ex{i}-{example.file.removesuffix('.yaml')}"[:63].rstrip("-")
                    first, objs = _load(example, namespace)
                    await apply_objects(admin, first)
                    await apply_objects(admin, objs)
                    for obj in objs:
                        key = f"{obj['kind']}/{obj['metadata']['name']}"
                        if obj["apiVersion"] != API:
                            continue
                        want = example.promises.get(key, "Ready")
                        name = obj["metadata"]["name"]
                        checks.append(
                            _reaches(admin, namespace, obj["kind"], name, want, example.names)
                        )
                checks.extend(await _nemo_examples(admin))
                failures = [f for f in await asyncio.gather(*checks) if f]
                assert not failures, "\n".join(failures)
            finally:
                await operator.shutdown()


NEMO_NAMESPACE = "nemo"
"""The NeMo examples (and ``nimcache-datastore.yaml``) stay in the namespace they name:
their dependency hosts are ``<svc>.nemo.svc.cluster.local``."""


async def _nemo_examples(admin: Client) -> list[Coroutine[Any, Any, str]]:
    """Apply the NeMo examples with what the README says they need (the Secrets and
    ConfigMaps they name, and the Services at the hosts they name: PostgreSQL,
    MinIO, Argo, Milvus, MLflow, OTel, Volcano's scheduler is not needed on
    localcluster), then the NeMo Data Store cache with its ``hf-auth`` Secret;
    return the checks that each reaches Ready."""
    crs = sample_crs(EXAMPLES)
    await apply_objects(admin, dependency_objects(crs))
    datastore_cache = [d for d in yaml.safe_load_all((EXAMPLES / "nimcache-datastore.yaml").read_text()) if d]  # fmt: skip
    needs = [_pull_secret("ngc-secret"), _secret("hf-auth", {"HF_TOKEN": "hf_x"})]
    for obj in needs:
        obj["metadata"]["namespace"] = NEMO_NAMESPACE
    await apply_objects(admin, needs)
    objs = [dump(cr) for cr in crs] + datastore_cache
    await apply_objects(admin, objs)
    return [
        _reaches(admin, NEMO_NAMESPACE, o["kind"], o["metadata"]["name"], "Ready") for o in objs
    ]
