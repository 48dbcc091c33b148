"""The Kubernetes core types the nvidia.com kinds (ClusterPolicy, NVIDIADriver)
embed, at the Kubernetes version NVIDIA's GPU Operator CRDs are generated from
(its go.mod's ``k8s.io/api`` v0.36). Python validation and the generated CRDs use
the same version.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from api.k8s import core_type

__all__ = ["KUBERNETES_VERSION", "Condition", "NodeAffinity", "PodSecurityContext", "Toleration"]

KUBERNETES_VERSION: Final = "v1.36.0"
_V: Final = KUBERNETES_VERSION

Condition = Annotated[dict[str, Any], core_type("Condition", _V)]
NodeAffinity = Annotated[dict[str, Any], core_type("NodeAffinity", _V)]
PodSecurityContext = Annotated[dict[str, Any], core_type("PodSecurityContext", _V)]
Toleration = Annotated[dict[str, Any], core_type("Toleration", _V)]
