"""The commands `kubectl exec` runs in a simulated container, without a server."""

from __future__ import annotations

from typing import Any

from localcluster.containershell import Container, run

NODES: dict[str, dict[str, Any]] = {
    "gpu-node-0": {
        "metadata": {
            "name": "gpu-node-0",
            "annotations": {"localcluster.nimctl.io/gpu-product": "NVIDIA-L40S"},
            "labels": {"nvidia.com/gpu.memory": "46068"},
        },
        "status": {"capacity": {"nvidia.com/gpu": "4"}},
    },
    "cpu-node-0": {"metadata": {"name": "cpu-node-0"}, "status": {"capacity": {}}},
}
SECRET = {"metadata": {"name": "creds"}, "data": {"token": "c2VjcmV0"}}


class FakeStorage:
    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        if kind == "Node" and name in NODES:
            return NODES[name]
        if kind == "Secret" and name == "creds":
            return SECRET
        raise LookupError(name)


def _container(node: str, gpus: int = 0) -> Container:
    spec: dict[str, Any] = {
        "name": "c",
        "env": [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        "volumeMounts": [{"name": "creds", "mountPath": "/secrets"}],
    }
    if gpus:
        spec["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    pod = {
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"nodeName": node, "volumes": [{"name": "creds", "secret": {"secretName": "creds"}}]},
    }
    return Container(FakeStorage(), pod, spec)  # type: ignore[arg-type]


def test_nvidia_smi_lists_the_gpus_allocated_to_the_container() -> None:
    out = run(_container("gpu-node-0", gpus=3), ["nvidia-smi"])
    assert out.code == 0
    assert out.stdout.count("NVIDIA L40S") == 3
    assert "0MiB / 46068MiB" in out.stdout


def test_nvidia_smi_without_gpus_answers_as_nvidia_smi_does() -> None:
    no_limit = run(_container("gpu-node-0"), ["nvidia-smi"])
    assert (no_limit.code, no_limit.stdout) == (6, "No devices were found\n")
    cpu_node = run(_container("cpu-node-0"), ["nvidia-smi"])
    assert cpu_node.code == 9
    assert "couldn't communicate with the NVIDIA driver" in cpu_node.stderr


def test_files_env_and_sh_c() -> None:
    c = _container("cpu-node-0")
    assert run(c, ["cat", "/secrets/token"]).stdout == "secret"
    assert run(c, ["ls", "/secrets"]).stdout == "token\n"
    assert run(c, ["sh", "-c", "printenv TOKEN NODE"]).stdout == "secret\ncpu-node-0\n"
    missing = run(c, ["ls", "/nowhere"])
    assert (missing.code, missing.stderr) == (
        2,
        "ls: cannot access '/nowhere': No such file or directory\n",
    )


def test_anything_else_is_not_available() -> None:
    c = _container("cpu-node-0")
    for argv in (["python", "-V"], ["sh"], ["sh", "-c", "cat /secrets/token | wc -c"]):
        out = run(c, argv)
        assert out.code == 127, argv
        assert "is not available in localcluster" in out.stderr
