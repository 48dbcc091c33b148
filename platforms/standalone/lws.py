"""The multi-node NIM: ComputeDomain, MPI objects and the LeaderWorkerSet ``<name>-lws``.

A function of ``NIMServiceInputs`` (nim-operator.md §2.8); the MPI/Ray
details (hostfiles, start script, env, args) are ``platforms.standalone.multinode``.
"""

from __future__ import annotations

from typing import Any

from manifests import pod
from manifests.hashing import short_hash
from manifests.labels import merge_maps
from platforms.standalone import multinode, podspec
from platforms.standalone.context import COMPUTE_DOMAIN
from platforms.standalone.errors import RenderError
from platforms.standalone.inputs import NIMServiceInputs, given

__all__ = ["compute_domain_pod_claim", "compute_domain_template", "leader_worker_set"]

# What NVIDIA's LeaderWorkerSet template (manifests/lws.yaml) leaves out of the pods,
# unlike its Deployment: no service account, affinity or runtime class on either pod,
# no scheduler on the workers, and neither pull policy nor command on the NIM
# container. Rendering them would change the pod templates of every multi-node NIM
# NVIDIA's operator made, and a LeaderWorkerSet restarts its groups on any change.
_NOT_ON_LWS_PODS = ("serviceAccountName", "affinity", "runtimeClassName")
_NOT_ON_LWS_NIM_CONTAINER = ("imagePullPolicy", "command")


def _lws_pod_spec(spec: dict[str, Any], *, leader: bool) -> dict[str, Any]:
    """``spec`` (a NIM PodSpec) with only the fields NVIDIA's LeaderWorkerSet pods have."""
    dropped = _NOT_ON_LWS_PODS if leader else (*_NOT_ON_LWS_PODS, "schedulerName")
    out = {k: v for k, v in spec.items() if k not in dropped}
    nim, *sidecars = out["containers"]
    nim = {k: v for k, v in nim.items() if k not in _NOT_ON_LWS_NIM_CONTAINER}
    out["containers"] = [nim, *sidecars]
    return out


def compute_domain_template(inp: NIMServiceInputs) -> str | None:
    """The ResourceClaimTemplate of the ComputeDomain channel the pods claim (None: none)."""
    mn = inp.spec.multi_node
    cd = mn.compute_domain if mn is not None else None
    if cd is None or not given(cd):
        return None
    if cd.create:
        return multinode.compute_domain_template_name(inp.name)
    return inp.ctx.compute_domain_claim_template


def compute_domain_pod_claim(name: str, template: str, index: int) -> dict[str, Any]:
    """The pod claim of a ComputeDomain channel (after ``index`` DRA pod claims)."""
    claim = f"claim-{short_hash(name)}-2-{short_hash(template)}-{index}"
    return {"name": claim, "resourceClaimTemplateName": template}


def leader_worker_set(
    inp: NIMServiceInputs,
    model_volume: dict[str, Any],
    sub_path: str | None,
    pod_claims: list[dict[str, Any]],
    container_claims: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """[ComputeDomain], [MPI ConfigMaps and SSH key Secret], LeaderWorkerSet ``<name>-lws``."""
    mn = inp.spec.multi_node
    if mn is None:
        raise RenderError("spec.multiNode: Required value")
    objs: list[dict[str, Any]] = []
    pod_claims, container_claims = list(pod_claims), list(container_claims)
    cd = mn.compute_domain
    if cd is not None and given(cd):
        if cd.create:
            template = multinode.compute_domain_template_name(inp.name)
            if inp.ctx.capabilities.has(COMPUTE_DOMAIN):
                objs.append(
                    multinode.compute_domain(
                        inp.meta(), num_nodes=inp.pipeline, template_name=template
                    )
                )
        elif inp.ctx.compute_domain_claim_template:
            template = inp.ctx.compute_domain_claim_template
        else:
            raise RenderError(f"ComputeDomain {cd.name} not found", reason="ComputeDomainFailed")
        pod_claim = compute_domain_pod_claim(inp.name, template, len(pod_claims))
        pod_claims.append(pod_claim)
        container_claims.append({"name": pod_claim["name"]})

    ray = mn.ray if given(mn.ray) else None
    leader_volumes: list[dict[str, Any]] = []
    worker_volumes: list[dict[str, Any]] = []
    leader_mounts: list[dict[str, Any]] = []
    worker_mounts: list[dict[str, Any]] = []
    leader_ports: list[dict[str, Any]] = []
    worker_probes: dict[str, dict[str, Any]] = {}
    if ray is not None:
        ray_port = ray.ray_port
        leader_args, worker_args = multinode.ray_args(ray_port)
        leader_ports = [{"name": "ray", "containerPort": ray_port, "protocol": "TCP"}]
        worker_probes = {"startupProbe": dict(multinode.RAY_WORKER_STARTUP_PROBE)}
        timeout = 300
    else:
        timeout = mn.mpi.mpi_start_timeout if mn.mpi is not None else 300
        leader_args, worker_args = [], []
        leader_volumes, worker_volumes = multinode.mpi_volumes(inp.name)
        leader_mounts, worker_mounts = multinode.mpi_mounts()
        replicas = inp.spec.replicas or 0
        hosts = multinode.hostfiles(inp.name, inp.namespace, replicas, inp.pipeline, inp.tensor)
        # No parent-spec hash on these: a spec edit that leaves their content
        # alone must not rewrite them (NVIDIA creates them once).
        stable = inp.pod_annotations()
        objs.append(
            multinode.mpi_config_map(inp.meta(f"{inp.name}-mpi-config", annotations=stable), hosts)
        )
        objs.append(
            multinode.start_script_config_map(
                inp.meta(f"{inp.name}-mpi-start-script", annotations=stable)
            )
        )
        objs.append(
            multinode.ssh_secret(inp.meta(multinode.ssh_secret_name(inp.name), annotations=stable))
        )

    leader_spec = podspec.nim_pod_spec(
        inp,
        container_name="nim-leader",
        extra_env=multinode.leader_env(inp.pipeline, inp.tensor, timeout),
        extra_volumes=leader_volumes,
        extra_mounts=leader_mounts,
        extra_ports=leader_ports,
        args=leader_args or None,
        model_volume=model_volume,
        sub_path=sub_path,
        pod_claims=pod_claims,
        container_claims=container_claims,
        side_env=multinode.common_env(inp.pipeline, inp.tensor),
    )
    worker_spec = podspec.nim_pod_spec(
        inp,
        container_name="nim-worker",
        extra_env=multinode.worker_env(inp.pipeline, inp.tensor),
        extra_volumes=worker_volumes,
        extra_mounts=worker_mounts,
        extra_ports=leader_ports,
        args=worker_args or None,
        probes=worker_probes,
        model_volume=model_volume,
        sub_path=sub_path,
        pod_claims=pod_claims,
        container_claims=container_claims,
        side_env=multinode.common_env(inp.pipeline, inp.tensor),
    )
    leader_spec = _lws_pod_spec(leader_spec, leader=True)
    worker_spec = _lws_pod_spec(worker_spec, leader=False)
    annotations = inp.pod_annotations()
    objs.append(
        multinode.leader_worker_set(
            inp.meta(multinode.lws_name(inp.name)),
            replicas=inp.spec.replicas,
            size=inp.pipeline,
            leader_template=pod.pod_template(
                leader_spec,
                labels=merge_maps(inp.selector, inp.pod_labels()),
                annotations=annotations,
            ),
            worker_template=pod.pod_template(worker_spec, annotations=annotations),
        )
    )
    return objs
