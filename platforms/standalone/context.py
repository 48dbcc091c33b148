"""What rendering needs from the cluster, looked up beforehand and passed in.

``render`` does no I/O. The reconciler (or ``nimctl render`` offline) fills a
``RenderContext`` with the NIMCache the service points at, which optional APIs
the cluster serves, the orchestrator and the operator's identity.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from platforms.objects import CRInput, as_dict

GVK = tuple[str, str]

HTTP_ROUTE: GVK = ("gateway.networking.k8s.io/v1", "HTTPRoute")
GRPC_ROUTE: GVK = ("gateway.networking.k8s.io/v1", "GRPCRoute")
SERVICE_MONITOR: GVK = ("monitoring.coreos.com/v1", "ServiceMonitor")
LEADER_WORKER_SET: GVK = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
INFERENCE_POOL: GVK = ("inference.networking.k8s.io/v1", "InferencePool")
RESOURCE_CLAIM_TEMPLATE: GVK = ("resource.k8s.io/v1", "ResourceClaimTemplate")
INFERENCE_SERVICE: GVK = ("serving.kserve.io/v1beta1", "InferenceService")
COMPUTE_DOMAIN: GVK = ("resource.nvidia.com/v1beta1", "ComputeDomain")

OPTIONAL_GVKS: frozenset[GVK] = frozenset(
    {
        HTTP_ROUTE,
        GRPC_ROUTE,
        SERVICE_MONITOR,
        LEADER_WORKER_SET,
        INFERENCE_POOL,
        RESOURCE_CLAIM_TEMPLATE,
        INFERENCE_SERVICE,
        COMPUTE_DOMAIN,
    }
)

ORCHESTRATOR_KUBERNETES = "Kubernetes"
ORCHESTRATOR_OPENSHIFT = "OpenShift"
ORCHESTRATOR_TKGS = "TKGS"


@dataclass(frozen=True)
class Capabilities:
    """Which optional (CRD-provided) kinds the cluster serves.

    Built-in kinds are always assumed. An object whose kind is absent is left
    out of the render rather than failing the reconcile.
    """

    gvks: frozenset[GVK] = OPTIONAL_GVKS

    @classmethod
    def everything(cls) -> Capabilities:
        """All optional kinds present (the offline default)."""
        return cls(OPTIONAL_GVKS)

    @classmethod
    def nothing(cls) -> Capabilities:
        """Only built-in kinds."""
        return cls(frozenset())

    @classmethod
    def from_gvks(cls, gvks: Iterable[GVK]) -> Capabilities:
        return cls(frozenset(gvks))

    def has(self, gvk: GVK) -> bool:
        return gvk in self.gvks


@dataclass(frozen=True)
class RenderContext:
    """Inputs to ``render`` other than the CR itself.

    - ``nimcache``: the NIMCache named by ``spec.storage.nimCache.name`` (model
      or dict, including its status), or None when it does not exist or the
      service does not use one.
    - ``capabilities``: optional kinds the cluster serves.
    - ``orchestrator``: as detected from node labels (``TKGS`` adds a
      RuntimeDefault seccomp profile).
    - ``operator_version``: value of ``app.kubernetes.io/operator-version``.
    - ``native_image``: the NIM image declares the native download protocol
      (only consulted when there is no NIMCache).
    - ``compute_domain_claim_template``: for ``multiNode.computeDomain.name``
      (an existing ComputeDomain), its ``spec.channel.resourceClaimTemplate.name``.
    - ``current_replicas``: the live Deployment's replicas; used when an HPA
      owns the scale so rendering never fights it. It does not enter the
      desired-object hash.
    """

    nimcache: CRInput | None = None
    capabilities: Capabilities = field(default_factory=Capabilities.everything)
    orchestrator: str = ORCHESTRATOR_KUBERNETES
    operator_namespace: str = ""
    operator_version: str = ""
    native_image: bool = False
    current_replicas: int | None = None
    compute_domain_claim_template: str | None = None

    def nimcache_dict(self) -> dict[str, Any] | None:
        return None if self.nimcache is None else as_dict(self.nimcache)
