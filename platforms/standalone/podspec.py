"""The NIM's pod: env, probes, resources and GPUs, DRA claims, the PodSpec and the Deployment.

Functions of ``NIMServiceInputs`` (nim-operator.md §2.5, §2.7, §2.8, §6):
``nim_pod_spec`` serves the Deployment, the LeaderWorkerSet's leader and
worker templates and the KServe predictor alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.apps.v1alpha1.common import Image, NIMContainerSpec, ProxySpec
from api.apps.v1alpha1.nimservice import (
    DRAClaimCreationSpec,
)
from manifests import deployment as deployment_builder
from manifests import pod
from manifests.hashing import short_hash
from manifests.labels import merge_maps, selector_labels
from platforms.standalone import sources
from platforms.standalone.context import ORCHESTRATOR_TKGS, RESOURCE_CLAIM_TEMPLATE
from platforms.standalone.dra_checks import DRAExpressionError, device_cel_expressions
from platforms.standalone.errors import RenderError
from platforms.standalone.inputs import MODEL_STORE, NIMServiceInputs, given, quantity
from platforms.standalone.networking import (
    PORT_API,
    PORT_GRPC,
    PORT_METRICS,
    is_autoscaling_enabled,
)

DEFAULT_USER_ID = 1000
DEFAULT_GROUP_ID = 2000
GPU_RESOURCE = "nvidia.com/gpu"

CA_INIT_CONTAINER = "update-ca-certificates"
CA_INIT_SCRIPT = (
    "echo 'Copying CA certs from Config Map'; ls -l /custom; "
    "cp /custom/*.crt /usr/local/share/ca-certificates/; "
    'for f in /custom/*.pem; do cp "$f" '
    '"/usr/local/share/ca-certificates/$(basename "${f%.pem}")-pem.crt"; done;'
    "ls -l  /usr/local/share/ca-certificates/;echo 'Updating CA certs'; "
    "update-ca-certificates; echo 'CA certs updated'; cp -r /etc/ssl/certs/ /ca-certs;"
    "echo 'Exiting update-ca-certificates init container'"
)


__all__ = [
    "GPU_RESOURCE",
    "deployment",
    "dra",
    "image_of",
    "nim_env",
    "nim_pod_spec",
    "nim_probes",
    "nim_resources",
    "proxy_env",
]


def image_of(image: Image) -> str:
    """``repository:tag`` (or just the repository when there is no tag)."""
    return f"{image.repository}:{image.tag}" if image.tag else image.repository


def nim_env(inp: NIMServiceInputs) -> list[dict[str, Any]]:
    """The NIM container's env, in NVIDIA's precedence order (§2.5)."""
    standard = [
        pod.env_var("NIM_CACHE_PATH", MODEL_STORE),
        pod.env_var("OUTLINES_CACHE_DIR", "/tmp/outlines"),
        pod.env_var("NIM_SERVER_PORT", str(inp.port)),
        pod.env_var("NIM_HTTP_API_PORT", str(inp.port)),
        pod.env_var("NIM_JSONL_LOGGING", "1"),
        pod.env_var("NIM_LOG_LEVEL", "INFO"),
    ]
    auth = inp.spec.auth_secret or ""
    if auth:
        standard.append(pod.secret_env_var("NGC_API_KEY", auth, "NGC_API_KEY"))
    if inp.grpc_port:
        standard.append(pod.env_var("NIM_GRPC_API_PORT", str(inp.grpc_port)))
        standard.append(pod.env_var("NIM_TRITON_GRPC_PORT", str(inp.grpc_port)))
    if inp.metrics_port:
        standard.append(pod.env_var("NIM_TRITON_METRICS_PORT", str(inp.metrics_port)))
    env = pod.merge_env_vars(standard, inp.spec.env or [])
    proxy = inp.spec.proxy
    if given(proxy):
        assert proxy is not None
        env = pod.merge_env_vars(env, proxy_env(proxy))
    cache = inp.nimcache
    native = inp.is_native()
    if cache is not None and sources.is_universal(cache) and not native:
        env = pod.add_env_defaults(
            env,
            [
                pod.env_var("NIM_MODEL_NAME", MODEL_STORE),
                pod.env_var("HF_HOME", f"{MODEL_STORE}/huggingface/hub"),
                pod.env_var("NIM_MODEL_PATH", sources.hf_uri(cache)),
            ],
        )
    if native:
        path = f"/model/{cache.metadata.name}" if cache is not None else "/model"
        env = pod.merge_env_vars(env, [pod.env_var("NIM_ENGINE_MODEL_PATH", path)])
        env = pod.remove_env(env, "NGC_API_KEY")
        if auth:
            env = pod.remove_env(env, "HF_TOKEN")
            env.append(pod.secret_env_var("NGC_API_KEY", auth, "NGC_API_KEY", optional=True))
            env.append(pod.secret_env_var("HF_TOKEN", auth, "HF_TOKEN", optional=True))
    elif _is_hf_model(inp, env):
        env = pod.remove_env(env, "NGC_API_KEY")
        if auth:
            # NVIDIA puts the two credentials first, the NIM_* block after them
            # (as a real API server shows its HF and multi-LLM samples' pods).
            env = [
                pod.secret_env_var("NGC_API_KEY", auth, "NGC_API_KEY", optional=True),
                pod.secret_env_var("HF_TOKEN", auth, "HF_TOKEN"),
                *pod.remove_env(env, "HF_TOKEN"),
            ]
    profile = inp.spec.storage.nim_cache.profile
    if profile:
        env = pod.add_env_defaults(env, [pod.env_var("NIM_MODEL_PROFILE", profile)])
    return env


def _is_hf_model(inp: NIMServiceInputs, env: list[dict[str, Any]]) -> bool:
    if inp.nimcache is not None and sources.is_hf_model(inp.nimcache):
        return True
    return any(
        e["name"] == "NIM_MODEL_NAME" and str(e.get("value", "")).startswith("hf://") for e in env
    )


def nim_probes(inp: NIMServiceInputs) -> dict[str, dict[str, Any]]:
    defaults = {
        "livenessProbe": pod.http_get_probe("/v1/health/live", PORT_API, initial_delay_seconds=15),
        "readinessProbe": pod.http_get_probe(
            "/v1/health/ready", PORT_API, initial_delay_seconds=15
        ),
        "startupProbe": pod.http_get_probe(
            "/v1/health/ready", PORT_API, initial_delay_seconds=30, failure_threshold=120
        ),
    }
    given = {
        "livenessProbe": inp.spec.liveness_probe,
        "readinessProbe": inp.spec.readiness_probe,
        "startupProbe": inp.spec.startup_probe,
    }
    out: dict[str, dict[str, Any]] = {}
    for key, default in defaults.items():
        cfg = given[key]
        if cfg.enabled is False:
            continue
        out[key] = dict(cfg.probe) if cfg.probe else default
    return out


def nim_resources(inp: NIMServiceInputs, has_dra: bool) -> dict[str, Any] | None:
    res = dict(inp.spec.resources or {})
    res.pop("claims", None)
    gpus = _auto_gpus(inp, res, has_dra)
    if gpus is not None:
        res["requests"] = {**(res.get("requests") or {}), GPU_RESOURCE: gpus}
        res["limits"] = {**(res.get("limits") or {}), GPU_RESOURCE: gpus}
    return {k: v for k, v in res.items() if v} or None


def _auto_gpus(inp: NIMServiceInputs, res: Mapping[str, Any], has_dra: bool) -> int | None:
    """GPU count from the cached profile's tensor parallelism (§2.7), or None."""
    profile = inp.spec.storage.nim_cache.profile
    cache = inp.nimcache
    if not profile or cache is None or not sources.is_optimized(cache) or has_dra:
        return None
    if GPU_RESOURCE in (res.get("requests") or {}) or GPU_RESOURCE in (res.get("limits") or {}):
        return None
    for entry in (cache.status.profiles if cache.status is not None else None) or []:
        if entry.name != profile:
            continue
        if inp.spec.multi_node is not None:
            return inp.tensor  # GPUs per node of the group
        config = entry.config or {}
        tp = config.get("tensorParallelism", config.get("tp", "1"))
        try:
            return int(str(tp))
        except ValueError:
            raise RenderError(
                f"failed to parse tensor parallelism {tp!r} of profile {profile}"
            ) from None
    return None


def dra(
    inp: NIMServiceInputs,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """ResourceClaimTemplates to create, pod resourceClaims, container claims."""
    resources = inp.spec.dra_resources or []
    templates: list[dict[str, Any]] = []
    pod_claims: list[dict[str, Any]] = []
    container_claims: list[dict[str, Any]] = []
    svc_hash = short_hash(inp.name) if resources else ""
    seen: dict[str, int] = {}
    for index, res in enumerate(resources):
        if res.resource_claim_name:
            field_type, ref_key, ref = 0, "resourceClaimName", res.resource_claim_name
        elif res.resource_claim_template_name:
            field_type, ref_key = 1, "resourceClaimTemplateName"
            ref = res.resource_claim_template_name
        elif res.claim_creation_spec is not None:
            spec = res.claim_creation_spec
            ref = f"{spec.generate_name or 'claimtemplate'}-{svc_hash}-{index}"
            field_type, ref_key = 1, "resourceClaimTemplateName"
            if inp.ctx.capabilities.has(RESOURCE_CLAIM_TEMPLATE):
                templates.append(_claim_template(inp, ref, spec))
        else:
            raise RenderError(
                f"spec.draResources[{index}]: exactly one of spec.resourceClaimName, "
                "spec.resourceClaimTemplateName, or spec.claimCreationSpec must be set."
            )
        # NVIDIA numbers pod claims per distinct base name (0 unless one repeats).
        base = f"claim-{svc_hash}-{field_type}-{short_hash(ref)}"
        seen[base] = seen.get(base, -1) + 1
        claim = f"{base}-{seen[base]}"
        pod_claims.append({"name": claim, ref_key: ref})
        requests = res.requests or []
        if requests:
            container_claims.extend({"name": claim, "request": r} for r in requests)
        else:
            container_claims.append({"name": claim})
    return templates, pod_claims, container_claims


def _claim_template(inp: NIMServiceInputs, name: str, spec: DRAClaimCreationSpec) -> dict[str, Any]:
    requests = []
    for device in spec.devices:
        try:
            exprs = device_cel_expressions(device)
        except DRAExpressionError as exc:
            raise RenderError(f"spec.draResources: device {device.name}: {exc}") from None
        selectors = [{"cel": {"expression": expr}} for expr in exprs]
        exactly: dict[str, Any] = {
            "deviceClassName": device.device_class_name or "gpu.nvidia.com",
            "allocationMode": "ExactCount",
            "count": device.count,
        }
        if selectors:
            exactly["selectors"] = selectors
        requests.append({"name": device.name, "exactly": exactly})
    return {
        "apiVersion": RESOURCE_CLAIM_TEMPLATE[0],
        "kind": RESOURCE_CLAIM_TEMPLATE[1],
        "metadata": inp.meta(name),
        "spec": {
            # Claims made from the template carry the NIMService's labels too.
            "metadata": {"labels": dict(inp.labels)},
            "spec": {"devices": {"requests": requests}},
        },
    }


def nim_pod_spec(
    inp: NIMServiceInputs,
    *,
    container_name: str,
    model_volume: dict[str, Any],
    sub_path: str | None,
    pod_claims: list[dict[str, Any]],
    container_claims: list[dict[str, Any]],
    extra_env: list[dict[str, Any]] | None = None,
    extra_volumes: list[dict[str, Any]] | None = None,
    extra_mounts: list[dict[str, Any]] | None = None,
    extra_ports: list[dict[str, Any]] | None = None,
    command: list[str] | None = None,
    args: list[str] | None = None,
    probes: dict[str, dict[str, Any]] | None = None,
    side_env: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The PodSpec running the NIM (Deployment pods, LWS leaders and workers).

    ``extra_env`` sits under the NIM env (the NIMService's env wins). User init
    and sidecar containers get the NIM container's env, or the NIM env over
    ``side_env`` when given (NVIDIA's LeaderWorkerSet gives them the multi-node
    env common to leader and workers, without the role's own).
    """
    spec = inp.spec
    ca_config_map = spec.proxy.cert_config_map if spec.proxy is not None else None
    user_inits = list(spec.init_containers or [])
    sidecars = list(spec.sidecar_containers or [])
    scratch = bool(user_inits or sidecars)

    volumes = [
        pod.empty_dir_volume(
            "dshm", medium="Memory", size_limit=quantity(spec.storage.shared_memory_size_limit)
        ),
        model_volume,
    ]
    mounts = [
        pod.volume_mount("model-store", path, sub_path=sub_path) for path in inp.model_mount_paths()
    ]
    mounts.append(pod.volume_mount("dshm", "/dev/shm"))
    if scratch:
        volumes.append(pod.empty_dir_volume("scratch"))
        mounts.append(pod.volume_mount("scratch", "/scratch"))
    if ca_config_map:
        volumes.append(pod.empty_dir_volume("ca-cert-volume"))
        volumes.append(pod.config_map_volume("custom-ca", ca_config_map))
        mounts.append(pod.volume_mount("ca-cert-volume", "/etc/ssl"))
    volumes.extend(extra_volumes or [])
    mounts.extend(extra_mounts or [])

    base_env = nim_env(inp)
    env = pod.merge_env_vars(extra_env, base_env) if extra_env else base_env
    extras_env = env if side_env is None else pod.merge_env_vars(side_env, base_env)
    resources = nim_resources(inp, bool(pod_claims))
    if container_claims:
        resources = {**(resources or {}), "claims": container_claims}
    ports = [{"name": PORT_API, "containerPort": inp.port, "protocol": "TCP"}]
    if inp.grpc_port:
        ports.append({"name": PORT_GRPC, "containerPort": inp.grpc_port, "protocol": "TCP"})
    if inp.metrics_port:
        ports.append({"name": PORT_METRICS, "containerPort": inp.metrics_port, "protocol": "TCP"})
    ports.extend(extra_ports or [])
    probes = nim_probes(inp) if probes is None else probes
    main = pod.container(
        container_name,
        image_of(spec.image),
        image_pull_policy=spec.image.pull_policy,
        command=command,
        args=args,
        env=env,
        ports=ports,
        resources=resources,
        volume_mounts=mounts,
        liveness_probe=probes.get("livenessProbe"),
        readiness_probe=probes.get("readinessProbe"),
        startup_probe=probes.get("startupProbe"),
    )

    init_containers: list[dict[str, Any]] = []
    if ca_config_map:
        init_containers.append(
            pod.container(
                CA_INIT_CONTAINER,
                image_of(spec.image),
                image_pull_policy=spec.image.pull_policy,
                command=["/bin/sh", "-c", CA_INIT_SCRIPT],
                security_context={"runAsUser": 0, "runAsNonRoot": False},
                volume_mounts=[
                    pod.volume_mount("model-store", MODEL_STORE, sub_path=sub_path),
                    pod.volume_mount("ca-cert-volume", "/ca-certs"),
                    pod.volume_mount("custom-ca", "/custom"),
                ],
            )
        )
    init_mounts = [pod.volume_mount("model-store", MODEL_STORE, sub_path=sub_path)]
    if scratch:
        init_mounts.append(pod.volume_mount("scratch", "/scratch"))
    if ca_config_map:
        init_mounts.append(pod.volume_mount("ca-cert-volume", "/etc/ssl"))
    init_containers.extend(_extra_container(inp, c, extras_env, init_mounts) for c in user_inits)
    containers = [main, *(_extra_container(inp, c, extras_env, mounts) for c in sidecars)]

    security_context: dict[str, Any] = {
        "runAsUser": DEFAULT_USER_ID if spec.user_id is None else spec.user_id,
        "runAsGroup": DEFAULT_GROUP_ID if spec.group_id is None else spec.group_id,
        "fsGroup": DEFAULT_GROUP_ID if spec.group_id is None else spec.group_id,
    }
    if inp.ctx.orchestrator == ORCHESTRATOR_TKGS:
        security_context["seccompProfile"] = {"type": "RuntimeDefault"}

    return pod.pod_spec(
        containers,
        init_containers=init_containers,
        volumes=volumes,
        service_account_name=inp.name,
        security_context=security_context,
        image_pull_secrets=spec.image.pull_secrets,
        node_selector=spec.node_selector,
        tolerations=spec.tolerations,
        affinity=spec.affinity,
        scheduler_name=spec.scheduler_name,
        priority_class_name=spec.priority_class_name,
        runtime_class_name=spec.runtime_class_name,
        resource_claims=pod_claims,
    )


def deployment(
    inp: NIMServiceInputs,
    model_volume: dict[str, Any],
    sub_path: str | None,
    pod_claims: list[dict[str, Any]],
    container_claims: list[dict[str, Any]],
) -> dict[str, Any]:
    spec = inp.spec
    pod_spec = nim_pod_spec(
        inp,
        container_name=f"{inp.name}-ctr",
        model_volume=model_volume,
        sub_path=sub_path,
        pod_claims=pod_claims,
        container_claims=container_claims,
        command=spec.command,
        args=spec.args,
    )
    pod_labels = merge_maps(selector_labels(inp.name), inp.pod_labels())
    if is_autoscaling_enabled(spec):
        replicas: int | None = spec.scale.hpa.min_replicas if spec.scale.hpa is not None else 1
    else:
        replicas = spec.replicas
    return deployment_builder.build(
        inp.meta(),
        selector=selector_labels(inp.name),
        template=pod.pod_template(pod_spec, labels=pod_labels, annotations=inp.pod_annotations()),
        replicas=replicas,
        strategy=deployment_builder.rolling_update(),
    )


def _extra_container(
    inp: NIMServiceInputs,
    c: NIMContainerSpec,
    main_env: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
) -> dict[str, Any]:
    """A user init or sidecar container: its own env wins over the NIM's."""
    return pod.container(
        c.name,
        image_of(c.image),
        image_pull_policy=inp.container_image_pull_policy(c.image),
        command=c.command,
        args=c.args,
        working_dir=c.working_dir,
        env=pod.merge_env_vars(main_env, c.env or []),
        volume_mounts=[dict(m) for m in mounts],
    )


def proxy_env(proxy: ProxySpec) -> list[dict[str, Any]]:
    """Proxy variables (both spellings) and native TLS for the NIM SDK."""
    values = (proxy.https_proxy or "", proxy.http_proxy or "", proxy.no_proxy or "")
    env = [pod.env_var("NIM_SDK_USE_NATIVE_TLS", "1")]
    for names in (
        ("HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY"),
        ("https_proxy", "http_proxy", "no_proxy"),
    ):
        env.extend(pod.env_var(name, value) for name, value in zip(names, values, strict=True))
    return env
