"""What counts as a good answer to a mutant, and the tally the suite and the bench print.

Good: a clear 4xx naming the field (``spec.replicas``, ``nimservice.spec.image.tag``,
``metadata.name``), or a whole-request 4xx (413 too large, 400 not decodable), or
an object that gets a clear status: Ready, Failed with a message, or a waiting
state (Pending/NotReady/...) whose condition says why. Bad ("other", must be 0):
a 5xx, a hang, a traceback or crash text in an answer, a 4xx that names no field,
or an accepted object that never gets a status.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_FIELD_PATH = re.compile(
    r"(?:^|[\s\[(\"'])(?:[a-z]+\.)?(?:spec|metadata|status|apiVersion|kind)(?:[.\[][^\s:,]*)?"
    r"(?:\s*:|\s+in body|\s*\)|\s*,|$)"
)
_CRASH = re.compile(r"Traceback|TypeError|AttributeError|KeyError|RecursionError|NoneType")

CATEGORIES = (
    "rejected with a field path",
    "rejected as a whole request (413/400)",
    "accepted and Ready",
    "accepted and Failed with a message",
    "accepted, waiting with a message",
    "accepted (webhook only: no object is created)",
    "other",
)


def has_field_path(message: str, causes: list[Any] | None = None) -> bool:
    """True when the error names a field (a cause with ``field``, or a path in the text)."""
    if any(isinstance(c, dict) and c.get("field") for c in causes or []):
        return True
    return bool(_FIELD_PATH.search(message))


def crash_text(message: str) -> bool:
    """Answers must never leak a Python crash (exception names, tracebacks)."""
    return bool(_CRASH.search(message))


@dataclass
class Tally:
    """Counts per category, and the first few bad outcomes with their mutants."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    others: list[str] = field(default_factory=list)

    def add(self, category: str, detail: str = "") -> None:
        self.counts[category] += 1
        if category == "other" and len(self.others) < 50:
            self.others.append(detail)

    @property
    def tried(self) -> int:
        return sum(self.counts.values())

    def merge(self, other: Tally) -> None:
        for key, value in other.counts.items():
            self.counts[key] = self.counts.get(key, 0) + value
        self.others.extend(other.others[: 50 - len(self.others)])

    def report(self, title: str) -> str:
        lines = [f"{title}: tried {self.tried}"]
        lines += [f"  {name}: {count}" for name, count in self.counts.items() if count]
        if not self.counts["other"]:
            lines.append("  other: 0")
        lines += [f"  ! {detail}" for detail in self.others[:20]]
        return "\n".join(lines)


def classify_status(obj: dict[str, Any]) -> str | None:
    """The category of an accepted object from its status; None while it has none yet."""
    status = obj.get("status") or {}
    state = str(status.get("state") or "")
    conditions = [c for c in status.get("conditions") or [] if isinstance(c, dict)]
    messages = [str(c.get("message") or "") for c in conditions]
    messages.append(str(status.get("message") or ""))
    if state.lower() == "ready":
        return "accepted and Ready"
    if not state:
        return None
    if not any(m.strip() for m in messages):
        return None  # a state without a word of why: keep waiting, "other" at the deadline
    if state.lower() == "failed":
        return "accepted and Failed with a message"
    return "accepted, waiting with a message"
