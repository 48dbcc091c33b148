"""What rendering needs from the cluster, looked up beforehand and passed in.

``render`` does no I/O. The reconciler (or ``nimctl render`` offline) fills a
``RenderContext`` with the NIMCache the service points at, which optional APIs
the cluster serves, the orchestrator and the operator's identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from api.apps.v1alpha1.nimcache import NIMCache
from platforms.capabilities import (
    COMPUTE_DOMAIN,
    GRPC_ROUTE,
    GVK,
    HTTP_ROUTE,
    INFERENCE_POOL,
    INFERENCE_SERVICE,
    LEADER_WORKER_SET,
    OPTIONAL_GVKS,
    ORCHESTRATOR_KUBERNETES,
    ORCHESTRATOR_OPENSHIFT,
    ORCHESTRATOR_TKGS,
    RESOURCE_CLAIM_TEMPLATE,
    SERVICE_MONITOR,
    Capabilities,
)
from platforms.contract import Readiness
from platforms.parsing import parse

__all__ = [
    "COMPUTE_DOMAIN",
    "GRPC_ROUTE",
    "GVK",
    "HTTP_ROUTE",
    "INFERENCE_POOL",
    "INFERENCE_SERVICE",
    "LEADER_WORKER_SET",
    "OPTIONAL_GVKS",
    "ORCHESTRATOR_KUBERNETES",
    "ORCHESTRATOR_OPENSHIFT",
    "ORCHESTRATOR_TKGS",
    "RESOURCE_CLAIM_TEMPLATE",
    "SERVICE_MONITOR",
    "Capabilities",
    "RenderContext",
]


@dataclass(frozen=True)
class RenderContext:
    """Inputs to ``render`` other than the CR itself.

    - ``nimcache``: the NIMCache named by ``spec.storage.nimCache.name``, typed
      and including its status (a dict given here is parsed once, at
      construction), or None when it does not exist or the service does not
      use one.
    - ``capabilities``: optional kinds the cluster serves.
    - ``orchestrator``: as detected from node labels (``TKGS`` adds a
      RuntimeDefault seccomp profile).
    - ``operator_version``: value of ``app.kubernetes.io/operator-version``.
    - ``native_image``: the NIM image declares the native download protocol
      (only consulted when there is no NIMCache).
    - ``compute_domain_claim_template``: for ``multiNode.computeDomain.name``
      (an existing ComputeDomain), its ``spec.channel.resourceClaimTemplate.name``.
    - ``pods``, ``events``, ``nodes``: the NIM's pods, the Warning Events about
      them and (when a pod waits for a GPU) the nodes, from the cache; readiness
      names what blocks the service (``platforms.blockers``). Not render inputs.
    - ``kserve_status_mode`` / ``kserve_default_mode``: on KServe, the existing
      InferenceService's ``status.deploymentMode`` and KServe's configured
      ``deploy.defaultDeploymentMode`` (None when unknown).
    - ``resource_claims``: the ResourceClaims of the service's namespace (for
      ``status.draResourceStatuses``; render does not read them).
    - ``compute_domain``: the ComputeDomain the service uses, created or
      referenced (for ``status.computeDomainStatus``).
    - ``nimcache_blocked``: why the named NIMCache cannot be used yet (missing,
      failed, not ready); the render then makes only what does not need it.
    """

    nimcache: NIMCache | None = None
    capabilities: Capabilities = field(default_factory=Capabilities.everything)
    orchestrator: str = ORCHESTRATOR_KUBERNETES
    operator_namespace: str = ""
    operator_version: str = ""
    native_image: bool = False
    compute_domain_claim_template: str | None = None
    kserve_status_mode: str | None = None
    kserve_default_mode: str | None = None
    resource_claims: tuple[Mapping[str, Any], ...] = ()
    compute_domain: Mapping[str, Any] | None = None
    nimcache_blocked: Readiness | None = None
    pods: tuple[Mapping[str, Any], ...] = ()
    events: tuple[Mapping[str, Any], ...] = ()
    nodes: tuple[Mapping[str, Any], ...] | None = None

    def __post_init__(self) -> None:
        if self.nimcache is not None and not isinstance(self.nimcache, NIMCache):
            object.__setattr__(self, "nimcache", parse(NIMCache, self.nimcache))
