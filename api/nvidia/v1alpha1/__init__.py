"""nvidia.com/v1alpha1: the GPU Operator's NVIDIADriver and GPUCluster as typed models.
States and messages live in :mod:`api.nvidia.v1alpha1.nvidiadriver` and
:mod:`api.nvidia.v1alpha1.gpucluster`."""

from api.nvidia.v1alpha1.gpucluster import GPUCluster, GPUClusterSpec, GPUClusterStatus
from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver, NVIDIADriverSpec, NVIDIADriverStatus

__all__ = [
    "GPUCluster",
    "GPUClusterSpec",
    "GPUClusterStatus",
    "NVIDIADriver",
    "NVIDIADriverSpec",
    "NVIDIADriverStatus",
]
