"""The objects a NIMCache needs: shared RBAC, PVC, manifest pod, caching Job (nim-operator.md §3)."""

from __future__ import annotations

from typing import Any

import pytest

from platforms.standalone import RenderError
from platforms.standalone import nimcache as nc
from tests.unit.platforms.helpers import NS, assert_valid_k8s, env_of, nimcache

NGC_PROFILES = {
    "ngc": {
        "modelPuller": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4",
        "pullSecret": "ngc-secret",
        "authSecret": "ngc-api-secret",
        "model": {"profiles": ["p1", "p2"]},
    }
}
NGC_UNIVERSAL = {
    "ngc": {
        "modelPuller": "nvcr.io/nim/nvidia/llm-nim:1.12.0",
        "pullSecret": "ngc-secret",
        "authSecret": "ngc-api-secret",
        "modelEndpoint": "ngc://nim/meta/llama-3.1-8b-instruct:hf",
    }
}
HF = {
    "hf": {
        "endpoint": "https://huggingface.co",
        "namespace": "meta-llama",
        "modelName": "Llama-3.2-1B",
        "revision": "main",
        "authSecret": "hf-secret",
        "modelPuller": "nvcr.io/nim/nvidia/llm-nim:1.12.0",
        "pullSecret": "ngc-secret",
    }
}
DATASTORE_DATASET = {
    "dataStore": {
        "endpoint": "http://ds.nemo.svc:8000/v1/hf",
        "namespace": "default",
        "datasetName": "squad",
        "authSecret": "hf-auth",
        "modelPuller": "nvcr.io/nvidia/nemo-microservices/nds-v2-huggingface-cli:25.06",
        "pullSecret": "ngc-secret",
    }
}


def _job_container(job: dict[str, Any]) -> dict[str, Any]:
    ctr: dict[str, Any] = job["spec"]["template"]["spec"]["containers"][0]
    return ctr


def test_shared_rbac_objects() -> None:
    sa, role, binding = nc.service_account(NS), nc.role(NS), nc.role_binding(NS)
    assert sa["metadata"]["name"] == "nim-cache-sa"
    assert sa["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "k8s-nim-operator"}
    assert "ownerReferences" not in sa["metadata"]  # shared by every NIMCache in the namespace
    assert role["metadata"]["name"] == "nim-cache-role"
    (rule,) = role["rules"]
    assert rule["resourceNames"] == ["nonroot"] and rule["verbs"] == ["use"]
    assert nc.role(NS, proxy=True)["rules"][0]["resourceNames"] == ["anyuid"]
    assert binding["metadata"]["name"] == "nim-cache-rolebinding"
    assert binding["roleRef"]["name"] == "nim-cache-role"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "nim-cache-sa", "namespace": NS}
    ]
    assert_valid_k8s([sa, role, binding])


def test_pvc() -> None:
    cache = nimcache(spec={"storage": {"pvc": {"storageClass": "fast", "annotations": {"a": "b"}}}})
    claim = nc.build_pvc(cache)
    assert claim is not None
    assert claim["metadata"]["name"] == "cache-pvc"
    assert claim["metadata"]["labels"] == {
        "app": "k8s-nim-operator",
        "app.kubernetes.io/name": "cache",
        "app.kubernetes.io/instance": "cache",
        "app.kubernetes.io/part-of": "nim-cache",
        "app.kubernetes.io/managed-by": "k8s-nim-operator",
    }
    assert claim["metadata"]["ownerReferences"][0]["kind"] == "NIMCache"
    assert claim["spec"]["resources"]["requests"]["storage"] == "50Gi"
    assert claim["spec"]["storageClassName"] == "fast"
    assert claim["metadata"]["annotations"]["a"] == "b"
    assert_valid_k8s([claim])


def test_pvc_named_and_not_created() -> None:
    named = nimcache(spec={"storage": {"pvc": {"name": "models"}}})
    assert nc.pvc_name(named) == "models"
    assert nc.build_pvc(nimcache(spec={"storage": {"pvc": {"create": False}}})) is None
    with pytest.raises(RenderError, match="failed to parse size for pvc creation"):
        nc.build_pvc(nimcache(spec={"storage": {"pvc": {"size": ""}}}))


def test_manifest_pod() -> None:
    cache = nimcache(
        NGC_PROFILES,
        spec={"resources": {"cpu": "500m", "memory": "2Gi"}, "userID": 1001, "groupID": 2001},
    )
    pod = nc.manifest_pod(cache)
    assert pod["metadata"]["name"] == "cache-pod"
    assert pod["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-nim-operator"
    spec = pod["spec"]
    (ctr,) = spec["containers"]
    assert ctr["name"] == "nim-cache-ctr"
    assert ctr["image"] == "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.8.4"
    assert "model_manifest.yaml not found" in ctr["command"][2]
    assert ctr["resources"] == {
        "requests": {"cpu": "500m", "memory": "2Gi"},
        "limits": {"cpu": "500m", "memory": "2Gi"},
    }
    assert ctr["securityContext"]["runAsUser"] == 1001
    assert ctr["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert spec["securityContext"] == {"runAsUser": 1001, "fsGroup": 2001, "runAsNonRoot": True}
    assert spec["serviceAccountName"] == "nim-cache-sa"
    assert spec["nodeSelector"] == {"feature.node.kubernetes.io/pci-10de.present": "true"}
    assert spec["imagePullSecrets"] == [{"name": "ngc-secret"}]
    assert_valid_k8s([pod])


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        # NVIDIA's manifest pod always names cpu and memory, 0 when unset.
        (None, {"cpu": "0", "memory": "0"}),
        ({"cpu": "1"}, {"cpu": "1", "memory": "0"}),
        ({"cpu": "500m", "memory": "2Gi"}, {"cpu": "500m", "memory": "2Gi"}),
    ],
)
def test_manifest_pod_resources_as_nvidia(
    resources: dict[str, str] | None, expected: dict[str, str]
) -> None:
    spec = {"resources": resources} if resources is not None else {}
    (ctr,) = nc.manifest_pod(nimcache(NGC_PROFILES, spec=spec))["spec"]["containers"]
    assert ctr["resources"] == {"requests": expected, "limits": expected}


def test_user_node_selector_replaces_the_default() -> None:
    pod = nc.manifest_pod(nimcache(NGC_PROFILES, spec={"nodeSelector": {"pool": "gpu"}}))
    assert pod["spec"]["nodeSelector"] == {"pool": "gpu"}
    empty = nc.manifest_pod(nimcache(NGC_PROFILES, spec={"nodeSelector": {}}))
    assert "nodeSelector" not in empty["spec"]


def test_manifest_config_map() -> None:
    cm = nc.manifest_config_map(nimcache(), "profiles: {}\n")
    assert cm["metadata"]["name"] == "cache-manifest"
    assert cm["data"] == {"model_manifest.yaml": "profiles: {}\n"}
    assert_valid_k8s([cm])


def test_job_common_shape() -> None:
    job = nc.caching_job(nimcache(NGC_PROFILES, spec={"tolerations": [{"operator": "Exists"}]}))
    assert job["metadata"]["name"] == "cache-job"
    assert job["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "k8s-nim-operator"
    assert job["spec"]["backoffLimit"] == 5
    assert job["spec"]["ttlSecondsAfterFinished"] == 600
    template = job["spec"]["template"]
    assert template["metadata"]["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert template["metadata"]["labels"]["app"] == "k8s-nim-operator"
    spec = template["spec"]
    assert spec["restartPolicy"] == "Never"
    assert spec["serviceAccountName"] == "nim-cache-sa"
    assert spec["tolerations"] == [{"operator": "Exists"}]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["nim-cache-volume"]["persistentVolumeClaim"]["claimName"] == "cache-pvc"
    ctr = _job_container(job)
    assert ctr["envFrom"] == [{"secretRef": {"name": "ngc-api-secret"}}]
    mounts = {m["name"]: m["mountPath"] for m in ctr["volumeMounts"]}
    assert mounts == {"nim-cache-volume": "/model-store", "scratch": "/scratch"}
    assert_valid_k8s([job])


@pytest.mark.parametrize(
    ("source", "kwargs", "command", "args"),
    [
        (NGC_PROFILES, {}, ["download-to-cache"], ["--profiles", "p1", "p2"]),
        (NGC_PROFILES, {"selected_profiles": ["all"]}, ["download-to-cache"], ["--all"]),
        (
            {"ngc": {**NGC_PROFILES["ngc"], "model": {"engine": "vllm"}}},
            {"selected_profiles": ["sel1"]},
            ["download-to-cache"],
            ["--profiles", "sel1"],
        ),
        (
            NGC_UNIVERSAL,
            {},
            ["create-model-store"],
            [
                "--model-repo",
                "ngc://nim/meta/llama-3.1-8b-instruct:hf",
                "--model-store",
                "/model-store",
            ],
        ),
        (
            HF,
            {},
            [
                "huggingface-cli",
                "download",
                "meta-llama/Llama-3.2-1B",
                "--local-dir",
                "/model-store",
                "--repo-type",
                "model",
                "--revision",
                "main",
            ],
            None,
        ),
        (
            DATASTORE_DATASET,
            {},
            [
                "huggingface-cli",
                "download",
                "default/squad",
                "--local-dir",
                "/model-store",
                "--repo-type",
                "dataset",
            ],
            None,
        ),
    ],
    ids=["ngc-profiles", "ngc-all", "ngc-selected", "ngc-universal", "hf", "datastore-dataset"],
)
def test_job_command_per_source(
    source: dict[str, Any], kwargs: dict[str, Any], command: list[str], args: list[str] | None
) -> None:
    job = nc.caching_job(nimcache(source), **kwargs)
    ctr = _job_container(job)
    assert ctr["command"] == command
    assert ctr.get("args") == args
    assert ctr["image"] == next(iter(source.values()))["modelPuller"]
    assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [
        {"name": next(iter(source.values()))["pullSecret"]}
    ]
    assert_valid_k8s([job])


def test_ngc_job_env_and_termination_message() -> None:
    ctr = _job_container(nc.caching_job(nimcache(NGC_PROFILES)))
    assert env_of(ctr) == {"NIM_CACHE_PATH": "/model-store"}
    assert ctr["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_hf_job_env() -> None:
    env = env_of(_job_container(nc.caching_job(nimcache(HF))))
    assert env == {
        "HF_ENDPOINT": "https://huggingface.co",
        "HF_HUB_OFFLINE": "0",
        "NIM_CACHE_PATH": "/model-store",
        "HF_HOME": "/model-store/huggingface/hub",
    }


def test_model_free_hf_job_downloads_to_cache() -> None:
    cache = nimcache(HF, status={"type": "model-free"})
    assert _job_container(nc.caching_job(cache))["command"] == [
        "download-to-cache",
        "--model-uri",
        "hf://meta-llama/Llama-3.2-1B",
        "--manifest-file",
        "/model-store/model_manifest.json",
    ]


def test_native_job_runs_the_nim_itself() -> None:
    cache = nimcache(
        NGC_PROFILES,
        status={"type": "native"},
        spec={
            "env": [
                {"name": "NIM_ENGINE_MODEL_PATH", "value": "/x"},
                {"name": "MINE", "value": "1"},
            ]
        },
    )
    ctr = _job_container(nc.caching_job(cache))
    assert "command" not in ctr and "args" not in ctr
    env = env_of(ctr)
    assert env["NIM_ENGINE_MODEL_DOWNLOAD_ONLY"] == "1"
    assert env["NIM_ENGINE_MODEL_PATH"] == "/model/cache"  # re-asserted over the user's value
    assert env["MINE"] == "1"
    paths = [m["mountPath"] for m in ctr["volumeMounts"]]
    assert paths == ["/model", "/opt/cache", "/scratch"]


def test_user_env_proxy_and_ca_on_the_job() -> None:
    cache = nimcache(
        NGC_PROFILES,
        spec={
            "env": [
                {"name": "NGC_HOME", "value": "/opt/ngc/hub"},
                {"name": "NIM_CACHE_PATH", "value": "/c"},
            ],
            "proxy": {"httpsProxy": "https://proxy:3128", "certConfigMap": "corp-ca"},
            "initContainers": [
                {
                    "name": "prep",
                    "image": {"repository": "busybox", "tag": "1"},
                    "env": [{"name": "X", "value": "1"}],
                }
            ],
        },
    )
    job = nc.caching_job(cache)
    spec = job["spec"]["template"]["spec"]
    env = env_of(_job_container(job))
    assert env["NGC_HOME"] == "/opt/ngc/hub"
    assert env["NIM_CACHE_PATH"] == "/c"  # user wins over the operator's env
    assert env["HTTPS_PROXY"] == env["https_proxy"] == "https://proxy:3128"
    assert [c["name"] for c in spec["initContainers"]] == ["update-ca-certificates", "prep"]
    prep = spec["initContainers"][1]
    assert "imagePullPolicy" not in prep
    assert env_of(prep)["X"] == "1" and env_of(prep)["NGC_HOME"] == "/opt/ngc/hub"
    assert {"name": "ca-cert-volume", "mountPath": "/etc/ssl"} in _job_container(job)[
        "volumeMounts"
    ]
    assert_valid_k8s([job])


def test_job_errors() -> None:
    no_profiles = {"ngc": {**NGC_PROFILES["ngc"], "model": {"engine": "tensorrt_llm"}}}
    with pytest.raises(RenderError, match="no profiles are selected for caching"):
        nc.caching_job(nimcache(no_profiles))
    with pytest.raises(RenderError, match="Deprecated field 'CertConfig'"):
        nc.caching_job(
            nimcache(NGC_PROFILES, spec={"certConfig": {"name": "c", "mountPath": "/c"}})
        )


def test_openshift_and_tkgs_variants() -> None:
    cache = nimcache(NGC_PROFILES, spec={"proxy": {"httpsProxy": "https://p:1"}})
    job = nc.caching_job(cache, orchestrator="OpenShift")
    assert job["spec"]["template"]["metadata"]["annotations"]["openshift.io/scc"] == "anyuid"
    pod = nc.manifest_pod(cache, orchestrator="OpenShift")
    assert pod["metadata"]["annotations"]["openshift.io/required-scc"] == "nonroot"
    tkgs = nc.caching_job(cache, orchestrator="TKGS")
    assert tkgs["spec"]["template"]["spec"]["securityContext"]["seccompProfile"] == {
        "type": "RuntimeDefault"
    }
