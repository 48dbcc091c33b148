"""List the benchmarks, or run one: ``python -m tests.bench [NAME ...]``.

Benchmarks print figures and ratios; they never fail on a time. Each is a
module ``tests/bench/<name>.py`` runnable on its own with
``python -m tests.bench.<name>``.
"""

from __future__ import annotations

import pkgutil
import runpy
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    here = Path(__file__).parent
    names = sorted(m.name for m in pkgutil.iter_modules([str(here)]) if not m.name.startswith("_"))
    if not argv:
        print("benchmarks (run with: python -m tests.bench NAME, or 'all'):")
        for name in names:
            print(f"  {name}")
        return 0
    chosen = names if argv == ["all"] else argv
    for name in chosen:
        if name not in names:
            print(f"unknown benchmark {name!r}; known: {', '.join(names)}", file=sys.stderr)
            return 2
        print(f"== {name}", flush=True)
        runpy.run_module(f"tests.bench.{name}", run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
