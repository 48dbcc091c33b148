"""What a ClusterPolicy becomes: NVIDIA GPU Operator's 20 states as pure renders.

Public API: ``render(policy, facts) -> list[StateRender]`` (pure),
``STATE_NAMES``, ``StateRender``, ``state_enabled``, ``owned_kinds(facts)``,
``ClusterFacts`` / ``GPUNode`` (built from Node dicts by
``ClusterFacts.from_nodes``) and ``RenderError``.
"""

from platforms.gpu.errors import RenderError
from platforms.gpu.facts import ClusterFacts, GPUNode
from platforms.gpu.states import (
    ORPHAN,
    STATE_NAMES,
    StateRender,
    owned_kinds,
    render,
    state_enabled,
)

__all__ = [
    "ORPHAN",
    "STATE_NAMES",
    "ClusterFacts",
    "GPUNode",
    "RenderError",
    "StateRender",
    "owned_kinds",
    "render",
    "state_enabled",
]
