"""Why is it not Ready? The one thing that blocks a workload, from its pods down to the GPU.

Pure functions, one per layer, over the objects the cache holds (no I/O):

``newest_pods(workload, pods)``
    the pods of a Deployment, LeaderWorkerSet, Job, InferenceService or
    DaemonSet, of its newest revision only (an old ReplicaSet's pod that is
    going away does not block anything);
``workload_blocker(workload)``
    what the workload's own status says: a ReplicaSet that cannot create pods
    (quota, admission: the Deployment's ``ReplicaFailure`` condition), a
    rollout past its deadline, a Job that failed; and, for a workload with no
    pods, the ``FailedCreate`` Warning Event about it (a Job's quota or
    admission refusal, which sets no condition);
``pod_blocker(pod, events)``
    the pod's first blocking cause: an init container before the app
    containers, a waiting reason (missing Secret or ConfigMap or key, image
    pull, crash loop), the scheduler's ``PodScheduled=False`` message, then the
    last Warning Event about the pod (``FailedMount``, ``FailedScheduling``, a
    pull secret that cannot be read, a ResourceClaimTemplate the resourceclaim
    controller cannot find: ``FailedResourceClaimCreation``);
``node_blocker(node)``
    the GPU side of one node: cordoned for a driver upgrade (the upgrade state
    label), or GPUs present but none advertised (the GPU operands are not ready);
``gpu_blocker(pod_blocker, nodes)``
    turns "no node has a free nvidia.com/gpu" into its cause on the nodes;
``find_blocker(workloads, pods, events, nodes)``
    the chain above, first cause wins.

A ``Blocker`` has a stable CamelCase ``reason`` (the condition reason users and
scripts match on; docs/why.md lists every one), a one-sentence ``message``
that names the object, the hop it was found at, and what to do about it.
"Pending is not Failed": every blocker here is a wait until something in the
cluster changes, except the ones ``terminal`` marks (a failed Job).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nimctl_runtime.meta import dig, find_condition

__all__ = [
    "GPU_RESOURCE",
    "REASONS",
    "UPGRADE_STATE_LABEL",
    "Blocker",
    "cache_job_blocker",
    "events_about",
    "find_blocker",
    "gpu_blocker",
    "last_failure",
    "needs_nodes",
    "newest_pods",
    "node_blocker",
    "pod_blocker",
    "workload_blocker",
]

from nimctl_runtime.meta import ObjView

GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
UPGRADE_STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
#: Upgrade states in which a node is (or is about to be) cordoned and drained.
UPGRADE_BUSY_STATES = frozenset(
    {
        "cordon-required",
        "wait-for-jobs-required",
        "pod-deletion-required",
        "drain-required",
        "pod-restart-required",
        "validation-required",
        "uncordon-required",
    }
)
UPGRADE_FAILED_STATE = "upgrade-failed"

# reason -> what to do about it (docs/why.md repeats these; a unit test keeps them in step)
REASONS: dict[str, str] = {
    "SecretNotFound": "create the Secret in the namespace (or fix the name in the spec)",
    "SecretKeyNotFound": "add the key to the Secret (or fix the key name in the spec)",
    "ConfigMapNotFound": "create the ConfigMap in the namespace (or fix the name in the spec)",
    "ConfigMapKeyNotFound": "add the key to the ConfigMap (or fix the key name in the spec)",
    "ContainerConfigError": "fix the container's env or volume sources named in the message",
    "PullSecretNotFound": "create the image pull Secret (a docker-registry Secret for the "
    "registry) named in spec.image.pullSecrets",
    "ImagePullFailed": "use an image and tag the registry has; for a 401, list a "
    "docker-registry Secret for the registry in spec.image.pullSecrets",
    "CrashLoopBackOff": "read the container's logs (kubectl logs --previous) and fix the cause",
    "ContainerStartFailed": "fix the container's command or runtime settings",
    "VolumeMountFailed": "make the volume's source available (Secret, ConfigMap, CSI driver)",
    "PVCNotFound": "create the PersistentVolumeClaim, or let the operator create it "
    "(storage.pvc.create: true)",
    "PVCUnbound": "give the claim a StorageClass that can provision it, or a matching "
    "PersistentVolume",
    "Unschedulable": "make a node fit the pod: resources, node selector, tolerations",
    "InsufficientGPU": "free GPUs, add GPU nodes, or ask for fewer GPUs",
    "NoGPUNodes": "install the GPU Operator (a ClusterPolicy) or add GPU nodes",
    "NodeDriverUpgrading": "wait for the driver upgrade to finish on the node "
    "(kubectl get nodes -L nvidia.com/gpu-driver-upgrade-state)",
    "NodeDriverUpgradeFailed": "look at the driver pod on the node; fix and retry the upgrade",
    "GPUNotAdvertised": "wait for the GPU operands (driver, device plugin) on the node, "
    "or look at the gpu-operator pods there",
    "NodeCordoned": "uncordon the node (kubectl uncordon) once it is healthy",
    "QuotaExceeded": "raise the namespace's ResourceQuota or ask for less",
    "AdmissionDenied": "fix what the admission webhook or policy refuses (named in the message)",
    "PodCreateFailed": "fix what the ReplicaSet cannot create (named in the message)",
    "ProgressDeadlineExceeded": "look at the newest pods: they did not become ready in time",
    "PodFailed": "look at the pod's status and logs",
    "CacheJobFailed": "read the caching Job's pod logs (model name, NGC/HF credentials, "
    "disk space) and fix the NIMCache spec",
    "JobFailed": "read the Job's pod logs and fix the cause",
    "NIMCacheNotFound": "create the NIMCache named in spec.storage.nimCache.name",
    "DaemonSetNotReady": "look at the DaemonSet's pods on the nodes "
    "(kubectl get pods -o wide in its namespace) and at the node's GPU operands",
    "ResourceClaimTemplateNotFound": "create the ResourceClaimTemplate in the namespace "
    "(or fix the name in spec.draResources)",
    "ResourceClaimNotFound": "create the ResourceClaim in the namespace "
    "(or fix the name in spec.draResources)",
}


@dataclass(frozen=True)
class Blocker:
    """The one thing that keeps a workload from being Ready."""

    reason: str
    """Stable CamelCase word (``SecretNotFound``, ``ImagePullFailed``, ...)."""
    message: str
    """One sentence naming the object: ``pod llm-7f9 cannot start: secret "x" not found``."""
    hop: str = ""
    """The object it was found at, ``kind/name`` (``pod/llm-7f9``, ``node/gpu-1``)."""
    terminal: bool = False
    """True only when waiting will not help (a Job out of retries)."""

    @property
    def fix(self) -> str:
        return REASONS.get(self.reason, "")

    @property
    def key(self) -> tuple[str, str]:
        """What makes two findings the same blocker (the hop and reason, not progress text)."""
        return (self.reason, self.hop)


# -- workloads -> pods ------------------------------------------------------------------

_REVISION_LABELS = ("pod-template-hash", "controller-revision-hash")


def _name(obj: ObjView | None) -> str:
    return str(dig(obj, "metadata", "name", default="") or "")


def _created(obj: ObjView) -> str:
    return str(dig(obj, "metadata", "creationTimestamp", default="") or "")


def _labels(obj: ObjView) -> Mapping[str, str]:
    labels: Mapping[str, str] = dig(obj, "metadata", "labels", default={}) or {}
    return labels


def _selector_matches(selector: ObjView | None, labels: Mapping[str, str]) -> bool:
    """A label selector (``matchLabels`` and ``matchExpressions``) against labels."""
    if not selector:
        return False
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _member(workload: ObjView, pod: ObjView) -> bool:
    kind, name = workload.get("kind"), _name(workload)
    labels = _labels(pod)
    if kind == "Job":
        return labels.get("batch.kubernetes.io/job-name") == name or labels.get("job-name") == name
    if kind == "LeaderWorkerSet":
        return labels.get("leaderworkerset.sigs.k8s.io/name") == name
    if kind == "InferenceService":
        return labels.get("serving.kserve.io/inferenceservice") == name
    return _selector_matches(dig(workload, "spec", "selector"), labels)


def newest_pods(workload: ObjView, pods: Iterable[ObjView]) -> list[ObjView]:
    """The workload's pods of its newest revision, not being deleted, newest first.

    A Deployment's pods are grouped by ``pod-template-hash``; the group of the
    most recently created pod is the newest revision (the one a rollout waits
    for). A DaemonSet's by ``controller-revision-hash`` likewise.
    """
    mine = [p for p in pods if _member(workload, p) and not dig(p, "metadata", "deletionTimestamp")]
    mine.sort(key=lambda p: (_created(p), _name(p)), reverse=True)
    if not mine:
        return []
    if workload.get("kind") == "Job":
        # a retry under way is what counts, not the pods that failed before it
        live = [p for p in mine if dig(p, "status", "phase") not in ("Failed", "Succeeded")]
        return live or mine[:1]
    for label in _REVISION_LABELS:
        newest = _labels(mine[0]).get(label)
        if newest is not None:
            return [p for p in mine if _labels(p).get(label) == newest]
    return mine


def workload_blocker(workload: ObjView | None) -> Blocker | None:
    """What the workload's own status says blocks it (before looking at any pod)."""
    if not workload:
        return None
    kind, name = str(workload.get("kind", "")), _name(workload)
    conditions = dig(workload, "status", "conditions", default=[]) or []
    hop = f"{kind.lower()}/{name}"
    failure = find_condition(conditions, "ReplicaFailure")
    if failure is not None and failure.get("status") == "True":
        return _create_failed(str(failure.get("message") or ""), f"{kind.lower()} {name}", hop)
    if kind == "Job":
        failed = find_condition(conditions, "Failed")
        if failed is not None and failed.get("status") == "True":
            why = failed.get("message") or failed.get("reason") or "failed"
            return Blocker("JobFailed", f"job {name} failed: {why}", hop, terminal=True)
    progressing = find_condition(conditions, "Progressing")
    if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
        return Blocker(
            "ProgressDeadlineExceeded",
            f"{kind.lower()} {name} exceeded its progress deadline: {progressing.get('message')}",
            hop,
        )
    return None


def _create_failed(message: str, who: str, hop: str) -> Blocker:
    """A ReplicaSet's (or Job's) ``FailedCreate``: quota, admission, or something else."""
    text = message.removeprefix("Error creating: ")
    if "exceeded quota" in text or "forbidden: failed quota" in text:
        return Blocker("QuotaExceeded", f"{who} cannot create pods: {text}", hop)
    if "admission webhook" in text or "denied" in text or "forbidden" in text:
        return Blocker("AdmissionDenied", f"{who} cannot create pods: {text}", hop)
    return Blocker("PodCreateFailed", f"{who} cannot create pods: {text}", hop)


# -- pods -------------------------------------------------------------------------------

_SECRET_MISSING = re.compile(r'secret "([^"]+)" not found')
_CONFIGMAP_MISSING = re.compile(r'configmaps? "([^"]+)" not found')
_KEY_MISSING = re.compile(r"couldn't find key (\S+) in (Secret|ConfigMap) (\S+)")
_PVC_MISSING = re.compile(r'persistentvolumeclaim "([^"]+)" not found')
_IMAGE_IN_MESSAGE = re.compile(r'(?:image|reference) "([^"]+)"')
_INSUFFICIENT = re.compile(r"Insufficient (\S+?)[,.]?(?:\s|$)")
_PULL_SECRETS = re.compile(r"image pull secrets \(([^)]*)\)")
_TEMPLATE_MISSING = re.compile(r'resourceclaimtemplate(?:\.resource\.k8s\.io)? "([^"]+)" not found')
_CLAIM_MISSING = re.compile(r'resourceclaim(?:\.resource\.k8s\.io)? "([^"]+)" not found')


def events_about(obj: ObjView, events: Iterable[ObjView]) -> list[ObjView]:
    """The Warning Events about ``obj`` (by UID, else by name), oldest first."""
    uid = dig(obj, "metadata", "uid")
    name, kind = _name(obj), obj.get("kind", "Pod")
    out = []
    for ev in events:
        if ev.get("type") not in (None, "Warning"):
            continue
        about = ev.get("involvedObject") or ev.get("regarding") or {}
        if uid and about.get("uid"):
            if about.get("uid") != uid:
                continue
        elif about.get("name") != name or about.get("kind", kind) != kind:
            continue
        out.append(ev)
    out.sort(key=_event_time)
    return out


def _event_time(ev: ObjView) -> str:
    return str(
        ev.get("lastTimestamp")
        or dig(ev, "series", "lastObservedTime")
        or ev.get("eventTime")
        or dig(ev, "metadata", "creationTimestamp")
        or ""
    )


def _config_error(pod: str, container: str, message: str, hop: str) -> Blocker:
    """``CreateContainerConfigError``: which Secret, ConfigMap or key is missing."""
    key = _KEY_MISSING.search(message)
    if key:
        reason = "SecretKeyNotFound" if key.group(2) == "Secret" else "ConfigMapKeyNotFound"
        what = f'{key.group(2)} "{key.group(3)}" has no key {key.group(1)}'
        return Blocker(reason, f"pod {pod} cannot start: {what}", hop)
    secret = _SECRET_MISSING.search(message)
    if secret:
        return Blocker(
            "SecretNotFound", f'pod {pod} cannot start: secret "{secret.group(1)}" not found', hop
        )
    cm = _CONFIGMAP_MISSING.search(message)
    if cm:
        return Blocker(
            "ConfigMapNotFound",
            f'pod {pod} cannot start: configmap "{cm.group(1)}" not found',
            hop,
        )
    return Blocker(
        "ContainerConfigError", f"pod {pod} cannot start container {container}: {message}", hop
    )


def _pull_error(
    pod: str, status: ObjView, missing_pull_secrets: Sequence[str], hop: str
) -> Blocker:
    """``ErrImagePull``/``ImagePullBackOff``/``InvalidImageName``, named by its cause."""
    waiting = dig(status, "state", "waiting") or {}
    reason, message = str(waiting.get("reason") or ""), str(waiting.get("message") or "")
    found = _IMAGE_IN_MESSAGE.search(message)
    image = str(status.get("image") or "") or (found.group(1) if found else "")
    said = f'pod {pod} cannot pull image "{image}"'
    lower = message.lower()
    unauthorized = "unauthorized" in lower or "denied" in lower
    if missing_pull_secrets and (unauthorized or not message or ": " not in message):
        names = ", ".join(f'"{n}"' for n in missing_pull_secrets)
        return Blocker("PullSecretNotFound", f"{said}: image pull secret {names} not found", hop)
    if unauthorized:
        return Blocker(
            "ImagePullFailed", f"{said}: the registry refused it (401 Unauthorized)", hop
        )
    if "not found" in lower or "manifest unknown" in lower:
        return Blocker("ImagePullFailed", f"{said}: not found in the registry", hop)
    if reason == "InvalidImageName":
        return Blocker("ImagePullFailed", f"{said}: the image name is not valid", hop)
    detail = message.rsplit(": ", 1)[-1] if ": " in message else reason
    return Blocker("ImagePullFailed", f"{said}: {detail}", hop)


def _last_exit(status: ObjView) -> str:
    term = dig(status, "lastState", "terminated") or dig(status, "state", "terminated") or {}
    if not term:
        return ""
    code = term.get("exitCode")
    why = term.get("reason") or ""
    msg = str(term.get("message") or "").strip().splitlines()
    tail = f": {msg[-1]}" if msg else ""
    return f"last exit code {code}{f' ({why})' if why else ''}{tail}"


def _container_blocker(
    pod: ObjView, status: ObjView, *, init: bool, missing_pull_secrets: Sequence[str], hop: str
) -> Blocker | None:
    name = _name(pod)
    container = str(status.get("name", ""))
    what = f"init container {container}" if init else f"container {container}"
    waiting = dig(status, "state", "waiting") or {}
    reason = str(waiting.get("reason") or "")
    message = str(waiting.get("message") or "")
    if reason == "CreateContainerConfigError":
        return _config_error(name, container, message, hop)
    if reason in ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"):
        # a Back-off message wraps the first error: the cause is read from it
        return _pull_error(name, status, missing_pull_secrets, hop)
    if reason == "CrashLoopBackOff":
        last = _last_exit(status)
        return Blocker(
            "CrashLoopBackOff",
            f"{what} of pod {name} keeps crashing{f': {last}' if last else ''}",
            hop,
        )
    if reason in ("CreateContainerError", "RunContainerError", "StartError"):
        return Blocker(
            "ContainerStartFailed", f"{what} of pod {name} cannot start: {message or reason}", hop
        )
    if init:
        term = dig(status, "state", "terminated") or {}
        if term and term.get("exitCode") not in (None, 0):
            return Blocker(
                "CrashLoopBackOff", f"{what} of pod {name} failed: {_last_exit(status)}", hop
            )
    return None


def _scheduling_blocker(name: str, message: str, hop: str) -> Blocker:
    pvc = _PVC_MISSING.search(message)
    if pvc:
        return Blocker(
            "PVCNotFound",
            f'pod {name} cannot be scheduled: persistentvolumeclaim "{pvc.group(1)}" not found',
            hop,
        )
    if "unbound immediate PersistentVolumeClaims" in message:
        return Blocker(
            "PVCUnbound",
            f"pod {name} cannot be scheduled: its PersistentVolumeClaims are not bound",
            hop,
        )
    template = _TEMPLATE_MISSING.search(message)
    if template:
        return Blocker(
            "ResourceClaimTemplateNotFound",
            f"pod {name} cannot be scheduled: "
            f'resourceclaimtemplate "{template.group(1)}" not found',
            hop,
        )
    claim = _CLAIM_MISSING.search(message)
    if claim:
        return Blocker(
            "ResourceClaimNotFound",
            f'pod {name} cannot be scheduled: resourceclaim "{claim.group(1)}" not found',
            hop,
        )
    first = message.split(" preemption:", 1)[0].strip()
    missing = set(_INSUFFICIENT.findall(first))
    if missing == {GPU_RESOURCE}:
        return Blocker("InsufficientGPU", f"pod {name} cannot be scheduled: {first}", hop)
    return Blocker("Unschedulable", f"pod {name} cannot be scheduled: {first}", hop)


def _event_blocker(name: str, ev: ObjView, hop: str) -> Blocker | None:
    reason, message = str(ev.get("reason") or ""), str(ev.get("message") or "")
    if reason == "FailedMount":
        secret = _SECRET_MISSING.search(message)
        if secret:
            return Blocker(
                "SecretNotFound",
                f'pod {name} cannot mount its volumes: secret "{secret.group(1)}" not found',
                hop,
            )
        cm = _CONFIGMAP_MISSING.search(message)
        if cm:
            return Blocker(
                "ConfigMapNotFound",
                f'pod {name} cannot mount its volumes: configmap "{cm.group(1)}" not found',
                hop,
            )
        return Blocker("VolumeMountFailed", f"pod {name} cannot mount its volumes: {message}", hop)
    if reason in ("FailedAttachVolume", "FailedMapVolume"):
        return Blocker("VolumeMountFailed", f"pod {name} cannot attach a volume: {message}", hop)
    if reason == "FailedScheduling":
        return _scheduling_blocker(name, message, hop)
    if reason == "FailedResourceClaimCreation":
        # kube-controller-manager's resourceclaim controller: the template is missing
        template = _TEMPLATE_MISSING.search(message)
        if template:
            return Blocker(
                "ResourceClaimTemplateNotFound",
                f"pod {name} cannot get its resource claim: resourceclaimtemplate "
                f'"{template.group(1)}" not found',
                hop,
            )
        return Blocker("Unschedulable", f"pod {name} cannot get its resource claim: {message}", hop)
    if reason == "FailedCreatePodSandBox":
        return Blocker("ContainerStartFailed", f"pod {name} has no sandbox: {message}", hop)
    return None


def _missing_pull_secrets(events: Sequence[ObjView]) -> list[str]:
    for ev in reversed(events):
        if ev.get("reason") == "FailedToRetrieveImagePullSecret":
            found = _PULL_SECRETS.search(str(ev.get("message") or ""))
            if found:
                return [s.strip() for s in found.group(1).split(",") if s.strip()]
    return []


def pod_blocker(pod: ObjView, events: Iterable[ObjView] = ()) -> Blocker | None:
    """The pod's first blocking cause, or None when it is running or simply progressing.

    ``events`` may be any Warning Events; those about other objects are ignored.
    """
    name = _name(pod)
    hop = f"pod/{name}"
    mine = events_about(pod, events)
    pull_secrets = _missing_pull_secrets(mine)
    phase = dig(pod, "status", "phase")
    if phase == "Succeeded":
        return None
    for init, field in ((True, "initContainerStatuses"), (False, "containerStatuses")):
        for status in dig(pod, "status", field, default=[]) or []:
            found = _container_blocker(
                pod, status, init=init, missing_pull_secrets=pull_secrets, hop=hop
            )
            if found is not None:
                return found
    if phase == "Failed":
        why = dig(pod, "status", "message") or dig(pod, "status", "reason") or "failed"
        return Blocker("PodFailed", f"pod {name} failed: {why}", hop)
    scheduled = find_condition(dig(pod, "status", "conditions"), "PodScheduled")
    if scheduled is not None and scheduled.get("status") == "False":
        message = str(scheduled.get("message") or scheduled.get("reason") or "")
        return _scheduling_blocker(name, message, hop)
    if _all_ready(pod):
        return None
    for ev in reversed(mine):
        found = _event_blocker(name, ev, hop)
        if found is not None and not (
            ev.get("reason") == "FailedScheduling" and dig(pod, "spec", "nodeName")
        ):
            return found
    return None


def _all_ready(pod: ObjView) -> bool:
    ready = find_condition(dig(pod, "status", "conditions"), "Ready")
    return ready is not None and ready.get("status") == "True"


# -- nodes ------------------------------------------------------------------------------


def _quantity(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def node_blocker(node: ObjView) -> Blocker | None:
    """The GPU side of one node: driver upgrade, GPU operands not ready, cordoned."""
    name = _name(node)
    hop = f"node/{name}"
    labels = _labels(node)
    state = labels.get(UPGRADE_STATE_LABEL, "")
    if state in UPGRADE_BUSY_STATES:
        return Blocker(
            "NodeDriverUpgrading",
            f"node {name} is cordoned for a GPU driver upgrade (state {state})",
            hop,
        )
    if state == UPGRADE_FAILED_STATE:
        return Blocker(
            "NodeDriverUpgradeFailed", f"node {name}: the GPU driver upgrade failed", hop
        )
    gpus = _quantity(dig(node, "status", "allocatable", GPU_RESOURCE, default=0) or 0)
    if labels.get(GPU_PRESENT_LABEL) == "true" and gpus == 0:
        return Blocker(
            "GPUNotAdvertised",
            f"node {name} has GPUs but advertises no {GPU_RESOURCE}: "
            "its GPU driver or device plugin is not ready",
            hop,
        )
    if dig(node, "spec", "unschedulable"):
        return Blocker("NodeCordoned", f"node {name} is cordoned", hop)
    return None


def _is_gpu_node(node: ObjView) -> bool:
    if _labels(node).get(GPU_PRESENT_LABEL) == "true":
        return True
    return _quantity(dig(node, "status", "capacity", GPU_RESOURCE, default=0) or 0) > 0


def needs_nodes(message: str) -> bool:
    """Whether a scheduler message is about GPUs or cordoned nodes (then the nodes tell why)."""
    return GPU_RESOURCE in message or "were unschedulable" in message


def gpu_blocker(found: Blocker, nodes: Iterable[ObjView]) -> Blocker:
    """Refine "no free GPU" (or "the nodes are cordoned") to its cause on the nodes:
    a driver upgrade, GPU operands not ready, or no GPU nodes at all."""
    cordoned = found.reason == "Unschedulable" and "were unschedulable" in found.message
    if found.reason != "InsufficientGPU" and not cordoned:
        return found
    gpu_nodes = [n for n in nodes if _is_gpu_node(n)]
    if not gpu_nodes:
        if cordoned:
            return found
        return Blocker(
            "NoGPUNodes",
            f"{found.message.split(':', 1)[0]}: no node has GPUs ({GPU_RESOURCE})",
            found.hop,
        )
    for node in sorted(gpu_nodes, key=_name):
        on_node = node_blocker(node)
        if on_node is not None:
            return Blocker(
                on_node.reason,
                f"{found.message.split(':', 1)[0]}: {on_node.message}",
                on_node.hop,
            )
    return found


def last_failure(pods: Iterable[ObjView]) -> str:
    """How the newest failed pod's container ended (``exit code 1 (Error): <last line>``), or ""."""
    failed = [p for p in pods if dig(p, "status", "phase") == "Failed"]
    failed.sort(key=lambda p: (_created(p), _name(p)), reverse=True)
    for pod in failed:
        for field in ("initContainerStatuses", "containerStatuses"):
            for status in dig(pod, "status", field, default=[]) or []:
                term = dig(status, "state", "terminated") or {}
                if term and term.get("exitCode") not in (None, 0):
                    return f"pod {_name(pod)} {_last_exit(status).removeprefix('last ')}"
        why = dig(pod, "status", "message") or dig(pod, "status", "reason")
        if why:
            return f"pod {_name(pod)} failed: {why}"
    return ""


def cache_job_blocker(
    job: ObjView | None,
    pods: Iterable[ObjView],
    events: Iterable[ObjView] = (),
    nodes: Iterable[ObjView] | None = None,
) -> Blocker | None:
    """A NIMCache's caching Job: failed for good (``CacheJobFailed``, terminal, naming the
    last pod's exit), or waiting on what blocks its newest pod."""
    if not job:
        return None
    pods = list(pods)
    found = workload_blocker(job)
    if found is not None and found.reason == "JobFailed":
        detail = last_failure(newest_pods(job, pods) or pods) or found.message
        return Blocker(
            "CacheJobFailed", f"caching job {_name(job)} failed: {detail}", found.hop, terminal=True
        )
    return find_blocker([job], pods, events, nodes)


# -- the chain --------------------------------------------------------------------------


def find_blocker(
    workloads: Iterable[ObjView | None],
    pods: Iterable[ObjView],
    events: Iterable[ObjView] = (),
    nodes: Iterable[ObjView] | None = None,
) -> Blocker | None:
    """The first blocker down the chain workload -> newest pods -> node -> GPU.

    ``nodes`` None: the nodes were not looked at (a pod waiting for a GPU stays
    ``InsufficientGPU``); a list, even empty, is the cluster's nodes.
    """
    pods = list(pods)
    events = list(events)
    for workload in workloads:
        if not workload:
            continue
        own = workload_blocker(workload)
        if own is not None and own.reason != "ProgressDeadlineExceeded":
            return own
        # A missed progress deadline is a consequence: the pod's cause (unschedulable,
        # a missing secret...) is the answer when there is one.
        newest = newest_pods(workload, pods)
        for pod in newest:
            found = pod_blocker(pod, events)
            if found is not None:
                return gpu_blocker(found, nodes) if nodes is not None else found
        if not newest:
            refused = _refused_create(workload, events)
            if refused is not None:
                return refused
        if own is not None:
            return own
    return None


def _refused_create(workload: ObjView, events: Sequence[ObjView]) -> Blocker | None:
    """A workload without pods whose controller says it cannot create them: the Job
    controller's ``FailedCreate`` Warning Event (quota, admission), which sets no
    condition on the Job."""
    mine = events_about(workload, events)
    if not mine or mine[-1].get("reason") != "FailedCreate":
        return None
    kind, name = str(workload.get("kind", "")).lower(), _name(workload)
    return _create_failed(str(mine[-1].get("message") or ""), f"{kind} {name}", f"{kind}/{name}")
