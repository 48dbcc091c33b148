"""Why a ClusterPolicy cannot be rendered: a spec or cluster problem the user must fix.

The reconciler reports it as ``Error=True`` with reason ``ReconcileFailed`` and
the message, as NVIDIA does for its ``init``/transform errors.
"""

from __future__ import annotations


class RenderError(ValueError):
    """The ClusterPolicy cannot be rendered; ``state`` names the state that failed."""

    reason = "ReconcileFailed"

    def __init__(self, message: str, *, state: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.state = state

    def __str__(self) -> str:
        return f"{self.state}: {self.message}" if self.state else self.message
