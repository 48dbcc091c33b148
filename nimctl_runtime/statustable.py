"""A live status table: one row per object, redrawn in place on a terminal.

Used by ``nimctl local --demo`` to show NIMCache/NIMService progress (state,
conditions, replicas). Pure formatting plus a tiny redraw helper; it knows
Kubernetes objects only as dicts and imports nothing above the runtime.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

HEADERS = ("KIND", "NAME", "STATE", "CONDITIONS", "REPLICAS")


@dataclass(frozen=True)
class Row:
    kind: str
    name: str
    state: str
    conditions: str
    replicas: str

    def cells(self) -> tuple[str, str, str, str, str]:
        return (self.kind, self.name, self.state, self.conditions, self.replicas)


def condition_summary(obj: Mapping[str, Any]) -> str:
    """``Type=Status`` for each True condition (or each one when none is True)."""
    conds = (obj.get("status") or {}).get("conditions") or []
    true = [c for c in conds if c.get("status") == "True"]
    shown = true or conds
    return ",".join(f"{c.get('type')}={c.get('status')}" for c in shown) or "-"


def replicas_of(workload: Mapping[str, Any] | None) -> str:
    """``ready/desired`` of a Deployment (``-`` when there is none yet)."""
    if not workload:
        return "-"
    desired = (workload.get("spec") or {}).get("replicas")
    ready = (workload.get("status") or {}).get("readyReplicas") or 0
    return f"{ready}/{desired if desired is not None else '?'}"


def row_for(obj: Mapping[str, Any], workload: Mapping[str, Any] | None = None) -> Row:
    meta = obj.get("metadata") or {}
    state = str((obj.get("status") or {}).get("state") or "<none>")
    return Row(
        kind=str(obj.get("kind", "")),
        name=str(meta.get("name", "")),
        state=state,
        conditions=condition_summary(obj),
        replicas=replicas_of(workload)
        if workload is not None or obj.get("kind") != "NIMCache"
        else "-",
    )


def render_table(rows: Sequence[Row]) -> str:
    """A kubectl-style table with aligned columns."""
    table = [HEADERS, *(r.cells() for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(HEADERS))]
    lines = [
        "   ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in table
    ]
    return "\n".join(lines) + "\n"


class LiveTable:
    """Redraws a table in place on a TTY; elsewhere prints one line per changed row.

    Output that is not a terminal (a pipe, a CI log, ``| tee``) cannot be redrawn,
    and reprinting the whole table on every change buries the news. There the
    header is printed once and then each row whose cells changed, as one aligned
    line (``kubectl get -w`` style).
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._last = ""
        self._lines = 0
        self._rows: dict[tuple[str, str], Row] = {}
        self._widths = [len(h) for h in HEADERS]
        self._footer: tuple[str, ...] = ()

    def update(self, rows: Sequence[Row], footer: Sequence[str] = ()) -> bool:
        """Show ``rows`` and, below them, ``footer`` lines; returns True when the text changed.

        Off a terminal a footer is printed when it changes (and not again while it stays).
        """
        text = render_table(rows) + "".join(f"{line}\n" for line in footer)
        if text == self._last:
            return False
        if self.out.isatty():
            if self._lines:
                self.out.write(f"\x1b[{self._lines}F\x1b[J")
            self.out.write(text)
        else:
            self._write_changes(rows)
            if tuple(footer) != self._footer:
                self.out.writelines(f"{line}\n" for line in footer)
                self._footer = tuple(footer)
        self.out.flush()
        self._last = text
        self._lines = text.count("\n")
        return True

    def _write_changes(self, rows: Sequence[Row]) -> None:
        # Columns only ever widen, so later lines stay aligned with earlier ones.
        for line in (HEADERS, *(r.cells() for r in rows)):
            self._widths = [max(w, len(c)) for w, c in zip(self._widths, line, strict=True)]
        if not self._rows:
            self.out.write(self._line(HEADERS))
        for row in rows:
            if self._rows.get((row.kind, row.name)) != row:
                self.out.write(self._line(row.cells()))
                self._rows[(row.kind, row.name)] = row

    def _line(self, cells: Sequence[str]) -> str:
        padded = (c.ljust(w) for c, w in zip(cells, self._widths, strict=True))
        return "   ".join(padded).rstrip() + "\n"
