"""NVIDIA GPU Operator API groups: ``nvidia.com/v1`` (ClusterPolicy) and
``nvidia.com/v1alpha1`` (NVIDIADriver), as typed models."""
