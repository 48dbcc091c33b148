"""The objects NVIDIA's NIM Operator leaves in a cluster for a NIMCache, NIMService or NIMPipeline.

Written from NVIDIA's k8s-nim-operator (f63f74d7: ``manifests/*.yaml``,
``api/apps/v1alpha1/nimservice_types.go``, ``internal/controller/platform/
{standalone,kserve}/nimservice.go``, ``internal/utils``), as a real API server stores
them: Go's JSON of each object, where empty strings and ``false`` with
``omitempty`` are dropped (``subPath: ""``, ``readOnly: false``,
``runtimeClassName: ""``, ``emptyDir.medium: ""``) and quantities are strings.
Nothing here comes from nimctl's own render (``platforms/``, ``manifests/``):
the take-over test compares nimctl against this independent account.

Facts this module encodes (NVIDIA's, not nimctl's choices):

- every child carries the standard labels, including
  ``app.kubernetes.io/operator-version``, whose value is the operator's
  ``OPERATOR_VERSION`` environment variable; NVIDIA's Helm chart never sets
  it, so the value is ``""``. The Deployment's pod template and the
  LeaderWorkerSet's leader template carry the labels too;
- children are owned by the CR (controller reference) and carry
  ``nvidia.com/last-applied-hash``; those whose template renders annotations
  also carry ``nvidia.com/parent-spec-hash`` and ``openshift.io/required-scc``.
  The two hashes are Go's ``DeepHashObject`` values, which nothing outside Go
  reproduces: here they are stand-ins of the same shape;
- ``MergeEnvVars(a, b)`` lists all of ``b`` first, then ``a``'s other names,
  so user env comes before the standard env, and the LeaderWorkerSet's
  multi-node env after the NIM env;
- the operator adds its finalizer with a full update of the CR from its Go
  types, so the stored spec gains the zero values of the struct fields
  without pointers (``livenessProbe: {}``, ``scale: {hpa: {maxReplicas: 0}}``,
  ``expose.ingress.spec: {}``, NIMCache ``resources: {cpu: "0", memory: "0"}``).
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Mapping
from typing import Any

from nimctl_runtime.meta import Obj

API = "apps.nvidia.com/v1alpha1"
LWS_API = "leaderworkerset.x-k8s.io/v1"

FINALIZERS = {
    "NIMService": "finalizer.nimservice.apps.nvidia.com",
    "NIMCache": "finalizer.nimcache.apps.nvidia.com",
    "NIMPipeline": "finalizer.nimpipeline.apps.nvidia.com",
}
OPERATOR_VERSION = ""  # NVIDIA's chart sets no OPERATOR_VERSION
LAST_APPLIED = "nvidia.com/last-applied-hash"
PARENT_SPEC = "nvidia.com/parent-spec-hash"
MODEL_STORE = "/model-store"

# The MPI start script NVIDIA's operator writes (DefaultMPIStartScript): a fact of
# the ConfigMap's data; a ConfigMap's text never restarts a pod.
_MPI_START_SCRIPT = "\n".join(
    [
        "#!/bin/bash",
        'NIM_JSONL_LOGGING="${NIM_JSONL_LOGGING:-0}"',
        'if [ "${NIM_JSONL_LOGGING}" -eq "1" ] && /opt/nim/llm/.venv/bin/python3 -c '
        '"import nim_llm_sdk.logging.pack_all_logs_into_json" 2> /dev/null; then',
        "  /opt/nim/llm/.venv/bin/python3 -m nim_llm_sdk.entrypoints.openai.api_server |& "
        "/opt/nim/llm/.venv/bin/python3 -m nim_llm_sdk.logging.pack_all_logs_into_json",
        "else",
        "  /opt/nim/llm/.venv/bin/python3 -m nim_llm_sdk.entrypoints.openai.api_server",
        "fi",
    ]
)


# -- helpers ------------------------------------------------------------------------------


def go_hash(value: Any) -> str:
    """A stand-in of Go's DeepHashObject: FNV-1a 32 of the JSON, decimal, safe-encoded."""
    h = 0x811C9DC5
    for b in json.dumps(value, sort_keys=True).encode():
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return "".join("bcdfghjklmnpqrstvwxz2456789"[ord(c) % 27] for c in str(h))


def go_quantity(value: Any) -> str:
    """A decimal quantity in Go's canonical form: ``0.5`` -> ``500m``, ``2`` -> ``2``."""
    text = str(value)
    if not text.replace(".", "", 1).isdigit():
        return text  # a suffixed quantity (``32Gi``) is kept as written
    milli = round(float(text) * 1000)
    return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"


def merge_env(a: list[Obj], b: list[Obj]) -> list[Obj]:
    """NVIDIA's ``MergeEnvVars(a, b)``: all of ``b``, then ``a``'s other names."""
    names = {e["name"] for e in b}
    return [*copy.deepcopy(b), *(copy.deepcopy(e) for e in a if e["name"] not in names)]


def quantities(resources: Mapping[str, Any] | None) -> Obj:
    """A ResourceRequirements as Go writes it: every quantity a string."""
    out: Obj = {}
    for part in ("limits", "requests"):
        if (resources or {}).get(part):
            out[part] = {k: str(v) for k, v in resources[part].items()}  # type: ignore[index]
    return out


def owner_ref(owner: Mapping[str, Any]) -> Obj:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _meta(name: str, owner: Mapping[str, Any], labels: Obj, annotations: Obj | None = None) -> Obj:
    meta: Obj = {
        "name": name,
        "namespace": owner["metadata"]["namespace"],
        "labels": dict(labels),
        "ownerReferences": [owner_ref(owner)],
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def _stamp(obj: Obj) -> Obj:
    """Add ``nvidia.com/last-applied-hash`` (a hash of the desired object) as SyncResource does."""
    obj["metadata"].setdefault("annotations", {})[LAST_APPLIED] = go_hash(obj)
    return obj


# -- the CRs as NVIDIA's finalizer update leaves them -------------------------------------


def stored_nimservice_spec(spec: Mapping[str, Any]) -> Obj:
    """A NIMService spec after a Go round trip (NIMServiceSpec's struct fields appear)."""
    out = copy.deepcopy(dict(spec))
    storage = out.setdefault("storage", {})
    cache = storage.setdefault("nimCache", {})
    for k in [k for k, v in cache.items() if v in ("", None)]:
        del cache[k]
    storage["pvc"] = {k: v for k, v in (storage.get("pvc") or {}).items() if v not in ("", None)}
    expose = out.setdefault("expose", {})
    expose.setdefault("service", {})
    ingress = expose.setdefault("ingress", {})
    ingress.setdefault("spec", {})
    expose.setdefault("router", {})
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        out.setdefault(probe, {})
    hpa = out.setdefault("scale", {}).setdefault("hpa", {})
    hpa.setdefault("maxReplicas", 0)
    for metric in hpa.get("metrics") or []:
        for source in metric.values():
            target = source.get("target") if isinstance(source, dict) else None
            for key in ("value", "averageValue"):
                if isinstance(target, dict) and key in target:
                    target[key] = go_quantity(target[key])
    out.setdefault("metrics", {}).setdefault("serviceMonitor", {})
    if out.get("resources"):
        out["resources"] = quantities(out["resources"])
    return out


def stored_nimcache_spec(spec: Mapping[str, Any]) -> Obj:
    """A NIMCache spec after a Go round trip (``resources`` holds zero quantities)."""
    out = copy.deepcopy(dict(spec))
    ngc = (out.get("source") or {}).get("ngc")
    if isinstance(ngc, dict) and ngc.get("model") is None:
        ngc.pop("model", None)
    pvc = (out.get("storage") or {}).get("pvc") or {}
    out["storage"]["pvc"] = {k: v for k, v in pvc.items() if v not in ("", None)}
    res = out.get("resources") or {}
    out["resources"] = {"cpu": str(res.get("cpu", "0")), "memory": str(res.get("memory", "0"))}
    return out


def stored_nimpipeline_spec(spec: Mapping[str, Any]) -> Obj:
    out = copy.deepcopy(dict(spec))
    for svc in out.get("services") or []:
        svc["spec"] = stored_nimservice_spec(svc.get("spec") or {})
    return out


# -- NIMCache -----------------------------------------------------------------------------


def nimcache_labels(name: str) -> Obj:
    return {
        "app": "k8s-nim-operator",
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/part-of": "nim-cache",
        "app.kubernetes.io/managed-by": "k8s-nim-operator",
    }


def nimcache_pvc_name(cache: Mapping[str, Any]) -> str:
    pvc = cache["spec"]["storage"].get("pvc") or {}
    return str(pvc.get("name") or f"{cache['metadata']['name']}-pvc")


def nimcache_children(cache: Mapping[str, Any]) -> list[Obj]:
    """The PVC and manifest ConfigMap (owned) and the per-namespace caching SA, Role, RoleBinding.

    The caching Job is gone: ``ttlSecondsAfterFinished: 600`` removed it after it
    succeeded, and a Ready cache's Job is not recreated.
    """
    name, ns = cache["metadata"]["name"], cache["metadata"]["namespace"]
    pvc_spec = cache["spec"]["storage"]["pvc"]
    pvc: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(nimcache_pvc_name(cache), cache, nimcache_labels(name)),
        "spec": {
            "accessModes": [pvc_spec.get("volumeAccessMode") or "ReadWriteOnce"],
            "resources": {"requests": {"storage": pvc_spec["size"]}},
        },
    }
    if pvc_spec.get("storageClass"):
        pvc["spec"]["storageClassName"] = pvc_spec["storageClass"]
    manifest_labels = {
        "app": "k8s-nim-operator",
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/managed-by": "k8s-nim-operator",
    }
    manifest: Obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(f"{name}-manifest", cache, manifest_labels),
        "data": {"model_manifest.yaml": _manifest_text(cache)},
    }
    cache_labels = {"app.kubernetes.io/managed-by": "k8s-nim-operator"}
    role_labels = {"app": "k8s-nim-operator", **cache_labels}
    shared: list[Obj] = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "nim-cache-sa", "namespace": ns, "labels": cache_labels},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "nim-cache-role", "namespace": ns, "labels": role_labels},
            "rules": [_scc_rule("nonroot")],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "nim-cache-rolebinding", "namespace": ns, "labels": role_labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "nim-cache-role",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "nim-cache-sa", "namespace": ns}],
        },
    ]
    return [*shared, pvc, manifest]


def _profile(cache: Mapping[str, Any]) -> Obj:
    """The one profile the cache's Job downloaded (model and tags from its modelPuller)."""
    puller = cache["spec"]["source"]["ngc"]["modelPuller"]
    repo, _, release = puller.rpartition(":")
    model = "/".join(repo.split("/")[-2:])
    ngc_model = cache["spec"]["source"]["ngc"].get("model") or {}
    engine = ngc_model.get("engine") or "tensorrt_llm"
    tp = str(ngc_model.get("tensorParallelism") or "1")
    tags = {"gpu": "H100", "llm_engine": engine, "precision": "fp8", "tp": tp, "pp": "1"}
    return {
        "name": go_hash([puller, tags])[:8] * 8,
        "model": model,
        "release": release,
        "config": tags,
    }


def _manifest_text(cache: Mapping[str, Any]) -> str:
    p = _profile(cache)
    tags = "".join(f"    {k}: '{v}'\n" for k, v in sorted(p["config"].items()))
    return f"{p['name']}:\n  model: {p['model']}\n  release: {p['release']}\n  tags:\n{tags}"


def nimcache_status(cache: Mapping[str, Any], stamp: str) -> Obj:
    """A NIMCache whose Job succeeded: ``Ready``, its PVC and the profile it cached."""

    def cond(type_: str, status: str, reason: str, message: str) -> Obj:
        return {
            "type": type_,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": stamp,
        }

    return {
        "state": "Ready",
        "pvc": nimcache_pvc_name(cache),
        "profiles": [_profile(cache)],
        "conditions": [
            cond(
                "NIM_CACHE_PVC_CREATED",
                "True",
                "PVCCreated",
                "The PVC has been created for caching NIM model",
            ),
            cond(
                "NIM_CACHE_JOB_CREATED",
                "True",
                "JobCreated",
                "The Job to cache NIM has been created",
            ),
            cond(
                "NIM_CACHE_JOB_PENDING",
                "False",
                "JobRunning",
                "The Job to cache NIM is in progress",
            ),
            cond(
                "NIM_CACHE_JOB_COMPLETED",
                "True",
                "JobCompleted",
                "The Job to cache NIM has successfully completed",
            ),
            cond("NIM_CACHE_RECONCILE_FAILED", "False", "Reconciled", ""),
        ],
    }


# -- NIMService ---------------------------------------------------------------------------


def standard_labels(name: str) -> Obj:
    return {
        "app.kubernetes.io/name": name,
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/operator-version": OPERATOR_VERSION,
        "app.kubernetes.io/part-of": "nim-service",
        "app.kubernetes.io/managed-by": "k8s-nim-operator",
    }


def _labels(svc: Mapping[str, Any]) -> Obj:
    """GetServiceLabels: the standard labels win over ``spec.labels``."""
    return {**(svc["spec"].get("labels") or {}), **standard_labels(svc["metadata"]["name"])}


def _scc(spec: Mapping[str, Any]) -> str:
    if (spec.get("proxy") or {}).get("certConfigMap"):
        return "anyuid"
    if (spec.get("storage") or {}).get("hostPath"):
        return "hostmount-anyuid"
    return "nonroot"


def _annotations(svc: Mapping[str, Any]) -> Obj:
    """GetNIMServiceAnnotations: the standard annotations win over ``spec.annotations``."""
    spec = svc["spec"]
    std = {"openshift.io/required-scc": _scc(spec), PARENT_SPEC: go_hash(spec)}
    return {**(spec.get("annotations") or {}), **std}


def _scc_rule(name: str) -> Obj:
    return {
        "apiGroups": ["security.openshift.io"],
        "resources": ["securitycontextconstraints"],
        "resourceNames": [name],
        "verbs": ["use"],
    }


def _port(spec: Mapping[str, Any]) -> int:
    return int(spec["expose"]["service"].get("port", 8000))


def nim_env(spec: Mapping[str, Any]) -> list[Obj]:
    """GetEnv: MergeEnvVars(standard env, spec.env) (+ proxy env, not used by the samples)."""
    port = str(_port(spec))
    std: list[Obj] = [
        {"name": "NIM_CACHE_PATH", "value": MODEL_STORE},
        {"name": "OUTLINES_CACHE_DIR", "value": "/tmp/outlines"},
        {"name": "NIM_SERVER_PORT", "value": port},
        {"name": "NIM_HTTP_API_PORT", "value": port},
        {"name": "NIM_JSONL_LOGGING", "value": "1"},
        {"name": "NIM_LOG_LEVEL", "value": "INFO"},
    ]
    if spec.get("authSecret"):
        ref = {"secretKeyRef": {"name": spec["authSecret"], "key": "NGC_API_KEY"}}
        std.append({"name": "NGC_API_KEY", "valueFrom": ref})
    service = spec["expose"]["service"]
    if service.get("grpcPort"):
        std.append({"name": "NIM_GRPC_API_PORT", "value": str(service["grpcPort"])})
        std.append({"name": "NIM_TRITON_GRPC_PORT", "value": str(service["grpcPort"])})
    if service.get("metricsPort"):
        std.append({"name": "NIM_TRITON_METRICS_PORT", "value": str(service["metricsPort"])})
    return merge_env(std, spec.get("env") or [])


def _probes(spec: Mapping[str, Any]) -> Obj:
    defaults = {
        "livenessProbe": ("/v1/health/live", 15, 3),
        "readinessProbe": ("/v1/health/ready", 15, 3),
        "startupProbe": ("/v1/health/ready", 30, 120),
    }
    out: Obj = {}
    for key, (path, delay, failures) in defaults.items():
        given = spec.get(key) or {}
        if given.get("enabled") is False:
            continue
        out[key] = copy.deepcopy(given.get("probe")) or {
            "httpGet": {"path": path, "port": "api"},
            "initialDelaySeconds": delay,
            "timeoutSeconds": 1,
            "periodSeconds": 10,
            "successThreshold": 1,
            "failureThreshold": failures,
        }
    return out


def _ports(spec: Mapping[str, Any]) -> list[Obj]:
    service = spec["expose"]["service"]
    ports = [{"name": "api", "containerPort": _port(spec), "protocol": "TCP"}]
    if service.get("grpcPort"):
        ports.append({"name": "grpc", "containerPort": service["grpcPort"], "protocol": "TCP"})
    if service.get("metricsPort"):
        ports.append(
            {"name": "metrics", "containerPort": service["metricsPort"], "protocol": "TCP"}
        )
    return ports


def _volumes(spec: Mapping[str, Any], claim: str) -> list[Obj]:
    """GetVolumes for a PVC-backed model store (the samples' case)."""
    dshm: Obj = {"medium": "Memory"}
    if (spec.get("storage") or {}).get("sharedMemorySizeLimit"):
        dshm["sizeLimit"] = spec["storage"]["sharedMemorySizeLimit"]
    pvc: Obj = {"claimName": claim}
    if (spec.get("storage") or {}).get("readOnly"):
        pvc["readOnly"] = True
    return [
        {"name": "dshm", "emptyDir": dshm},
        {"name": "model-store", "persistentVolumeClaim": pvc},
    ]


def _mounts(sub_path: str = "") -> list[Obj]:
    store: Obj = {"name": "model-store", "mountPath": MODEL_STORE}
    if sub_path:
        store["subPath"] = sub_path
    return [store, {"name": "dshm", "mountPath": "/dev/shm"}]


def _pod_security(spec: Mapping[str, Any]) -> Obj:
    group = spec.get("groupID", 2000)
    return {"runAsUser": spec.get("userID", 1000), "runAsGroup": group, "fsGroup": group}


def _pull_secrets(spec: Mapping[str, Any]) -> list[Obj]:
    return [{"name": s} for s in spec["image"].get("pullSecrets") or []]


def _image(spec: Mapping[str, Any]) -> str:
    return f"{spec['image']['repository']}:{spec['image']['tag']}"


def nimservice_children(svc: Mapping[str, Any], cache: Mapping[str, Any] | None) -> list[Obj]:
    """SA, Role, RoleBinding, Service and the Deployment (or the LeaderWorkerSet with its
    MPI ConfigMaps and SSH key Secret) NVIDIA's standalone platform makes for ``svc``."""
    name = svc["metadata"]["name"]
    spec = svc["spec"]
    labels = _labels(svc)
    annotations = _annotations(svc)
    multi = spec.get("multiNode")
    selector = {"app": f"{name}-lws", "nim-llm-role": "leader"} if multi else {"app": name}
    service_annotations = {**(spec["expose"]["service"].get("annotations") or {}), **annotations}
    service_labels = {**(spec["expose"]["service"].get("labels") or {}), **labels}
    out: list[Obj] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, svc, labels)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(name, svc, labels),
            "rules": [_scc_rule(_scc(spec))],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(name, svc, labels),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [
                {"kind": "ServiceAccount", "name": name, "namespace": svc["metadata"]["namespace"]}
            ],
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(name, svc, service_labels, service_annotations),
            "spec": {
                "type": spec["expose"]["service"].get("type") or "ClusterIP",
                "selector": selector,
                "ports": [
                    {
                        "port": p["containerPort"],
                        "targetPort": p["name"],
                        "protocol": "TCP",
                        "name": p["name"],
                    }
                    for p in _ports(spec)
                ],
            },
        },
    ]
    if cache is not None:
        claim = cache["status"]["pvc"]
        sub_path = (cache["spec"]["storage"].get("pvc") or {}).get("subPath", "")
    else:
        pvc = spec["storage"]["pvc"]
        claim, sub_path = pvc.get("name") or f"{name}-pvc", pvc.get("subPath", "")
    if (spec.get("scale") or {}).get("enabled") and spec.get("inferencePlatform") != "kserve":
        out.append(_hpa(svc, labels, annotations))
    if (spec.get("metrics") or {}).get("enabled"):
        out.append(_service_monitor(svc, labels, annotations))
    if spec.get("inferencePlatform") == "kserve":
        rbac = [o for o in out if o["kind"] != "Service"]
        isvc = _inference_service(svc, labels, annotations, claim, sub_path)
        return [_stamp(o) for o in (*rbac, isvc)]
    pipeline = int(((multi or {}).get("parallelism") or {}).get("pipeline") or 1)
    if multi and pipeline > 1:
        out += _multinode(svc, labels, annotations, claim, sub_path)
    else:
        out.append(_deployment(svc, labels, annotations, claim, sub_path))
    return [_stamp(o) for o in out]


def _container(spec: Mapping[str, Any], name: str, env: list[Obj], mounts: list[Obj]) -> Obj:
    ctr: Obj = {"name": name, "ports": _ports(spec), "image": _image(spec)}
    if spec["image"].get("pullPolicy"):
        ctr["imagePullPolicy"] = spec["image"]["pullPolicy"]
    for key in ("command", "args"):
        if spec.get(key):
            ctr[key] = list(spec[key])
    ctr["volumeMounts"] = mounts
    ctr["env"] = env
    if spec.get("resources"):
        ctr["resources"] = quantities(spec["resources"])
    ctr.update(_probes(spec))
    return ctr


def _deployment(
    svc: Mapping[str, Any], labels: Obj, annotations: Obj, claim: str, sub_path: str
) -> Obj:
    name, spec = svc["metadata"]["name"], svc["spec"]
    pod: Obj = {
        "serviceAccountName": name,
        "containers": [_container(spec, f"{name}-ctr", nim_env(spec), _mounts(sub_path))],
        "volumes": _volumes(spec, claim),
        "securityContext": _pod_security(spec),
    }
    if spec["image"].get("pullSecrets"):
        pod["imagePullSecrets"] = _pull_secrets(spec)
    for key in (
        "nodeSelector",
        "affinity",
        "schedulerName",
        "priorityClassName",
        "runtimeClassName",
    ):
        if spec.get(key):
            pod[key] = copy.deepcopy(spec[key])
    deployment: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, svc, labels, annotations),
        "spec": {
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0},
            },
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "labels": {"app": name, **labels},
                    "annotations": {k: v for k, v in annotations.items() if k != PARENT_SPEC},
                },
                "spec": pod,
            },
        },
    }
    scale = spec.get("scale") or {}
    replicas = (scale.get("hpa") or {}).get("minReplicas") if scale.get("enabled") else None
    if replicas is None:
        replicas = spec.get("replicas")
    if replicas is not None:
        deployment["spec"]["replicas"] = replicas
    return deployment


def _hpa(svc: Mapping[str, Any], labels: Obj, annotations: Obj) -> Obj:
    """GetHPAParams: the HPA of the Deployment, the NIMService's range, metrics and behavior."""
    name, scale = svc["metadata"]["name"], svc["spec"]["scale"]
    hpa = scale.get("hpa") or {}
    spec: Obj = {
        "scaleTargetRef": {"kind": "Deployment", "name": name, "apiVersion": "apps/v1"},
        "maxReplicas": hpa.get("maxReplicas", 0),
    }
    for key in ("minReplicas", "metrics", "behavior"):
        if hpa.get(key) is not None:
            spec[key] = copy.deepcopy(hpa[key])
    hpa_annotations = {**(scale.get("annotations") or {}), **annotations}
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(name, svc, labels, hpa_annotations),
        "spec": spec,
    }


def _service_monitor(svc: Mapping[str, Any], labels: Obj, annotations: Obj) -> Obj:
    """GetServiceMonitorParams: ``/v1/metrics`` on ``api`` (and ``/metrics`` on ``metrics``)."""
    name, spec = svc["metadata"]["name"], svc["spec"]
    monitor = (spec.get("metrics") or {}).get("serviceMonitor") or {}
    timing = {k: monitor[k] for k in ("scrapeTimeout", "interval") if monitor.get(k)}
    endpoints = [{"path": "/v1/metrics", "port": "api", **timing}]
    if spec["expose"]["service"].get("metricsPort"):
        endpoints.append({"path": "/metrics", "port": "metrics", **timing})
    sm_labels = {**labels, **(monitor.get("additionalLabels") or {})}  # additional labels win
    sm_annotations = {**(monitor.get("annotations") or {}), **annotations}
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": _meta(name, svc, sm_labels, sm_annotations),
        "spec": {
            "namespaceSelector": {"matchNames": [svc["metadata"]["namespace"]]},
            "selector": {"matchLabels": dict(labels)},
            "endpoints": endpoints,
        },
    }


ISVC_API = "serving.kserve.io/v1beta1"
_KSERVE_MODE = "serving.kserve.io/deploymentMode"


def _hpa_predictor_fields(spec: Mapping[str, Any]) -> Obj:
    """GetInferenceServiceHPAParams: the replica range and the first CPU/memory metric."""
    hpa = (spec.get("scale") or {}).get("hpa") or {}
    out: Obj = {}
    if hpa.get("minReplicas") is not None:
        out["minReplicas"] = hpa["minReplicas"]
    if hpa.get("maxReplicas"):
        out["maxReplicas"] = hpa["maxReplicas"]
    for metric in hpa.get("metrics") or []:
        resource = metric.get("resource") or {}
        if metric.get("type") == "Resource" and resource.get("name") in ("cpu", "memory"):
            target = resource.get("target") or {}
            out["scaleMetricType"] = target.get("type")
            out["scaleMetric"] = resource["name"]
            value = target.get("averageUtilization")
            if value:
                out["scaleTarget"] = value
            break
    return out


def _inference_service(
    svc: Mapping[str, Any], labels: Obj, annotations: Obj, claim: str, sub_path: str
) -> Obj:
    """The InferenceService of a NIMService on KServe in Standard (raw Deployment) mode."""
    name, spec = svc["metadata"]["name"], svc["spec"]
    mode = (spec.get("annotations") or {}).get(_KSERVE_MODE, "Standard")
    assert mode in ("Standard", "RawDeployment"), "only KServe's Standard mode is derived here"
    isvc_annotations = dict(annotations)
    predictor: Obj = {}
    if (spec.get("scale") or {}).get("enabled"):
        isvc_annotations["serving.kserve.io/autoscalerClass"] = "hpa"
        predictor.update(_hpa_predictor_fields(spec))
    elif spec.get("replicas") is not None:
        predictor.update(minReplicas=spec["replicas"], maxReplicas=spec["replicas"])
    isvc_annotations["serving.kserve.io/enable-metric-aggregation"] = "true"
    isvc_annotations["serving.kserve.io/enable-prometheus-scraping"] = "true"
    isvc_annotations.setdefault(_KSERVE_MODE, mode)
    isvc_labels = dict(labels)
    if "networking.kserve.io/visibility" not in isvc_labels and not _ingress_enabled(spec):
        isvc_labels["networking.kserve.io/visibility"] = "cluster-local"
    predictor["deploymentStrategy"] = {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 0},
    }
    predictor["labels"] = {"app": name}
    predictor["annotations"] = {k: v for k, v in annotations.items() if k != PARENT_SPEC}
    predictor["serviceAccountName"] = name
    ctr = _container(spec, f"{name}-ctr", nim_env(spec), _mounts(sub_path))
    for key in ("command", "args"):  # inferenceservice.yaml renders neither
        ctr.pop(key, None)
    predictor["containers"] = [ctr]
    predictor["volumes"] = _volumes(spec, claim)
    if spec["image"].get("pullSecrets"):
        predictor["imagePullSecrets"] = _pull_secrets(spec)
    predictor["securityContext"] = _pod_security(spec)
    for key in (
        "nodeSelector",
        "affinity",
        "schedulerName",
        "priorityClassName",
        "runtimeClassName",
    ):
        if spec.get(key):
            predictor[key] = copy.deepcopy(spec[key])
    return {
        "apiVersion": ISVC_API,
        "kind": "InferenceService",
        "metadata": _meta(name, svc, isvc_labels, isvc_annotations),
        "spec": {"predictor": predictor},
    }


def _ingress_enabled(spec: Mapping[str, Any]) -> bool:
    expose = spec.get("expose") or {}
    return bool((expose.get("ingress") or {}).get("enabled")) or bool(
        ((expose.get("router") or {}).get("ingress") or {}).get("ingressClass")
    )


def _field_env(name: str, path: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}


def _lws_env(spec: Mapping[str, Any], leader: bool) -> list[Obj]:
    par = spec["multiNode"]["parallelism"]
    tp, pp = str(par.get("tensor") or 1), str(par.get("pipeline") or 1)
    common = merge_env(
        [
            {"name": "NIM_MPI_ALLOW_RUN_AS_ROOT", "value": "0"},
            {"name": "NIM_NUM_COMPUTE_NODES", "value": pp},
            {"name": "NIM_MULTI_NODE", "value": "1"},
            {"name": "NIM_TENSOR_PARALLEL_SIZE", "value": tp},
            {"name": "NIM_PIPELINE_PARALLEL_SIZE", "value": pp},
            _field_env(
                "NIM_NODE_RANK", "metadata.labels['leaderworkerset.sigs.k8s.io/worker-index']"
            ),
        ],
        nim_env(spec),
    )
    if leader:
        timeout = (spec["multiNode"].get("mpi") or {}).get("mpiStartTimeout") or 300
        extra = [
            {"name": "NIM_LEADER_ROLE", "value": "1"},
            {"name": "OMPI_MCA_orte_keep_fqdn_hostnames", "value": "true"},
            {"name": "OMPI_MCA_plm_rsh_args", "value": "-o ConnectionAttempts=20"},
            {"name": "GPUS_PER_NODE", "value": tp},
            {"name": "CLUSTER_START_TIMEOUT", "value": str(timeout)},
            _field_env("CLUSTER_SIZE", "metadata.annotations['leaderworkerset.sigs.k8s.io/size']"),
            _field_env("GROUP_INDEX", "metadata.labels['leaderworkerset.sigs.k8s.io/group-index']"),
        ]
    else:
        extra = [
            {"name": "NIM_LEADER_ROLE", "value": "0"},
            _field_env(
                "LEADER_NAME", "metadata.annotations['leaderworkerset.sigs.k8s.io/leader-name']"
            ),
            _field_env("NAMESPACE", "metadata.namespace"),
            _field_env("LWS_NAME", "metadata.labels['leaderworkerset.sigs.k8s.io/name']"),
        ]
    return merge_env(extra, common)


def _multinode(
    svc: Mapping[str, Any], labels: Obj, annotations: Obj, claim: str, sub_path: str
) -> list[Obj]:
    """The LeaderWorkerSet ``<name>-lws`` (MPI mode) and its two ConfigMaps and Secret."""
    name, ns, spec = svc["metadata"]["name"], svc["metadata"]["namespace"], svc["spec"]
    lws_name = f"{name}-lws"
    par = spec["multiNode"]["parallelism"]
    tp, pp = int(par.get("tensor") or 1), int(par.get("pipeline") or 1)
    pod_annotations = {k: v for k, v in annotations.items() if k != PARENT_SPEC}
    exec_mode = {"defaultMode": 365}
    ssh_pk = {"name": "ssh-pk", "secret": {"secretName": f"{name}-ssh-pk", "defaultMode": 256}}
    script = {
        "name": "start-mpi-script",
        "configMap": {"name": f"{name}-mpi-start-script", **exec_mode},
    }
    leader_volumes = [
        *_volumes(spec, claim),
        {"name": "mpi-config", "configMap": {"name": f"{name}-mpi-config", **exec_mode}},
        {"name": "ssh-dotfiles", "emptyDir": {}},
        ssh_pk,
        script,
    ]
    worker_volumes = [
        *_volumes(spec, claim),
        {"name": "ssh-confs", "emptyDir": {}},
        {"name": "ssh-dotfiles", "emptyDir": {}},
        ssh_pk,
        script,
    ]
    tail = [
        {"name": "ssh-dotfiles", "mountPath": "/opt/nim/llm/.ssh"},
        {"name": "ssh-pk", "mountPath": "/opt/nim/llm/pk"},
        {
            "name": "start-mpi-script",
            "mountPath": "/opt/nim/start-mpi-cluster.sh",
            "subPath": "start-mpi-cluster.sh",
        },
    ]
    leader_mounts = [*_mounts(sub_path), {"name": "mpi-config", "mountPath": "/etc/mpi"}, *tail]
    worker_mounts = [*_mounts(sub_path), {"name": "ssh-confs", "mountPath": "/ssh-confs"}, *tail]

    def container(role: str, env: list[Obj], mounts: list[Obj], probes: bool) -> Obj:
        # lws.yaml: no imagePullPolicy, command or args on the NIM containers; the
        # worker has no liveness/readiness probe and a startup probe only for Ray.
        ctr: Obj = {"name": role, "env": env, "image": _image(spec)}
        if probes:
            p = _probes(spec)
            for key in ("livenessProbe", "readinessProbe", "startupProbe"):
                if key in p:
                    ctr[key] = p[key]
        ctr["ports"] = _ports(spec)
        if spec.get("resources"):
            ctr["resources"] = quantities(spec["resources"])
        ctr["volumeMounts"] = mounts
        return ctr

    def pod(ctr: Obj, volumes: list[Obj]) -> Obj:
        out: Obj = {}
        if spec["image"].get("pullSecrets"):
            out["imagePullSecrets"] = _pull_secrets(spec)
        out["securityContext"] = _pod_security(spec)
        out["containers"] = [ctr]
        if spec.get("nodeSelector"):
            out["nodeSelector"] = dict(spec["nodeSelector"])
        out["volumes"] = volumes
        return out

    leader = container("nim-leader", _lws_env(spec, True), leader_mounts, probes=True)
    worker = container("nim-worker", _lws_env(spec, False), worker_mounts, probes=False)
    lws: Obj = {
        "apiVersion": LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": _meta(lws_name, svc, labels, annotations),
        "spec": {
            "leaderWorkerTemplate": {
                "leaderTemplate": {
                    "metadata": {
                        "creationTimestamp": None,
                        "annotations": pod_annotations,
                        "labels": {"app": lws_name, "nim-llm-role": "leader", **labels},
                    },
                    "spec": pod(leader, leader_volumes),
                },
                "size": pp,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": {
                    "metadata": {"creationTimestamp": None, "annotations": pod_annotations},
                    "spec": pod(worker, worker_volumes),
                },
            },
            "networkConfig": {"subdomainPolicy": "Shared"},
            "replicas": spec.get("replicas", 1),
            "rolloutStrategy": {
                "type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "startupPolicy": "LeaderCreated",
        },
    }
    hostfiles = {
        f"hostfile-{i}": f"localhost slots={tp}\n"
        + "".join(f"{lws_name}-{i}-{j}.{lws_name}.{ns}.svc slots={tp}\n" for j in range(1, pp))
        for i in range(int(spec.get("replicas") or 0))
    }
    own_annotations = dict(svc["metadata"].get("annotations") or {})
    config = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(f"{name}-mpi-config", svc, labels, own_annotations),
        "data": hostfiles,
    }
    start = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(f"{name}-mpi-start-script", svc, labels, own_annotations),
        "data": {"start-mpi-cluster.sh": _MPI_START_SCRIPT + "\n"},
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(f"{name}-ssh-pk", svc, labels, own_annotations),
        "type": "Opaque",
        "data": {"private.key": base64.b64encode(_rsa_pem()).decode()},
    }
    return [config, start, secret, lws]


def _rsa_pem() -> bytes:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def nimservice_status(svc: Mapping[str, Any], endpoints: tuple[str, str], stamp: str) -> Obj:
    """What NVIDIA's operator writes on a ready NIMService (SetConditionsReady)."""
    name = svc["metadata"]["name"]
    if svc["spec"].get("inferencePlatform") == "kserve":
        message = ""  # the InferenceService's PredictorReady message
    elif svc["spec"].get("multiNode"):
        message = f'leaderworkerset "{name}-lws" is ready'
    else:
        message = f'deployment "{name}" successfully rolled out\n'
    return {
        "state": "Ready",
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Ready",
                "message": message,
                "lastTransitionTime": stamp,
            },
            {
                "type": "Failed",
                "status": "False",
                "reason": "Ready",
                "message": "",
                "lastTransitionTime": stamp,
            },
        ],
        "model": {
            "name": svc["spec"]["image"]["repository"].split("/", 2)[-1],
            "clusterEndpoint": endpoints[0],
            "externalEndpoint": endpoints[1],
        },
    }


# -- NIMPipeline --------------------------------------------------------------------------


def pipeline_nimservices(pipeline: Mapping[str, Any]) -> list[Obj]:
    """The enabled services' NIMServices: the spec as given, owned by the pipeline, and the
    hash annotation ``IsSpecChanged`` adds (no labels)."""
    out: list[Obj] = []
    for service in pipeline["spec"].get("services") or []:
        if not service.get("enabled"):
            continue
        spec = copy.deepcopy(service["spec"])
        env = [
            {"name": d["envName"], "value": d["envValue"]}
            for d in service.get("dependencies") or []
            if d.get("envName") and d.get("envValue")
        ]
        if env:
            spec["env"] = merge_env(spec.get("env") or [], env)
        obj: Obj = {
            "apiVersion": API,
            "kind": "NIMService",
            "metadata": {
                "name": service["name"],
                "namespace": pipeline["metadata"]["namespace"],
                "ownerReferences": [owner_ref(pipeline)],
            },
            "spec": spec,
        }
        out.append(_stamp(obj))
    return out


def nimpipeline_status(services: Mapping[str, str]) -> Obj:
    ready = all(s == "Ready" for s in services.values())
    return {"state": "Ready" if ready else "NotReady", "states": dict(services)}
