"""metav1.Condition helpers with apimachinery's ``meta.SetStatusCondition`` semantics.

``lastTransitionTime`` moves only when a condition's ``status`` changes, so
setting the same condition twice yields an equal list: the controllers rely
on that to write status only when something a user can see changed.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any


def now_rfc3339() -> str:
    """The current time as Kubernetes writes it (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def find_condition(
    conditions: Sequence[Mapping[str, Any]] | None, type_: str
) -> dict[str, Any] | None:
    """The condition of that type, or None."""
    for c in conditions or ():
        if c.get("type") == type_:
            return dict(c)
    return None


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    type_: str,
    status: str,
    reason: str,
    message: str = "",
    *,
    now: str | None = None,
    observed_generation: int | None = None,
) -> list[dict[str, Any]]:
    """A new list with the condition set; other conditions are kept in order."""
    out = [copy.deepcopy(dict(c)) for c in conditions or ()]
    for c in out:
        if c.get("type") == type_:
            if c.get("status") != status:
                c["status"] = status
                c["lastTransitionTime"] = now or now_rfc3339()
            c["reason"] = reason
            c["message"] = message
            if observed_generation is not None:
                c["observedGeneration"] = observed_generation
            return out
    new: dict[str, Any] = {
        "type": type_,
        "status": status,
        "lastTransitionTime": now or now_rfc3339(),
        "reason": reason,
        "message": message,
    }
    if observed_generation is not None:
        new["observedGeneration"] = observed_generation
    out.append(new)
    return out


def is_true(conditions: Sequence[Mapping[str, Any]] | None, type_: str) -> bool:
    c = find_condition(conditions, type_)
    return c is not None and c.get("status") == "True"
