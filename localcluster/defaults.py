"""Built-in defaulting: the fields kube-apiserver fills in on built-in kinds.

A real API server runs Kubernetes' ``SetDefaults_*`` functions on every create
and update, so clients read back e.g. ``Deployment.spec.replicas: 1`` and
``restartPolicy: Always`` even when they did not send them, and operators rely on
that (a Deployment without ``replicas`` has one replica). This module applies the
defaults that clients and controllers observe for the workload kinds (CronJobs
included), pods, PersistentVolumeClaims and HorizontalPodAutoscalers, and mirrors
a pod spec's ``serviceAccountName`` into the deprecated ``serviceAccount`` as the
v1 conversion does; Service defaults (and IP
allocation) are done by the built-in admission plugin. It mutates in place and
is idempotent. Pod templates get ``metadata.creationTimestamp: null`` as the API
server serialises it, which is what makes a second ``kubectl apply`` "unchanged".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nimctl_runtime.meta import Obj


def _d(obj: Obj, key: str) -> Obj:
    """obj[key] as a dict, created when absent or null."""
    value = obj.get(key)
    if not isinstance(value, dict):
        value = obj[key] = {}
    return value


def _image_pull_policy(image: str) -> str:
    name = image.rsplit("/", 1)[-1]
    if "@" in name:
        return "IfNotPresent"
    tag = name.split(":", 1)[1] if ":" in name else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    # SetDefaults_Probe: a zero is unset (the Go field is a plain int32), so it is defaulted
    for key, default in (
        ("timeoutSeconds", 1),
        ("periodSeconds", 10),
        ("successThreshold", 1),
        ("failureThreshold", 3),
    ):
        if not probe.get(key):
            probe[key] = default
    http = probe.get("httpGet")
    if isinstance(http, dict):
        http.setdefault("scheme", "HTTP")


def _container(c: Any) -> None:
    if not isinstance(c, dict):
        return
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    if isinstance(c.get("image"), str):
        c.setdefault("imagePullPolicy", _image_pull_policy(c["image"]))
    for port in c.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    for key in ("livenessProbe", "readinessProbe", "startupProbe"):
        _probe(c.get(key))
    for env in c.get("env") or []:
        ref = (env.get("valueFrom") or {}).get("fieldRef") if isinstance(env, dict) else None
        if isinstance(ref, dict):
            ref.setdefault("apiVersion", "v1")


def pod_spec(spec: Obj) -> None:
    """``SetDefaults_PodSpec`` and the container defaults clients see."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    # v1's deprecated serviceAccount mirrors serviceAccountName (the v1 conversion).
    if not spec.get("serviceAccountName") and spec.get("serviceAccount"):
        spec["serviceAccountName"] = spec["serviceAccount"]
    if spec.get("serviceAccountName"):
        spec["serviceAccount"] = spec["serviceAccountName"]
    for key in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(key) or []:
            _container(c)
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        for source, mode_key in (("secret", "defaultMode"), ("configMap", "defaultMode")):
            if isinstance(volume.get(source), dict):
                volume[source].setdefault(mode_key, 420)
        if isinstance(volume.get("hostPath"), dict):
            volume["hostPath"].setdefault("type", "")
        if "emptyDir" in volume and volume["emptyDir"] is None:
            volume["emptyDir"] = {}


def _template(spec: Obj) -> None:
    template = spec.get("template")
    if not isinstance(template, dict):
        return
    meta = template.get("metadata")
    if not isinstance(meta, dict):
        meta = template["metadata"] = {}
    meta.setdefault("creationTimestamp", None)
    pod_spec(_d(template, "spec"))


def deployment(obj: Obj) -> None:
    spec = _d(obj, "spec")
    spec.setdefault("replicas", 1)
    strategy = _d(spec, "strategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _d(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", "25%")
        rolling.setdefault("maxSurge", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _template(spec)


def replicaset(obj: Obj) -> None:
    spec = _d(obj, "spec")
    spec.setdefault("replicas", 1)
    _template(spec)


def statefulset(obj: Obj) -> None:
    spec = _d(obj, "spec")
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = _d(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        _d(strategy, "rollingUpdate").setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    policy = _d(spec, "persistentVolumeClaimRetentionPolicy")
    policy.setdefault("whenDeleted", "Retain")
    policy.setdefault("whenScaled", "Retain")
    for claim in spec.get("volumeClaimTemplates") or []:
        if isinstance(claim, dict):
            _d(claim, "spec").setdefault("volumeMode", "Filesystem")
    _template(spec)


def daemonset(obj: Obj) -> None:
    spec = _d(obj, "spec")
    strategy = _d(spec, "updateStrategy")
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        rolling = _d(strategy, "rollingUpdate")
        rolling.setdefault("maxUnavailable", 1)
        rolling.setdefault("maxSurge", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    _template(spec)


def job(obj: Obj) -> None:
    spec = _d(obj, "spec")
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
        spec["parallelism"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    _template(spec)


def cronjob(obj: Obj) -> None:
    spec = _d(obj, "spec")
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_template = spec.get("jobTemplate")
    if isinstance(job_template, dict):
        meta = job_template.get("metadata")
        if not isinstance(meta, dict):
            meta = job_template["metadata"] = {}
        meta.setdefault("creationTimestamp", None)
        _template(_d(job_template, "spec"))


def pod(obj: Obj) -> None:
    pod_spec(_d(obj, "spec"))


def pvc(obj: Obj) -> None:
    _d(obj, "spec").setdefault("volumeMode", "Filesystem")


def hpa(obj: Obj) -> None:
    spec = _d(obj, "spec")
    spec.setdefault("minReplicas", 1)
    if not spec.get("metrics"):  # none given: 80% CPU utilization
        spec["metrics"] = [
            {
                "type": "Resource",
                "resource": {
                    "name": "cpu",
                    "target": {"type": "Utilization", "averageUtilization": 80},
                },
            }
        ]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):
        # a behavior given in part is completed, rule by rule (policies only when absent)
        up = _d(behavior, "scaleUp")
        up.setdefault("stabilizationWindowSeconds", 0)
        up.setdefault("selectPolicy", "Max")
        up.setdefault(
            "policies",
            [
                {"type": "Pods", "value": 4, "periodSeconds": 15},
                {"type": "Percent", "value": 100, "periodSeconds": 15},
            ],
        )
        down = _d(behavior, "scaleDown")
        down.setdefault("selectPolicy", "Max")
        down.setdefault("policies", [{"type": "Percent", "value": 100, "periodSeconds": 15}])


DEFAULTERS: dict[tuple[str, str], Callable[[Obj], None]] = {
    ("apps", "deployments"): deployment,
    ("apps", "replicasets"): replicaset,
    ("apps", "statefulsets"): statefulset,
    ("apps", "daemonsets"): daemonset,
    ("batch", "jobs"): job,
    ("batch", "cronjobs"): cronjob,
    ("", "pods"): pod,
    ("", "persistentvolumeclaims"): pvc,
    ("autoscaling", "horizontalpodautoscalers"): hpa,
}


def apply_builtin_defaults(group: str, resource: str, obj: Obj) -> None:
    """Fill in kube-apiserver's defaults for a built-in object (in place)."""
    defaulter = DEFAULTERS.get((group, resource))
    if defaulter is not None:
        defaulter(obj)
