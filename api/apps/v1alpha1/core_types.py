"""The Kubernetes core types the apps.nvidia.com/v1alpha1 kinds embed, at the
Kubernetes version NVIDIA's NIM Operator CRDs are generated from (its go.mod's
``k8s.io/api`` v0.34): fields such as ``env[].valueFrom.fileKeyRef`` and
``scale.hpa.behavior.*.tolerance`` exist here because they exist there. Python
validation and the generated CRDs use the same version.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

from api.k8s import core_type

__all__ = [
    "KUBERNETES_VERSION",
    "Affinity",
    "Condition",
    "ConfigMapKeySelector",
    "ContainerPort",
    "EnvVar",
    "HorizontalPodAutoscalerBehavior",
    "IngressSpec",
    "MetricSpec",
    "PodAffinity",
    "PodSecurityContext",
    "Probe",
    "ResourceRequirements",
    "Toleration",
]

KUBERNETES_VERSION: Final = "v1.34.0"
_V: Final = KUBERNETES_VERSION

Affinity = Annotated[dict[str, Any], core_type("Affinity", _V)]
Condition = Annotated[dict[str, Any], core_type("Condition", _V)]
ConfigMapKeySelector = Annotated[dict[str, Any], core_type("ConfigMapKeySelector", _V)]
ContainerPort = Annotated[dict[str, Any], core_type("ContainerPort", _V)]
EnvVar = Annotated[dict[str, Any], core_type("EnvVar", _V)]
HorizontalPodAutoscalerBehavior = Annotated[
    dict[str, Any], core_type("HorizontalPodAutoscalerBehavior", _V)
]
IngressSpec = Annotated[dict[str, Any], core_type("IngressSpec", _V)]
MetricSpec = Annotated[dict[str, Any], core_type("MetricSpec", _V)]
PodAffinity = Annotated[dict[str, Any], core_type("PodAffinity", _V)]
PodSecurityContext = Annotated[dict[str, Any], core_type("PodSecurityContext", _V)]
Probe = Annotated[dict[str, Any], core_type("Probe", _V)]
ResourceRequirements = Annotated[dict[str, Any], core_type("ResourceRequirements", _V)]
Toleration = Annotated[dict[str, Any], core_type("Toleration", _V)]
