"""The ``proxy`` subresource of Services and Pods, answered by the simulated NIMs behind them.

``kubectl get --raw /api/v1/namespaces/nim/services/llm:8000/proxy/v1/models``
reaches a NIM through kube-apiserver's proxy on a real cluster. No container
runs here, so localcluster answers as the NIM would, from what the simulator
knows of the pods behind the Service (its ready endpoints) or of the Pod:

* ``/v1/models``: the OpenAI-style model list, naming the model the container's
  image serves (``registries.served_model``; ``NIM_MODEL_NAME`` for the
  multi-LLM NIM), so a client sees the model its NIMService asked for;
* ``/v1/health/ready`` and ``/v1/health/live``: 200 from a ready NIM;
* ``POST /v1/chat/completions`` and ``/v1/completions`` (through ``kubectl
  port-forward``; the proxy route takes GETs): an OpenAI-style completion saying
  it is simulated, for the served model only (another is 404 as the NIM says);
* anything else a NIM serves: 404 ``{"detail": "Not Found"}``.

A Service without ready endpoints is 503 ``no endpoints available for service``,
as kube-apiserver's proxy answers; a pod that is not running (or not a NIM) is
503 too.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any

from aiohttp import web

from nimctl_runtime.labels import Selector
from nimctl_runtime.meta import Obj

from . import errors
from .codec import json_response
from .host import APIServerHost
from .simulator.kubelet import is_pod_ready, served_model_of


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


def nim_answer(model: str, method: str, route: str, body: bytes = b"") -> tuple[int, Obj]:
    """What a ready NIM serving *model* answers to ``method route`` (status, JSON body).

    The service proxy and ``kubectl port-forward`` both answer through this, so the
    two ways in see the same NIM.
    """
    route = "/" + route.strip("/")
    if method == "GET" and route == "/v1/models":
        return 200, models_answer(model)
    if method == "GET" and route in ("/v1/health/ready", "/v1/health/live"):
        return 200, {"object": "health.response", "message": "Service is ready."}
    if method == "POST" and route in ("/v1/chat/completions", "/v1/completions"):
        return completion_answer(model, route, body)
    return 404, {"detail": "Not Found"}


def _error(status: int, kind: str, message: str) -> tuple[int, Obj]:
    body: Obj = {"object": "error", "message": message, "type": kind}
    return status, {**body, "param": None, "code": status}


def completion_answer(model: str, route: str, body: bytes) -> tuple[int, Obj]:
    """A simulated OpenAI-style completion: the request is checked as a NIM checks it
    (JSON, the served model), the answer says it is simulated."""
    try:
        request = json.loads(body or b"{}")
    except ValueError:
        return _error(400, "BadRequestError", "the request body is not JSON")
    if not isinstance(request, dict):
        return _error(400, "BadRequestError", "the request body must be a JSON object")
    asked = request.get("model")
    if asked != model:
        return _error(404, "NotFoundError", f"The model `{asked}` does not exist.")
    if request.get("stream"):
        return _error(
            400, "BadRequestError", "stream is not simulated in localcluster: send stream=false"
        )
    chat = route == "/v1/chat/completions"
    if chat:
        messages = request.get("messages")
        if not isinstance(messages, list) or not messages:
            return _error(400, "BadRequestError", "messages must be a non-empty list")
        prompt = " ".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))
    else:
        prompt = str(request.get("prompt", ""))
    text = f"This is a simulated answer from {model}: localcluster runs no model."
    prompt_tokens, completion_tokens = len(prompt.split()), len(text.split())
    choice: Obj = {"index": 0, "logprobs": None, "finish_reason": "stop", "stop_reason": None}
    if chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return 200, {
        "id": ("chat-" if chat else "cmpl-") + uuid.uuid4().hex,
        "object": "chat.completion" if chat else "text_completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
        },
    }


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
