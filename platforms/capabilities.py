"""Which optional (CRD-provided) kinds a cluster serves, and the orchestrator names.

Discovery fills ``Capabilities`` once per lookup (``controllers.discovery``);
every kind's contract reads it to decide which kinds it may own
(``owned_kinds``) and renders leave out objects whose kind is absent.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

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

# What an OpenShift cluster serves and vanilla Kubernetes does not: discovered
# too (``controllers.gpu.openshift`` reads the first three from the GPU caches;
# the GPU operands get a SecurityContextConstraints each there). Not part of
# ``everything()``: the offline default is a Kubernetes cluster.
CLUSTER_VERSION: GVK = ("config.openshift.io/v1", "ClusterVersion")
CLUSTER_PROXY: GVK = ("config.openshift.io/v1", "Proxy")
IMAGE_STREAM: GVK = ("image.openshift.io/v1", "ImageStream")
SECURITY_CONTEXT_CONSTRAINTS: GVK = ("security.openshift.io/v1", "SecurityContextConstraints")

OPENSHIFT_GVKS: frozenset[GVK] = frozenset(
    {CLUSTER_VERSION, CLUSTER_PROXY, IMAGE_STREAM, SECURITY_CONTEXT_CONSTRAINTS}
)
DISCOVERED_GVKS: frozenset[GVK] = OPTIONAL_GVKS | OPENSHIFT_GVKS
"""Every kind discovery looks for."""

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
