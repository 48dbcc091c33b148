"""The GPU controllers' process configuration, read from the operator pod's environment.

As NVIDIA's ``cmd/gpu-operator`` (gpu-operator.md §7): ``OPERATOR_NAMESPACE`` is
required (every operand object lives there; without it the GPU controllers
refuse to start, with a message that says what to set), and the image
fallbacks ``DRIVER_IMAGE``, ``VALIDATOR_IMAGE``, ... are read from the
environment over nimctl's defaults (NVIDIA's chart values).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from platforms.gpu.images import DEFAULT_OPERATOR_ENV

OPERATOR_NAMESPACE_ENV = "OPERATOR_NAMESPACE"
EXTRA_IMAGE_ENV = ("VGPU_MANAGER_IMAGE", "KATA_MANAGER_IMAGE", "CUDA_BASE_IMAGE")

__all__ = ["OPERATOR_NAMESPACE_ENV", "GPUConfig", "MissingOperatorNamespace"]


class MissingOperatorNamespace(RuntimeError):
    """``OPERATOR_NAMESPACE`` is not set: the GPU controllers cannot know where operands go."""

    def __init__(self) -> None:
        super().__init__(
            f"{OPERATOR_NAMESPACE_ENV} is not set: the ClusterPolicy controllers create every "
            "operand (DaemonSets, ConfigMaps, RBAC) in the operator's namespace; set "
            f"{OPERATOR_NAMESPACE_ENV}=<namespace> (the Helm chart sets it from the pod's "
            "namespace), or run without the gpu controllers"
        )


@dataclass(frozen=True)
class GPUConfig:
    """Where operands live and which images stand in for unset ones."""

    operator_namespace: str
    operator_env: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> GPUConfig:
        """Read the environment; ``MissingOperatorNamespace`` when the namespace is unset."""
        env = os.environ if environ is None else environ
        namespace = (env.get(OPERATOR_NAMESPACE_ENV) or "").strip()
        if not namespace:
            raise MissingOperatorNamespace()
        images = dict(DEFAULT_OPERATOR_ENV)
        for key in (*DEFAULT_OPERATOR_ENV, *EXTRA_IMAGE_ENV):
            value = env.get(key)
            if value:
                images[key] = value
        return cls(operator_namespace=namespace, operator_env=MappingProxyType(images))
