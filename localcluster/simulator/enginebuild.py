"""A NIM engine build, as the simulated kubelet plays it, and the files it leaves on the PVC.

A NIM container started with ``NIM_CUSTOM_MODEL_NAME`` (and no command) builds
a TensorRT-LLM engine for the profile ``NIM_MODEL_PROFILE`` into its model
store, then serves it; NIM Operator's NIMBuild waits for that pod to be Ready.
Here:

- :func:`simulated` gives such a pod a build time (``BUILD_SECONDS`` simulated
  seconds before it is Ready), unless the pod sets
  ``localcluster.nimctl.io/ready-after`` itself;
- :func:`logs` is what the build container prints (download, build, serve),
  and what a container that ``cat``\\ s a file of a PVC prints: the file, or
  ``cat``'s error;
- :func:`observe` writes, once the build container is Ready, the built profile
  into ``local_cache/local_manifest.yaml`` of the model store's PVC
  (:class:`VolumeFiles`, one simulated file system per claim), which NIMBuild's
  local manifest pod then prints.

A build is told to fail like any pod: the ``localcluster.nimctl.io/simulate:
fail`` annotation (NIMBuild ``spec.annotations`` reach the pod),
``Simulator.set_failure_mode`` or a catalog rule for its image with a non-zero
``exit_code``. A failed build writes nothing.
"""

from __future__ import annotations

import hashlib
import io
import posixpath
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML

from nimctl_runtime.meta import ObjView

__all__ = [
    "BUILD_SECONDS",
    "LOCAL_MANIFEST",
    "VolumeFiles",
    "build_container",
    "built_profile_id",
    "logs",
    "observe",
    "simulated",
]

BUILD_SECONDS = 3.0
MODEL_NAME_ENV = "NIM_CUSTOM_MODEL_NAME"
PROFILE_ENV = "NIM_MODEL_PROFILE"
LOCAL_MANIFEST = "local_cache/local_manifest.yaml"
READY_AFTER_ANNOTATION = "localcluster.nimctl.io/ready-after"
GPU = "nvidia.com/gpu"



def _load(text: str) -> dict[str, Any]:
    data = YAML(typ="safe").load(text) if text.strip() else None
    return dict(data) if isinstance(data, Mapping) else {}


def _dump(data: Mapping[str, Any]) -> str:
    out = io.StringIO()
    y = YAML(typ="safe")
    y.default_flow_style = False
    y.dump(dict(data), out)
    return out.getvalue()


def _env(container: ObjView) -> dict[str, str]:
    return {str(e.get("name")): str(e.get("value") or "") for e in container.get("env") or []}


def build_container(pod: ObjView) -> ObjView | None:
    """The pod's NIM engine build container (env ``NIM_CUSTOM_MODEL_NAME``, image entrypoint)."""
    for c in (pod.get("spec") or {}).get("containers") or []:
        if MODEL_NAME_ENV in _env(c) and not c.get("command") and not c.get("args"):
            return dict(c)
    return None


def simulated(pod: ObjView) -> ObjView:
    """The pod as the kubelet should play it: an engine build takes ``BUILD_SECONDS``."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    if build_container(pod) is None or READY_AFTER_ANNOTATION in annotations:
        return pod
    out = dict(pod)
    meta = dict(out.get("metadata") or {})
    meta["annotations"] = {**annotations, READY_AFTER_ANNOTATION: str(BUILD_SECONDS)}
    out["metadata"] = meta
    return out


def built_profile_id(model_name: str, input_profile: str) -> str:
    """The id a local build gives its engine profile (stable for the same inputs)."""
    return hashlib.sha256(f"local/{model_name}/{input_profile}".encode()).hexdigest()


def _gpus(container: ObjView) -> str:
    resources = container.get("resources") or {}
    for part in ("limits", "requests"):
        value = (resources.get(part) or {}).get(GPU)
        if value not in (None, ""):
            return str(value)
    return "1"


def _build_log(model: str, profile: str, gpus: str, *, ready: bool) -> str:
    lines = [
        f"INFO Selected profile: {profile} (trtllm_buildable)",
        "INFO Downloading model weights to /model-store",
        f"INFO Building TensorRT-LLM engine for {model}: tp={gpus} pp=1",
        "INFO [TRT-LLM] Building engine layers 1..32",
    ]
    if ready:
        lines += [
            f"INFO Engine written to /model-store/local_cache/{model}",
            f"INFO Added profile {built_profile_id(model, profile)} to "
            f"/model-store/{LOCAL_MANIFEST}",
            "INFO Uvicorn running on http://0.0.0.0:8000",
        ]
    return "\n".join(lines) + "\n"


@dataclass
class VolumeFiles:
    """Files written to simulated PVCs: ``(namespace, claim, path) -> text``."""

    files: dict[tuple[str, str, str], str] = field(default_factory=dict)

    def read(self, namespace: str, claim: str, path: str) -> str | None:
        return self.files.get((namespace, claim, posixpath.normpath(path)))

    def write(self, namespace: str, claim: str, path: str, text: str) -> None:
        self.files[(namespace, claim, posixpath.normpath(path))] = text


def _claim_path(pod: ObjView, container: ObjView, path: str) -> tuple[str, str] | None:
    """The PVC and the path inside it that ``path`` of ``container`` is, if on a PVC."""
    claims = {
        v.get("name"): (v.get("persistentVolumeClaim") or {}).get("claimName")
        for v in (pod.get("spec") or {}).get("volumes") or []
    }
    path = posixpath.normpath(path)
    for mount in container.get("volumeMounts") or []:
        root = posixpath.normpath(str(mount.get("mountPath") or "/"))
        claim = claims.get(mount.get("name"))
        if not claim or not (path == root or path.startswith(root.rstrip("/") + "/")):
            continue
        inner = posixpath.relpath(path, root)
        sub = str(mount.get("subPath") or "")
        return str(claim), posixpath.normpath(posixpath.join(sub, inner)) if sub else inner
    return None


def _namespace(pod: ObjView) -> str:
    return str((pod.get("metadata") or {}).get("namespace") or "")


def _container_ready(status: ObjView, name: str) -> bool:
    return any(
        s.get("name") == name and s.get("ready") for s in status.get("containerStatuses") or []
    )


def observe(pod: ObjView, status: ObjView, volumes: VolumeFiles) -> None:
    """Once an engine build is Ready, record its profile in the PVC's local manifest."""
    container = build_container(pod)
    if container is None or not _container_ready(status, str(container.get("name"))):
        return
    env = _env(container)
    cache_path = env.get("NIM_CACHE_PATH") or "/model-store"
    where = _claim_path(pod, container, posixpath.join(cache_path, LOCAL_MANIFEST))
    if where is None:
        return
    model, profile = env[MODEL_NAME_ENV], env.get(PROFILE_ENV, "")
    claim, path = where
    current = _load(volumes.read(_namespace(pod), claim, path) or "")
    profile_id = built_profile_id(model, profile)
    if profile_id in current:
        return
    current[profile_id] = {
        "model": model,
        "release": "local",
        "tags": {
            "model_name": model,
            "llm_engine": "tensorrt_llm",
            "precision": "bf16",
            "tp": _gpus(container),
            "pp": "1",
            "feat_lora": "false",
            "trtllm_buildable": "false",
        },
    }
    volumes.write(_namespace(pod), claim, path, _dump(current))


def _cat_target(container: ObjView) -> str | None:
    """The file a ``sh -c "cat FILE; ..."`` container prints, if it is one."""
    words = [*(container.get("command") or []), *(container.get("args") or [])]
    script = " ".join(str(w) for w in words)
    for part in script.split(";"):
        try:
            tokens = shlex.split(part)
        except ValueError:
            continue
        if len(tokens) == 2 and tokens[0] == "cat":
            return tokens[1]
        if len(tokens) >= 3 and tokens[-2] == "cat" and tokens[0] == "sh":
            return tokens[-1]
    return None


def logs(pod: ObjView, container_name: str, volumes: VolumeFiles, *, started: bool) -> str | None:
    """What an engine build or a ``cat`` of a PVC file prints (None: not such a container)."""
    containers = (pod.get("spec") or {}).get("containers") or []
    container = next((c for c in containers if c.get("name") == container_name), None)
    if container is None:
        return None
    build = build_container(pod)
    if build is not None and build.get("name") == container_name:
        if not started:
            return ""
        env = _env(build)
        ready = _container_ready(pod.get("status") or {}, container_name)
        return _build_log(env[MODEL_NAME_ENV], env.get(PROFILE_ENV, ""), _gpus(build), ready=ready)
    target = _cat_target(container)
    if target is None:
        return None
    where = _claim_path(pod, container, target)
    if where is None:
        return None
    if not started:
        return ""
    text = volumes.read(_namespace(pod), *where)
    if text is None:
        return f"cat: {target}: No such file or directory\n"
    return text
