"""Render a NIMService on the standalone platform: the objects it should own.

``render(nimservice, ctx)`` is pure: it reads the CR and the ``RenderContext``
and returns the desired objects in the order they should be applied
(ServiceAccount, Role, RoleBinding, Service, Ingress, HTTPRoute, GRPCRoute,
HPA, ServiceMonitor, EPP objects, PVC, ResourceClaimTemplates, Deployment or
LeaderWorkerSet). An object that an option turns off is absent from the list;
the reconciler prunes it. Every object carries the standard labels, a
controller ownerReference to the NIMService and ``nvidia.com/last-applied-hash``;
objects that carry annotations also carry ``nvidia.com/parent-spec-hash``.

The work is split along the render's seams, each a set of functions of the
explicit ``NIMServiceInputs``: ``networking`` (RBAC, Service, Ingress, routes,
HPA, ServiceMonitor, EPP), ``storage`` (model store, NIMCache resolution),
``podspec`` (env, probes, resources, GPUs, DRA, PodSpec, Deployment) and
``lws`` (multi-node). The rules follow nim-operator.md §2.3-§2.9 and §11;
where NVIDIA's operator has a known flaw the builders do better, and say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.apps.v1alpha1.nimservice import NIMService
from manifests.hashing import stamped_copy
from platforms.standalone import lws, networking, podspec, storage
from platforms.standalone.context import LEADER_WORKER_SET, RenderContext
from platforms.standalone.errors import UnsupportedSpec
from platforms.standalone.inputs import API_VERSION, KIND, NIMServiceInputs, as_nimservice
from platforms.standalone.inputs import spec_hash as _spec_hash

__all__ = ["API_VERSION", "KIND", "render", "render_before_storage", "spec_hash"]


def render(
    nimservice: NIMService | Mapping[str, Any], ctx: RenderContext | None = None
) -> list[dict[str, Any]]:
    """The objects ``nimservice`` should own on the standalone platform.

    Takes the typed NIMService (a dict is parsed first). Raises ``RenderError``
    (with the status reason) when it cannot be rendered yet: its NIMCache is
    missing, failed or not ready, or storage is invalid.
    """
    inp = NIMServiceInputs.of(as_nimservice(nimservice), ctx or RenderContext())
    platform = inp.spec.inference_platform
    if platform != "standalone":
        raise UnsupportedSpec(
            f"spec.inferencePlatform: {platform!r} is rendered by the {platform} platform, "
            "not standalone"
        )
    if inp.multinode and not inp.ctx.capabilities.has(LEADER_WORKER_SET):
        raise UnsupportedSpec(
            "spec.multiNode: the LeaderWorkerSet API (leaderworkerset.x-k8s.io/v1) is not "
            "installed in this cluster"
        )
    objs = _networking(inp)
    volume, sub_path, created_pvc = storage.model_store(inp)
    if created_pvc is not None:
        objs.append(created_pvc)
    templates, pod_claims, container_claims = podspec.dra(inp)
    objs.extend(templates)
    if inp.multinode:
        objs.extend(lws.leader_worker_set(inp, volume, sub_path, pod_claims, container_claims))
    else:
        objs.append(podspec.deployment(inp, volume, sub_path, pod_claims, container_claims))
    # Independent copies: no dict is shared between objects (or with the input).
    # (A JSON round trip, unlike deepcopy, also unshares within one object.)
    # Under an HPA the Deployment carries the replicas it starts with; the
    # live count is kept by controllers.plan's one HPA rule.
    return [stamped_copy(obj) for obj in objs]


def _networking(inp: NIMServiceInputs) -> list[dict[str, Any]]:
    """What does not need the model store: RBAC, Service, Ingress, routes, HPA, monitor, EPP."""
    objs: list[dict[str, Any]] = [
        networking.service_account(inp),
        networking.role(inp),
        networking.role_binding(inp),
        networking.service(inp),
    ]
    for maybe in (
        networking.ingress(inp),
        networking.http_route(inp),
        networking.grpc_route(inp),
        networking.hpa(inp),
        networking.service_monitor(inp),
    ):
        if maybe is not None:
            objs.append(maybe)
    objs.extend(networking.epp(inp))
    return objs


def render_before_storage(
    nimservice: NIMService | Mapping[str, Any], ctx: RenderContext | None = None
) -> list[dict[str, Any]]:
    """The objects NVIDIA's operator creates before it resolves the model store.

    ServiceAccount, Role, RoleBinding, Service, Ingress, routes, HPA,
    ServiceMonitor and the EPP objects: made while the NIMCache is still
    getting ready, identical to (same hashes as) the full render's.
    """
    inp = NIMServiceInputs.of(
        as_nimservice(nimservice), ctx or RenderContext(), resolve_cache=False
    )
    return [stamped_copy(obj) for obj in _networking(inp)]


def spec_hash(nimservice: NIMService | Mapping[str, Any]) -> str:
    """The ``nvidia.com/parent-spec-hash`` value of a NIMService."""
    return _spec_hash(as_nimservice(nimservice).spec)
