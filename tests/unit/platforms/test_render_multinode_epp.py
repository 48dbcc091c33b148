"""Multi-node (LeaderWorkerSet) and endpoint-picker rendering (nim-operator.md §2.8, §2.9)."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from cryptography.hazmat.primitives.serialization import load_pem_private_key
from ruamel.yaml import YAML

from platforms.standalone import Capabilities, RenderContext, UnsupportedSpec, render
from platforms.standalone import multinode as mn
from platforms.standalone.context import LEADER_WORKER_SET, OPTIONAL_GVKS
from tests.unit.platforms.helpers import (
    NAME,
    NS,
    assert_valid_k8s,
    by_kind,
    env_of,
    kinds,
    nimservice,
)

MPI: dict[str, Any] = {
    "replicas": 2,
    "multiNode": {"parallelism": {"pipeline": 3, "tensor": 4}, "mpi": {"mpiStartTimeout": 600}},
}
RAY: dict[str, Any] = {
    "replicas": 1,
    "multiNode": {"parallelism": {"pipeline": 2, "tensor": 8}, "ray": {"rayPort": 6380}},
}


def _templates(objs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    lws = by_kind(objs, "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    return lws["leaderTemplate"], lws["workerTemplate"]


def test_mpi_group_objects_and_selectors() -> None:
    objs = render(nimservice(MPI))
    assert "Deployment" not in kinds(objs)
    lws = by_kind(objs, "LeaderWorkerSet")
    assert lws["metadata"]["name"] == f"{NAME}-lws"
    spec = lws["spec"]
    assert spec["replicas"] == 2
    assert spec["leaderWorkerTemplate"]["size"] == 3
    assert spec["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert spec["startupPolicy"] == "LeaderCreated"
    assert spec["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert spec["rolloutStrategy"]["rollingUpdateConfiguration"] == {
        "maxSurge": 0,
        "maxUnavailable": 1,
    }
    leader, worker = _templates(objs)
    assert leader["metadata"]["labels"]["app"] == f"{NAME}-lws"
    assert leader["metadata"]["labels"]["nim-llm-role"] == "leader"
    assert "labels" not in worker["metadata"]
    assert by_kind(objs, "Service")["spec"]["selector"] == {
        "app": f"{NAME}-lws",
        "nim-llm-role": "leader",
    }
    assert leader["spec"]["containers"][0]["name"] == "nim-leader"
    assert worker["spec"]["containers"][0]["name"] == "nim-worker"
    assert_valid_k8s(objs)


def test_mpi_hostfiles_and_start_script() -> None:
    objs = render(nimservice(MPI))
    cms = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ConfigMap"}
    hosts = cms[f"{NAME}-mpi-config"]["data"]
    lws = f"{NAME}-lws"
    assert hosts == {
        f"hostfile-{g}": (
            "localhost slots=4\n"
            f"{lws}-{g}-1.{lws}.{NS}.svc slots=4\n"
            f"{lws}-{g}-2.{lws}.{NS}.svc slots=4\n"
        )
        for g in (0, 1)
    }
    script = cms[f"{NAME}-mpi-start-script"]["data"]["start-mpi-cluster.sh"]
    assert script.startswith("#!/bin/bash")
    assert "nim_llm_sdk.entrypoints.openai.api_server" in script
    assert "pack_all_logs_into_json" in script  # when NIM_JSONL_LOGGING=1
    leader, worker = _templates(objs)
    # MPI mode keeps the NIM image's own entrypoint on both roles.
    for template in (leader, worker):
        assert "command" not in template["spec"]["containers"][0]
        assert "args" not in template["spec"]["containers"][0]


def test_mpi_env_volumes_and_nim_env_precedence() -> None:
    spec = {**MPI, "env": [{"name": "NIM_TENSOR_PARALLEL_SIZE", "value": "2"}]}
    leader, worker = _templates(render(nimservice(spec)))
    lenv = env_of(leader["spec"]["containers"][0])
    wenv = env_of(worker["spec"]["containers"][0])
    for env in (lenv, wenv):
        assert env["NIM_MULTI_NODE"] == "1" and env["NIM_NUM_COMPUTE_NODES"] == "3"
        assert env["NIM_PIPELINE_PARALLEL_SIZE"] == "3"
        assert env["NIM_TENSOR_PARALLEL_SIZE"] == "2"  # the NIMService's env wins
        assert env["NIM_NODE_RANK"]["fieldRef"]["fieldPath"].endswith("worker-index']")
    assert lenv["NIM_LEADER_ROLE"] == "1" and wenv["NIM_LEADER_ROLE"] == "0"
    assert lenv["CLUSTER_START_TIMEOUT"] == "600" and lenv["GPUS_PER_NODE"] == "4"
    assert wenv["NAMESPACE"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    lvols = {v["name"]: v for v in leader["spec"]["volumes"]}
    wvols = {v["name"]: v for v in worker["spec"]["volumes"]}
    assert lvols["mpi-config"]["configMap"] == {"name": f"{NAME}-mpi-config", "defaultMode": 365}
    assert lvols["ssh-pk"]["secret"] == {"secretName": f"{NAME}-ssh-pk", "defaultMode": 256}
    assert "mpi-config" not in wvols and "ssh-confs" in wvols and "ssh-pk" in wvols
    # NVIDIA's order: after the NIM's own volumes, the leader's mpi-config or the
    # worker's ssh-confs first, then ssh-dotfiles, ssh-pk, start-mpi-script.
    shared = ["ssh-dotfiles", "ssh-pk", "start-mpi-script"]
    assert [v["name"] for v in leader["spec"]["volumes"]][-4:] == ["mpi-config", *shared]
    assert [v["name"] for v in worker["spec"]["volumes"]][-4:] == ["ssh-confs", *shared]
    for template, first in ((leader, "mpi-config"), (worker, "ssh-confs")):
        mounts = template["spec"]["containers"][0]["volumeMounts"]
        assert [m["name"] for m in mounts][-4:] == [first, *shared]
        assert mounts[-1]["subPath"] == "start-mpi-cluster.sh"
    lmounts = {m["name"]: m for m in leader["spec"]["containers"][0]["volumeMounts"]}
    assert lmounts["start-mpi-script"] == {
        "name": "start-mpi-script",
        "mountPath": "/opt/nim/start-mpi-cluster.sh",
        "subPath": "start-mpi-cluster.sh",
    }


def test_group_pods_carry_only_what_nvidias_lws_template_renders() -> None:
    """NVIDIA's lws.yaml has no service account, affinity or runtime class on the pods,
    no scheduler on workers, no pull policy or command on the NIM container; user init
    and sidecar containers get the multi-node env common to both roles. Anything more
    would change the templates of the LeaderWorkerSets NVIDIA's operator made."""
    side = {"name": "sidecar", "image": {"repository": "busybox", "tag": "1"}}
    spec = {
        **MPI,
        "image": {"repository": "nvcr.io/nim/x", "tag": "1", "pullPolicy": "Always"},
        "command": ["/bin/serve"],
        "schedulerName": "gang",
        "runtimeClassName": "nvidia",
        "affinity": {"nodeAffinity": {}},
        "initContainers": [{**side, "name": "init"}],
        "sidecarContainers": [side],
    }
    leader, worker = _templates(render(nimservice(spec)))
    for template in (leader, worker):
        pod = template["spec"]
        assert not {"serviceAccountName", "affinity", "runtimeClassName"} & set(pod)
        nim = pod["containers"][0]
        assert "imagePullPolicy" not in nim and "command" not in nim
        for extra in (pod["initContainers"][0], pod["containers"][1]):
            env = env_of(extra)
            assert env["NIM_MULTI_NODE"] == "1" and env["NIM_CACHE_PATH"] == "/model-store"
            assert "NIM_LEADER_ROLE" not in env and "CLUSTER_SIZE" not in env
    assert leader["spec"]["schedulerName"] == "gang"
    assert "schedulerName" not in worker["spec"]


def test_no_ngc_key_in_group_pods_without_auth_secret() -> None:
    svc = nimservice(MPI)
    del svc["spec"]["authSecret"]
    leader, worker = _templates(render(svc))
    assert "NGC_API_KEY" not in env_of(leader["spec"]["containers"][0])
    assert "NGC_API_KEY" not in env_of(worker["spec"]["containers"][0])


def test_ray_mode() -> None:
    objs = render(nimservice(RAY))
    assert "ConfigMap" not in kinds(objs) and "Secret" not in kinds(objs)
    leader, worker = _templates(objs)
    lctr, wctr = leader["spec"]["containers"][0], worker["spec"]["containers"][0]
    assert lctr["args"] == ["nim-serve-ray", "--head", "--port", "6380"]
    assert wctr["args"] == ["nim-serve-ray", "--head-address", "$(LWS_LEADER_ADDRESS):6380"]
    for ctr in (lctr, wctr):
        assert {"name": "ray", "containerPort": 6380, "protocol": "TCP"} in ctr["ports"]
        assert not any(m["name"].startswith("ssh") for m in ctr["volumeMounts"])
    assert wctr["startupProbe"]["exec"] == {"command": ["/bin/sh", "-c", "ray status"]}
    assert "readinessProbe" not in wctr and "readinessProbe" in lctr
    assert_valid_k8s(objs)


def test_compute_domain_created_and_claimed() -> None:
    spec = {**RAY, "multiNode": {**RAY["multiNode"], "computeDomain": {"create": True}}}
    objs = render(nimservice(spec, name="test-nimservice"))
    cd = by_kind(objs, "ComputeDomain")
    assert cd["spec"] == {
        "numNodes": 2,
        "channel": {
            "resourceClaimTemplate": {"name": "cd-claimtemplate-6bb8bf548c"},
            "allocationMode": "Single",
        },
    }
    leader, _ = _templates(objs)
    (claim,) = leader["spec"]["resourceClaims"]
    assert claim["resourceClaimTemplateName"] == "cd-claimtemplate-6bb8bf548c"
    assert leader["spec"]["containers"][0]["resources"]["claims"] == [{"name": claim["name"]}]


def test_existing_compute_domain_uses_its_template() -> None:
    spec = {**RAY, "multiNode": {**RAY["multiNode"], "computeDomain": {"name": "shared-cd"}}}
    objs = render(nimservice(spec), RenderContext(compute_domain_claim_template="shared-cd-rct"))
    assert "ComputeDomain" not in kinds(objs)
    leader, _ = _templates(objs)
    assert leader["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] == "shared-cd-rct"


def test_pipeline_one_is_a_plain_deployment() -> None:
    objs = render(nimservice({"multiNode": {"parallelism": {"pipeline": 1, "tensor": 4}}}))
    assert "LeaderWorkerSet" not in kinds(objs)
    assert by_kind(objs, "Service")["spec"]["selector"] == {"app": NAME}


def test_missing_lws_api_is_a_clear_error() -> None:
    ctx = RenderContext(capabilities=Capabilities.from_gvks(OPTIONAL_GVKS - {LEADER_WORKER_SET}))
    with pytest.raises(UnsupportedSpec, match="LeaderWorkerSet API"):
        render(nimservice(MPI), ctx)


def test_ssh_secret_rendered_without_key_and_filled_on_create() -> None:
    objs = render(nimservice(MPI))
    secret = next(o for o in objs if o["kind"] == "Secret")
    assert secret["metadata"]["name"] == f"{NAME}-ssh-pk"
    # The render is repeatable: no generated key in it (the controller adds one on create).
    assert "data" not in secret
    assert render(nimservice(MPI)) == objs
    filled = mn.with_generated_key(secret)
    key = load_pem_private_key(base64.b64decode(filled["data"]["private.key"]), password=None)
    assert key.key_size == 2048  # type: ignore[union-attr]
    assert "data" not in secret  # the desired object is not changed in place
    assert_valid_k8s([filled])


def test_mpi_objects_do_not_change_with_an_unrelated_spec_edit() -> None:
    def mpi_objects(spec: dict[str, Any]) -> list[dict[str, Any]]:
        return [o for o in render(nimservice(spec)) if o["kind"] in ("ConfigMap", "Secret")]

    before = mpi_objects(MPI)
    after = mpi_objects({**MPI, "image": {"repository": "nvcr.io/nim/other", "tag": "2"}})
    assert [o["kind"] for o in before] == ["ConfigMap", "ConfigMap", "Secret"]
    assert after == before


# -- endpoint picker -------------------------------------------------------------------------

EPP_CONFIG = {
    "apiVersion": "inference.networking.x-k8s.io/v1alpha1",
    "kind": "EndpointPickerConfig",
    "plugins": [{"type": "queue-scorer"}],
    "schedulingProfiles": [{"name": "default", "plugins": [{"pluginRef": "queue-scorer"}]}],
}


def _epp(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "image": {"pullSecrets": ["ngc-secret"], "pullPolicy": "IfNotPresent"},
        "expose": {
            "router": {
                "hostDomainName": "example.com",
                "gateway": {
                    "namespace": "gw",
                    "name": "g",
                    "backendRef": {
                        "group": "inference.networking.k8s.io",
                        "kind": "InferencePool",
                        "name": NAME,
                    },
                },
                "eppConfig": {
                    "containerSpec": {
                        "name": "epp",
                        "image": {"repository": "registry.k8s.io/epp", "tag": "v1.0.0"},
                    },
                    **(extra or {"config": EPP_CONFIG}),
                },
            }
        },
    }


def test_epp_objects() -> None:
    objs = render(nimservice(_epp()))
    epp = f"{NAME}-epp"
    named = {(o["kind"], o["metadata"]["name"]) for o in objs}
    for kind in ("ServiceAccount", "Role", "RoleBinding", "Service", "Deployment"):
        assert (kind, epp) in named
    assert ("ConfigMap", f"{NAME}-epp-config") in named
    pool = by_kind(objs, "InferencePool")
    assert pool["apiVersion"] == "inference.networking.k8s.io/v1"
    assert pool["spec"] == {
        "selector": {"matchLabels": {"app": NAME}},
        "targetPorts": [{"number": 8000}],
        "endpointPickerRef": {"name": epp, "port": {"number": 9002}},
    }
    cm = next(o for o in objs if o["kind"] == "ConfigMap")
    assert YAML(typ="safe").load(cm["data"]["default-plugins.yaml"]) == EPP_CONFIG
    dep = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == epp)
    ctr = dep["spec"]["template"]["spec"]["containers"][0]
    assert ctr["name"] == "epp" and ctr["image"] == "registry.k8s.io/epp:v1.0.0"
    assert ctr["args"][:2] == ["--pool-name", NAME]
    assert ctr["args"][ctr["args"].index("--config-file") + 1] == "/config/default-plugins.yaml"
    assert {p["name"]: p["containerPort"] for p in ctr["ports"]} == {
        "grpc-ext-proc": 9002,
        "grpc-health": 9003,
        "http-metrics": 9090,
    }
    assert ctr["readinessProbe"] == {
        "grpc": {"port": 9003},
        "initialDelaySeconds": 5,
        "periodSeconds": 10,
    }
    assert ctr["imagePullPolicy"] == "IfNotPresent"
    assert dep["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "ngc-secret"}]
    svc = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == epp)
    assert svc["spec"]["selector"] == {"app": epp}
    assert {p["name"]: p["port"] for p in svc["spec"]["ports"]} == {
        "grpc-ext-proc": 9002,
        "http-metrics": 9090,
    }
    role = next(o for o in objs if o["kind"] == "Role" and o["metadata"]["name"] == epp)
    assert role["rules"][0]["resources"] == ["inferencepools", "inferenceobjectives"]
    route = by_kind(objs, "HTTPRoute")
    assert route["spec"]["rules"][0]["backendRefs"][0]["kind"] == "InferencePool"
    assert_valid_k8s(objs)


def test_epp_with_config_map_ref() -> None:
    objs = render(nimservice(_epp({"configMapRef": {"name": "my-epp", "key": "plugins.yaml"}})))
    assert ("ConfigMap", f"{NAME}-epp-config") not in {
        (o["kind"], o["metadata"]["name"]) for o in objs
    }
    dep = next(
        o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == f"{NAME}-epp"
    )
    spec = dep["spec"]["template"]["spec"]
    assert spec["volumes"] == [{"name": "epp-config", "configMap": {"name": "my-epp"}}]
    args = spec["containers"][0]["args"]
    assert args[args.index("--config-file") + 1] == "/config/plugins.yaml"


def test_epp_left_out_without_inference_pool_api() -> None:
    ctx = RenderContext(capabilities=Capabilities.nothing())
    objs = render(nimservice(_epp()), ctx)
    assert "InferencePool" not in kinds(objs)
    assert all(not o["metadata"]["name"].endswith("-epp") for o in objs)


def test_multinode_gpu_auto_assignment_uses_tensor_parallelism() -> None:
    from tests.unit.platforms.helpers import nimcache

    spec = {**RAY, "storage": {"nimCache": {"name": "cache", "profile": "p"}}}
    cache = nimcache(status={"profiles": [{"name": "p", "config": {"tp": "16"}}]})
    leader, worker = _templates(render(nimservice(spec), RenderContext(nimcache=cache)))
    for template in (leader, worker):
        resources = template["spec"]["containers"][0]["resources"]
        assert resources["limits"]["nvidia.com/gpu"] == 8
        assert resources["requests"]["nvidia.com/gpu"] == 8
