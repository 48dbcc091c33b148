"""nvidia.com/v1alpha1: the GPU Operator's NVIDIADriver as a typed model. States
and messages live in :mod:`api.nvidia.v1alpha1.nvidiadriver`."""

from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver, NVIDIADriverSpec, NVIDIADriverStatus

__all__ = ["NVIDIADriver", "NVIDIADriverSpec", "NVIDIADriverStatus"]
