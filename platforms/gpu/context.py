"""What every state builder receives: the typed ClusterPolicy, the cluster facts,
and the operand images resolved once (so a bad image is one clear error).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from platforms.gpu.facts import ClusterFacts

if TYPE_CHECKING:
    from api.nvidia.v1.clusterpolicy import ClusterPolicy, ClusterPolicySpec


@dataclass(frozen=True)
class StateContext:
    """Input of one state's builder."""

    policy: ClusterPolicy
    facts: ClusterFacts

    @property
    def spec(self) -> ClusterPolicySpec:
        """The ClusterPolicy's spec."""
        return self.policy.spec

    @property
    def namespace(self) -> str:
        """The operator namespace, where every namespaced operand object lives."""
        return self.facts.operator_namespace

    @property
    def runtime_class(self) -> str:
        """``operator.runtimeClass`` (``nvidia`` when empty)."""
        return self.spec.operator.runtime_class or "nvidia"

    @property
    def openshift(self) -> bool:
        """Whether the cluster is OpenShift."""
        return self.facts.openshift is not None
