"""The blocker finder over pod, Event and node shapes as kubelet, the scheduler and the
controllers write them on a real cluster (messages copied from kubectl describe output)."""

from __future__ import annotations

import pytest

from nimctl_runtime.meta import Obj
from platforms.blockers import (
    REASONS,
    find_blocker,
    gpu_blocker,
    newest_pods,
    node_blocker,
    pod_blocker,
    workload_blocker,
)


def pod(
    name: str = "llm-7f9c6d5b8-x2x4q",
    *,
    containers: list[Obj] | None = None,
    init: list[Obj] | None = None,
    conditions: list[Obj] | None = None,
    phase: str = "Pending",
    labels: dict[str, str] | None = None,
    created: str = "2026-11-28T00:00:00Z",
    node: str | None = "gpu-1",
    uid: str | None = None,
) -> Obj:
    status: Obj = {"phase": phase, "conditions": conditions or []}
    if containers is not None:
        status["containerStatuses"] = containers
    if init is not None:
        status["initContainerStatuses"] = init
    spec: Obj = {"containers": [{"name": "nim"}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "nim",
            "uid": uid or f"uid-{name}",
            "labels": labels or {"app": "llm", "pod-template-hash": "7f9c6d5b8"},
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": status,
    }


def waiting(reason: str, message: str = "", name: str = "nim", image: str = "") -> Obj:
    w: Obj = {"reason": reason}
    if message:
        w["message"] = message
    return {
        "name": name,
        "image": image or "nvcr.io/nim/meta/llama-3.2-1b-instruct:1.8.5",
        "ready": False,
        "restartCount": 0,
        "state": {"waiting": w},
    }


def event(obj: Obj, reason: str, message: str, *, when: str = "2026-11-28T00:00:10Z") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "type": "Warning",
        "reason": reason,
        "message": message,
        "lastTimestamp": when,
        "involvedObject": {
            "kind": obj["kind"],
            "name": obj["metadata"]["name"],
            "namespace": "nim",
            "uid": obj["metadata"]["uid"],
        },
    }


def test_missing_secret_in_env_names_the_secret() -> None:
    p = pod(containers=[waiting("CreateContainerConfigError", 'secret "ngc-api-secret" not found')])
    found = pod_blocker(p)
    assert found is not None
    assert found.reason == "SecretNotFound"
    assert found.message == (
        'pod llm-7f9c6d5b8-x2x4q cannot start: secret "ngc-api-secret" not found'
    )
    assert found.hop == "pod/llm-7f9c6d5b8-x2x4q"
    assert not found.terminal


def test_missing_key_names_key_and_secret() -> None:
    p = pod(
        containers=[
            waiting(
                "CreateContainerConfigError", "couldn't find key NGC_API_KEY in Secret nim/ngc-api"
            )
        ]
    )
    found = pod_blocker(p)
    assert found is not None and found.reason == "SecretKeyNotFound"
    assert 'Secret "nim/ngc-api" has no key NGC_API_KEY' in found.message


def test_missing_configmap_in_env_from() -> None:
    p = pod(containers=[waiting("CreateContainerConfigError", 'configmap "nim-env" not found')])
    found = pod_blocker(p)
    assert found is not None and found.reason == "ConfigMapNotFound"
    assert 'configmap "nim-env"' in found.message


def test_image_not_found_names_the_image() -> None:
    image = "nvcr.io/nim/meta/llama-3.2-1b-instruct:9.99.99"
    msg = (
        f'Back-off pulling image "{image}": ErrImagePull: rpc error: code = NotFound desc = failed '
        f'to pull and unpack image "{image}": failed to resolve reference "{image}": {image}: '
        "not found"
    )
    found = pod_blocker(pod(containers=[waiting("ImagePullBackOff", msg, image=image)]))
    assert found is not None and found.reason == "ImagePullFailed"
    assert found.message == (
        f'pod llm-7f9c6d5b8-x2x4q cannot pull image "{image}": not found in the registry'
    )


def test_unauthorized_pull_without_secret_event_is_an_image_pull_failure() -> None:
    msg = (
        'rpc error: code = Unknown desc = failed to pull and unpack image "nvcr.io/nim/x:1": '
        "failed to resolve reference: failed to authorize: failed to fetch anonymous token: "
        "unexpected status from GET request to https://authn.nvidia.com/token?scope=x: "
        "401 Unauthorized"
    )
    found = pod_blocker(pod(containers=[waiting("ErrImagePull", msg)]))
    assert found is not None and found.reason == "ImagePullFailed"
    assert "401 Unauthorized" in found.message


def test_missing_pull_secret_event_names_the_pull_secret() -> None:
    msg = "failed to authorize: failed to fetch anonymous token: 401 Unauthorized"
    p = pod(containers=[waiting("ErrImagePull", msg)])
    ev = event(
        p,
        "FailedToRetrieveImagePullSecret",
        "Unable to retrieve some image pull secrets (ngc-secret); attempting to pull the image "
        "may not succeed.",
    )
    found = pod_blocker(p, [ev])
    assert found is not None and found.reason == "PullSecretNotFound"
    assert 'image pull secret "ngc-secret" not found' in found.message


def test_crash_loop_says_the_last_exit() -> None:
    status = waiting(
        "CrashLoopBackOff", "back-off 40s restarting failed container=nim pod=llm-7f9c6d5b8-x2x4q"
    )
    status["lastState"] = {
        "terminated": {"exitCode": 1, "reason": "Error", "finishedAt": "2026-11-28T00:01:00Z"}
    }
    found = pod_blocker(pod(containers=[status], phase="Running"))
    assert found is not None and found.reason == "CrashLoopBackOff"
    assert found.message == (
        "container nim of pod llm-7f9c6d5b8-x2x4q keeps crashing: last exit code 1 (Error)"
    )


def test_init_container_comes_first() -> None:
    p = pod(
        init=[waiting("CreateContainerConfigError", 'secret "hf-api-secret" not found', "init")],
        containers=[waiting("PodInitializing")],
    )
    found = pod_blocker(p)
    assert found is not None and found.reason == "SecretNotFound"
    assert "hf-api-secret" in found.message


def test_failed_init_container_is_named() -> None:
    init = {
        "name": "wait-for-model",
        "ready": False,
        "state": {"terminated": {"exitCode": 2, "reason": "Error"}},
    }
    found = pod_blocker(pod(init=[init], containers=[waiting("PodInitializing")]))
    assert found is not None and found.reason == "CrashLoopBackOff"
    assert "init container wait-for-model" in found.message


def test_scheduler_missing_pvc() -> None:
    cond = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": 'persistentvolumeclaim "model-store" not found',
    }
    found = pod_blocker(pod(conditions=[cond], node=None))
    assert found is not None and found.reason == "PVCNotFound"
    assert 'persistentvolumeclaim "model-store" not found' in found.message


def test_scheduler_unbound_pvc() -> None:
    cond = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. "
        "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
    }
    found = pod_blocker(pod(conditions=[cond], node=None))
    assert found is not None and found.reason == "PVCUnbound"


GPU_MESSAGE = (
    "0/3 nodes are available: 1 node(s) had untolerated taint "
    "{node-role.kubernetes.io/control-plane: }, 2 Insufficient nvidia.com/gpu. preemption: "
    "0/3 nodes are available: 1 Preemption is not helpful for scheduling, 2 No preemption "
    "victims found for incoming pod."
)


def unschedulable(message: str = GPU_MESSAGE) -> Obj:
    cond = {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": message,
    }
    return pod(conditions=[cond], node=None)


def test_insufficient_gpu_drops_the_preemption_tail() -> None:
    found = pod_blocker(unschedulable())
    assert found is not None and found.reason == "InsufficientGPU"
    assert "preemption" not in found.message
    assert "2 Insufficient nvidia.com/gpu" in found.message


def test_other_unschedulable() -> None:
    found = pod_blocker(
        unschedulable(
            "0/2 nodes are available: 2 node(s) didn't match Pod's node affinity/selector."
        )
    )
    assert found is not None and found.reason == "Unschedulable"


def node(
    name: str,
    *,
    labels: dict[str, str] | None = None,
    gpus: int | None = None,
    unschedulable: bool = False,
) -> Obj:
    status: Obj = {}
    if gpus is not None:
        status = {
            "capacity": {"nvidia.com/gpu": str(gpus)},
            "allocatable": {"nvidia.com/gpu": str(gpus)},
        }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": status,
    }


def test_no_gpu_nodes_at_all() -> None:
    found = pod_blocker(unschedulable())
    assert found is not None
    out = gpu_blocker(found, [node("cpu-1"), node("cpu-2")])
    assert out.reason == "NoGPUNodes"
    assert "pod llm-7f9c6d5b8-x2x4q cannot be scheduled" in out.message


def test_node_cordoned_for_driver_upgrade_is_named() -> None:
    upgrading = node(
        "gpu-1",
        labels={
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu-driver-upgrade-state": "drain-required",
        },
        gpus=8,
        unschedulable=True,
    )
    found = pod_blocker(unschedulable())
    assert found is not None
    out = gpu_blocker(found, [node("cpu-1"), upgrading])
    assert out.reason == "NodeDriverUpgrading"
    assert out.hop == "node/gpu-1"
    assert "node gpu-1 is cordoned for a GPU driver upgrade (state drain-required)" in out.message


def test_gpus_present_but_not_advertised() -> None:
    n = node("gpu-2", labels={"nvidia.com/gpu.present": "true"})
    found = node_blocker(n)
    assert found is not None and found.reason == "GPUNotAdvertised"
    assert "node gpu-2" in found.message


def test_healthy_gpu_node_keeps_insufficient_gpu() -> None:
    found = pod_blocker(unschedulable())
    assert found is not None
    healthy = node("gpu-1", labels={"nvidia.com/gpu.present": "true"}, gpus=1)
    assert gpu_blocker(found, [healthy]).reason == "InsufficientGPU"
    assert node_blocker(healthy) is None


def test_upgrade_done_is_not_a_blocker() -> None:
    n = node(
        "gpu-1",
        labels={
            "nvidia.com/gpu-driver-upgrade-state": "upgrade-done",
            "nvidia.com/gpu.present": "true",
        },
        gpus=1,
    )
    assert node_blocker(n) is None


def test_failed_mount_of_missing_configmap_from_events() -> None:
    p = pod(containers=[waiting("ContainerCreating")])
    ev = event(
        p,
        "FailedMount",
        'MountVolume.SetUp failed for volume "ca-cert" : configmap "ca-bundle" not found',
    )
    found = pod_blocker(p, [ev])
    assert found is not None and found.reason == "ConfigMapNotFound"
    assert found.message == (
        'pod llm-7f9c6d5b8-x2x4q cannot mount its volumes: configmap "ca-bundle" not found'
    )


def test_events_of_other_pods_are_ignored() -> None:
    p = pod(containers=[waiting("ContainerCreating")])
    other = pod("llm-other", containers=[])
    ev = event(
        other, "FailedMount", 'MountVolume.SetUp failed for volume "x" : secret "y" not found'
    )
    assert pod_blocker(p, [ev]) is None


def test_a_ready_pod_ignores_old_warnings() -> None:
    ready = [{"type": "Ready", "status": "True"}, {"type": "PodScheduled", "status": "True"}]
    running = {"name": "nim", "ready": True, "state": {"running": {}}}
    p = pod(containers=[running], conditions=ready, phase="Running")
    ev = event(p, "FailedMount", 'MountVolume.SetUp failed for volume "x" : secret "y" not found')
    assert pod_blocker(p, [ev]) is None


def test_progressing_pod_is_not_blocked() -> None:
    assert pod_blocker(pod(containers=[waiting("ContainerCreating")])) is None


def deployment(conditions: list[Obj] | None = None) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": "nim"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "llm"}}},
        "status": {"conditions": conditions or []},
    }


def test_replica_failure_quota() -> None:
    cond = {
        "type": "ReplicaFailure",
        "status": "True",
        "reason": "FailedCreate",
        "message": 'pods "llm-7f9c6d5b8-abcde" is forbidden: exceeded quota: gpu-quota, '
        "requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=4, limited: "
        "requests.nvidia.com/gpu=4",
    }
    found = workload_blocker(deployment([cond]))
    assert found is not None and found.reason == "QuotaExceeded"
    assert found.message.startswith("deployment llm cannot create pods: ")
    assert "gpu-quota" in found.message


def test_replica_failure_admission_webhook() -> None:
    cond = {
        "type": "ReplicaFailure",
        "status": "True",
        "reason": "FailedCreate",
        "message": 'admission webhook "validate.kyverno.svc" denied the request: image not allowed',
    }
    found = workload_blocker(deployment([cond]))
    assert found is not None and found.reason == "AdmissionDenied"


def test_failed_job_is_terminal() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "meta-llama-job"},
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "BackoffLimitExceeded",
                    "message": "Job has reached the specified backoff limit",
                }
            ]
        },
    }
    found = workload_blocker(job)
    assert found is not None and found.reason == "JobFailed" and found.terminal
    assert found.message == "job meta-llama-job failed: Job has reached the specified backoff limit"


def test_newest_pods_skip_the_old_replicaset() -> None:
    old = pod(
        "llm-old-1",
        labels={"app": "llm", "pod-template-hash": "old"},
        created="2026-11-27T00:00:00Z",
        containers=[waiting("CrashLoopBackOff")],
    )
    new = pod(
        "llm-new-1",
        labels={"app": "llm", "pod-template-hash": "new"},
        created="2026-11-28T00:00:00Z",
        containers=[waiting("CreateContainerConfigError", 'secret "s" not found')],
    )
    stranger = pod("other-1", labels={"app": "other"}, created="2026-11-29T00:00:00Z")
    assert [p["metadata"]["name"] for p in newest_pods(deployment(), [old, new, stranger])] == [
        "llm-new-1"
    ]
    found = find_blocker([deployment()], [old, new, stranger])
    assert found is not None and found.reason == "SecretNotFound"


def test_job_pods_by_job_name_label() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "c-job"}, "status": {}}
    p = pod(
        "c-job-abcde",
        labels={"batch.kubernetes.io/job-name": "c-job", "job-name": "c-job"},
        init=[waiting("CreateContainerConfigError", 'secret "hf-api-secret" not found', "init")],
    )
    found = find_blocker([job], [p])
    assert found is not None and found.reason == "SecretNotFound"


def test_lws_pods_by_name_label() -> None:
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "llm-lws"},
        "status": {},
    }
    p = unschedulable()
    p["metadata"]["labels"] = {"leaderworkerset.sigs.k8s.io/name": "llm-lws"}
    found = find_blocker([lws], [p], nodes=[node("cpu")])
    assert found is not None and found.reason == "NoGPUNodes"


def test_every_reason_has_a_fix() -> None:
    assert all(REASONS.values())


@pytest.mark.parametrize("phase", ["Succeeded"])
def test_completed_pod_is_not_blocked(phase: str) -> None:
    assert pod_blocker(pod(phase=phase, containers=[])) is None


def test_nodes_not_looked_at_keep_insufficient_gpu() -> None:
    p = unschedulable()
    assert find_blocker([deployment()], [p]) == pod_blocker(p)
    found = find_blocker([deployment()], [p], nodes=[])
    assert found is not None and found.reason == "NoGPUNodes"


def test_docs_why_lists_every_reason_with_its_fix() -> None:
    from pathlib import Path

    page = Path(__file__).resolve().parents[3] / "docs" / "why.md"
    rows = {
        line.split("|")[1].strip().strip("`"): line.split("|")[3].strip()
        for line in page.read_text().splitlines()
        if line.startswith("| `")
    }
    assert rows == REASONS


def test_gpus_and_another_missing_resource_is_unschedulable() -> None:
    found = pod_blocker(
        unschedulable(
            "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 3 Insufficient "
            "rdma/rdma_shared_device_a. preemption: 0/3 nodes are available: 3 No preemption "
            "victims found for incoming pod."
        )
    )
    assert found is not None and found.reason == "Unschedulable"
    assert "rdma/rdma_shared_device_a" in found.message


def test_cordoned_nodes_name_the_driver_upgrade() -> None:
    found = pod_blocker(
        unschedulable("0/2 nodes are available: 2 node(s) were unschedulable. preemption: ...")
    )
    assert found is not None and found.reason == "Unschedulable"
    upgrading = node(
        "gpu-1",
        labels={"nvidia.com/gpu-driver-upgrade-state": "pod-restart-required"},
        gpus=8,
        unschedulable=True,
    )
    out = gpu_blocker(found, [upgrading])
    assert out.reason == "NodeDriverUpgrading" and out.hop == "node/gpu-1"
    plain = node("gpu-2", gpus=8, unschedulable=True)
    assert gpu_blocker(found, [plain]).reason == "NodeCordoned"


def test_a_missed_progress_deadline_yields_to_the_pods_cause() -> None:
    """The deadline is a consequence: the unschedulable pod is the answer; with
    nothing wrong in a pod, the deadline itself is."""
    deadline = {
        "type": "Progressing",
        "status": "False",
        "reason": "ProgressDeadlineExceeded",
        "message": 'ReplicaSet "llm-7f9c6d5b8" has timed out progressing.',
    }
    stuck = unschedulable(
        "0/3 nodes are available: 3 Insufficient nvidia.com/pgpu. preemption: 0/3 nodes "
        "are available: 3 No preemption victims found for incoming pod."
    )
    found = find_blocker([deployment([deadline])], [stuck])
    assert found is not None and found.reason == "Unschedulable"
    assert "Insufficient nvidia.com/pgpu" in found.message
    found = find_blocker([deployment([deadline])], [pod(phase="Running")])
    assert found is not None and found.reason == "ProgressDeadlineExceeded"


def test_missing_claim_template_from_the_resourceclaim_controller() -> None:
    # kube-controller-manager cannot make the claim; the scheduler keeps the pod
    # waiting without a PodScheduled condition: the Event is all there is.
    p = pod(node=None)
    ev = event(
        p,
        "FailedResourceClaimCreation",
        'PodResourceClaim claim-0: resource claim template "one-gpu": '
        'resourceclaimtemplate.resource.k8s.io "one-gpu" not found',
    )
    found = pod_blocker(p, [ev])
    assert found is not None and found.reason == "ResourceClaimTemplateNotFound"
    assert found.message == (
        'pod llm-7f9c6d5b8-x2x4q cannot get its resource claim: resourceclaimtemplate "one-gpu" '
        "not found"
    )


def test_missing_named_claim_from_the_scheduler() -> None:
    p = pod(
        node=None,
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                     "message": 'resourceclaim "shared-gpu" not found'}],
    )  # fmt: skip
    found = pod_blocker(p)
    assert found is not None and found.reason == "ResourceClaimNotFound"
    assert 'resourceclaim "shared-gpu" not found' in found.message


def test_a_job_whose_pods_are_refused_names_the_quota() -> None:
    # The Job controller records the refusal as an Event only (no Job condition).
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "meta-llama-job", "uid": "job-uid"},
        "status": {},
    }
    refused = event(
        job,
        "FailedCreate",
        'Error creating: pods "meta-llama-job-" is forbidden: exceeded quota: pods-quota, '
        "requested: pods=1, used: pods=1, limited: pods=1",
    )
    found = find_blocker([job], [], [refused])
    assert found is not None and found.reason == "QuotaExceeded"
    assert found.message == (
        'job meta-llama-job cannot create pods: pods "meta-llama-job-" is forbidden: '
        "exceeded quota: pods-quota, requested: pods=1, used: pods=1, limited: pods=1"
    )
    # once a pod exists, the old refusal says nothing
    running = pod(
        "meta-llama-job-x2x4q",
        labels={"job-name": "meta-llama-job"},
        phase="Running",
        conditions=[{"type": "Ready", "status": "True"}],
    )
    assert find_blocker([job], [running], [refused]) is None
