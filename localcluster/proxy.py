"""The ``proxy`` subresource of Services and Pods, answered by the simulated NIMs behind them.

``kubectl get --raw /api/v1/namespaces/nim/services/llm:8000/proxy/v1/models``
reaches a NIM through kube-apiserver's proxy on a real cluster. No container
runs here, so localcluster answers as the NIM would, from what the simulator
knows of the pods behind the Service (its ready endpoints) or of the Pod:

* ``/v1/models``: the OpenAI-style model list, naming the model the container's
  image serves (``registries.served_model``; ``NIM_MODEL_NAME`` for the
  multi-LLM NIM), so a client sees the model its NIMService asked for;
* ``/v1/health/ready`` and ``/v1/health/live``: 200 from a ready NIM;
* anything else a NIM serves: 404 ``{"detail": "Not Found"}``.

A Service without ready endpoints is 503 ``no endpoints available for service``,
as kube-apiserver's proxy answers; a pod that is not running (or not a NIM) is
503 too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from nimctl_runtime.labels import Selector

from . import errors
from .codec import json_response
from .host import APIServerHost
from .simulator.kubelet import is_pod_ready, served_model_of

Obj = dict[str, Any]


def nim_model(pod: Mapping[str, Any]) -> str:
    for container in (pod.get("spec") or {}).get("containers") or []:
        model = served_model_of(container)
        if model:
            return model
    return ""


def _targets(cluster: APIServerHost, resource: str, namespace: str, name: str) -> list[Obj]:
    storage = cluster.storage
    if resource == "pods":
        pod = storage.get("v1", "Pod", name, namespace)
        return [pod] if is_pod_ready(pod) else []
    service = storage.get("v1", "Service", name, namespace)
    selector = (service.get("spec") or {}).get("selector") or {}
    if not selector:
        return []
    match = Selector.from_labels({str(k): str(v) for k, v in selector.items()})
    pods: list[Obj] = storage.list("v1", "Pod", namespace)
    return [
        p
        for p in pods
        if match.matches((p.get("metadata") or {}).get("labels")) and is_pod_ready(p)
    ]


def models_answer(model: str) -> Obj:
    """The body of a NIM's ``GET /v1/models``."""
    return {
        "object": "list",
        "data": [
            {
                "id": model,
                "object": "model",
                "created": int(time.time()),
                "owned_by": "system",
                "root": model,
                "parent": None,
                "permission": [],
            }
        ],
    }


def nim_answer(model: str, method: str, route: str) -> tuple[int, Obj]:
    """What a ready NIM serving *model* answers to ``method route`` (status, JSON body).

    The service proxy and ``kubectl port-forward`` both answer through this, so the
    two ways in see the same NIM.
    """
    route = "/" + route.strip("/")
    if method == "GET" and route == "/v1/models":
        return 200, models_answer(model)
    if method == "GET" and route in ("/v1/health/ready", "/v1/health/live"):
        return 200, {"object": "health.response", "message": "Service is ready."}
    return 404, {"detail": "Not Found"}


async def serve(
    cluster: APIServerHost, resource: str, namespace: str, target: str, path: str
) -> web.StreamResponse:
    """Answer ``GET .../{services|pods}/{name[:port]}/proxy/{path}``."""
    if resource not in ("services", "pods"):
        raise errors.not_found("", resource, target)
    name = target.split(":", 1)[0]
    ready = _targets(cluster, resource, namespace, name)
    if not ready:
        what = f'service "{name}"' if resource == "services" else f'pod "{name}"'
        raise errors.StatusError(503, "ServiceUnavailable", f"no endpoints available for {what}")
    model = nim_model(ready[0])
    if not model:
        raise errors.StatusError(
            503,
            "ServiceUnavailable",
            f"{resource[:-1]} {namespace}/{name} runs no simulated NIM: localcluster proxies only "
            "to NIM containers",
        )
    status, body = nim_answer(model, "GET", path)
    if status == 200:
        return json_response(body)
    return web.json_response(body, status=status)
