"""Multi-node NIMServices: a LeaderWorkerSet group per replica (nim-operator.md §2.9).

A NIMService with ``spec.multiNode`` and pipeline parallelism above 1 runs as
LeaderWorkerSet ``<name>-lws``: each group is one leader and ``pipeline - 1``
workers, ``tensor`` GPUs each. MPI mode (the default) adds ConfigMaps
``<name>-mpi-config`` (one hostfile per group) and ``<name>-mpi-start-script``
and Secret ``<name>-ssh-pk``, which both pod templates mount; Ray mode needs
none of them.

The containers keep the NIM image's own entrypoint in MPI mode (it reads the
``NIM_*`` multi-node env, the hostfile and the mounted start script); Ray mode
passes ``nim-serve-ray`` arguments. The render stays pure and repeatable: the
Secret is rendered without its key, and the controller fills in a freshly
generated one (``with_generated_key``) only when it creates the Secret, which
it never updates. The MPI objects carry no ``nvidia.com/parent-spec-hash``, so
a spec edit that does not change their content does not rewrite them.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from manifests import configmap, pod
from manifests.hashing import short_hash

LWS_API_VERSION = "leaderworkerset.x-k8s.io/v1"
COMPUTE_DOMAIN_API_VERSION = "resource.nvidia.com/v1beta1"
LEADER_ROLE_LABEL = "nim-llm-role"
MPI_CONFIG_MODE = 0o555
SSH_KEY_MODE = 0o400
START_SCRIPT_KEY = "start-mpi-cluster.sh"
SSH_KEY_KEY = "private.key"

START_MPI_SCRIPT = """#!/bin/bash
# Run by the NIM on each LeaderWorkerSet leader once the group is up: serve the
# OpenAI-compatible API (the NIM SDK drives the MPI workers itself).
python=/opt/nim/llm/.venv/bin/python3
server=("$python" -m nim_llm_sdk.entrypoints.openai.api_server)
if [ "${NIM_JSONL_LOGGING:-0}" = "1" ]; then
  "${server[@]}" 2>&1 | "$python" -m nim_llm_sdk.logging.pack_all_logs_into_json
else
  exec "${server[@]}"
fi
"""


def lws_name(name: str) -> str:
    return f"{name}-lws"


def leader_selector(name: str) -> dict[str, str]:
    """Selector of a multi-node NIMService's Service: the group leaders."""
    return {"app": lws_name(name), LEADER_ROLE_LABEL: "leader"}


def common_env(pipeline: int, tensor: int) -> list[dict[str, Any]]:
    return [
        pod.env_var("NIM_MPI_ALLOW_RUN_AS_ROOT", "0"),
        pod.env_var("NIM_NUM_COMPUTE_NODES", str(pipeline)),
        pod.env_var("NIM_MULTI_NODE", "1"),
        pod.env_var("NIM_TENSOR_PARALLEL_SIZE", str(tensor)),
        pod.env_var("NIM_PIPELINE_PARALLEL_SIZE", str(pipeline)),
        pod.field_env_var(
            "NIM_NODE_RANK", "metadata.labels['leaderworkerset.sigs.k8s.io/worker-index']"
        ),
    ]


def leader_env(pipeline: int, tensor: int, mpi_start_timeout: int) -> list[dict[str, Any]]:
    return [
        *common_env(pipeline, tensor),
        pod.env_var("NIM_LEADER_ROLE", "1"),
        pod.env_var("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
        pod.env_var("OMPI_MCA_plm_rsh_args", "-o ConnectionAttempts=20"),
        pod.env_var("GPUS_PER_NODE", str(tensor)),
        pod.env_var("CLUSTER_START_TIMEOUT", str(mpi_start_timeout)),
        pod.field_env_var(
            "CLUSTER_SIZE", "metadata.annotations['leaderworkerset.sigs.k8s.io/size']"
        ),
        pod.field_env_var(
            "GROUP_INDEX", "metadata.labels['leaderworkerset.sigs.k8s.io/group-index']"
        ),
    ]


def worker_env(pipeline: int, tensor: int) -> list[dict[str, Any]]:
    return [
        *common_env(pipeline, tensor),
        pod.env_var("NIM_LEADER_ROLE", "0"),
        pod.field_env_var(
            "LEADER_NAME", "metadata.annotations['leaderworkerset.sigs.k8s.io/leader-name']"
        ),
        pod.field_env_var("NAMESPACE", "metadata.namespace"),
        pod.field_env_var("LWS_NAME", "metadata.labels['leaderworkerset.sigs.k8s.io/name']"),
    ]


def hostfiles(
    name: str, namespace: str, replicas: int, pipeline: int, tensor: int
) -> dict[str, str]:
    """``hostfile-<group>``: leader, then each worker's DNS name; ``tensor`` slots each."""
    out = {}
    for group in range(replicas):
        lines = [f"localhost slots={tensor}"]
        lines += [
            f"{lws_name(name)}-{group}-{worker}.{lws_name(name)}.{namespace}.svc slots={tensor}"
            for worker in range(1, pipeline)
        ]
        out[f"hostfile-{group}"] = "".join(f"{line}\n" for line in lines)
    return out


def mpi_config_map(meta: dict[str, Any], hosts: Mapping[str, str]) -> dict[str, Any]:
    return configmap.build(meta, hosts)


def start_script_config_map(meta: dict[str, Any]) -> dict[str, Any]:
    return configmap.build(meta, {START_SCRIPT_KEY: START_MPI_SCRIPT})


def generate_ssh_private_key() -> bytes:
    """A new RSA-2048 private key in PEM (PKCS#1), for ``ssh_secret``."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def ssh_secret(meta: dict[str, Any]) -> dict[str, Any]:
    """Secret ``<name>-ssh-pk`` that a group's pods share for MPI over ssh, without its key.

    ``with_generated_key`` adds the key when the Secret is created.
    """
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque"}


def ssh_secret_name(name: str) -> str:
    return f"{name}-ssh-pk"


def with_generated_key(
    secret: Mapping[str, Any], private_key_pem: bytes | None = None
) -> dict[str, Any]:
    """``secret`` holding ``private.key`` (a new RSA-2048 key unless one is given)."""
    pem = private_key_pem if private_key_pem is not None else generate_ssh_private_key()
    out = dict(secret)
    out["data"] = {SSH_KEY_KEY: base64.b64encode(pem).decode()}
    return out


def mpi_volumes(name: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(leader volumes, worker volumes) of MPI mode, in NVIDIA's order."""
    shared = [
        pod.empty_dir_volume("ssh-dotfiles"),
        {
            "name": "ssh-pk",
            "secret": {"secretName": ssh_secret_name(name), "defaultMode": SSH_KEY_MODE},
        },
        pod.config_map_volume(
            "start-mpi-script", f"{name}-mpi-start-script", default_mode=MPI_CONFIG_MODE
        ),
    ]
    leader = [
        pod.config_map_volume("mpi-config", f"{name}-mpi-config", default_mode=MPI_CONFIG_MODE),
        *shared,
    ]
    worker = [pod.empty_dir_volume("ssh-confs"), *shared]
    return leader, worker


def mpi_mounts() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(leader mounts, worker mounts) of MPI mode, in NVIDIA's order."""
    shared = [
        pod.volume_mount("ssh-dotfiles", "/opt/nim/llm/.ssh"),
        pod.volume_mount("ssh-pk", "/opt/nim/llm/pk"),
        pod.volume_mount(
            "start-mpi-script", f"/opt/nim/{START_SCRIPT_KEY}", sub_path=START_SCRIPT_KEY
        ),
    ]
    leader = [pod.volume_mount("mpi-config", "/etc/mpi"), *shared]
    worker = [pod.volume_mount("ssh-confs", "/ssh-confs"), *shared]
    return leader, worker


def ray_args(ray_port: int) -> tuple[list[str], list[str]]:
    """(leader args, worker args) of Ray mode."""
    return (
        ["nim-serve-ray", "--head", "--port", str(ray_port)],
        ["nim-serve-ray", "--head-address", f"$(LWS_LEADER_ADDRESS):{ray_port}"],
    )


RAY_WORKER_STARTUP_PROBE: dict[str, Any] = {
    "exec": {"command": ["/bin/sh", "-c", "ray status"]},
    "initialDelaySeconds": 30,
    "timeoutSeconds": 5,
    "periodSeconds": 10,
    "failureThreshold": 3,
}


def compute_domain_template_name(nimservice_name: str) -> str:
    return f"cd-claimtemplate-{short_hash(nimservice_name)}"


def compute_domain(meta: dict[str, Any], *, num_nodes: int, template_name: str) -> dict[str, Any]:
    """A ComputeDomain (NVIDIA DRA driver) spanning the group's nodes."""
    return {
        "apiVersion": COMPUTE_DOMAIN_API_VERSION,
        "kind": "ComputeDomain",
        "metadata": meta,
        "spec": {
            "numNodes": num_nodes,
            "channel": {
                "resourceClaimTemplate": {"name": template_name},
                "allocationMode": "Single",
            },
        },
    }


def leader_worker_set(
    meta: dict[str, Any],
    *,
    replicas: int | None,
    size: int,
    leader_template: dict[str, Any],
    worker_template: dict[str, Any],
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "leaderWorkerTemplate": {
            "size": size,
            "restartPolicy": "RecreateGroupOnPodRestart",
            "leaderTemplate": leader_template,
            "workerTemplate": worker_template,
        },
        "startupPolicy": "LeaderCreated",
        "networkConfig": {"subdomainPolicy": "Shared"},
        "rolloutStrategy": {
            "type": "RollingUpdate",
            "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": LWS_API_VERSION,
        "kind": "LeaderWorkerSet",
        "metadata": meta,
        "spec": spec,
    }
