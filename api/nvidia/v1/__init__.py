"""nvidia.com/v1: the GPU Operator's ClusterPolicy as a typed model. Condition
types, states and reasons live in :mod:`api.nvidia.v1.clusterpolicy`."""

from api.nvidia.v1.clusterpolicy import ClusterPolicy, ClusterPolicySpec, ClusterPolicyStatus

__all__ = ["ClusterPolicy", "ClusterPolicySpec", "ClusterPolicyStatus"]
