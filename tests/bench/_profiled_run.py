"""``python -m nimctl`` with a cProfile window switched by signals (for the scale benchmarks).

SIGUSR1 starts profiling the main thread (where the operator's event loop runs),
SIGUSR2 stops it and writes the statistics to ``$NIMCTL_BENCH_PROFILE_OUT``.
Everything else is ``nimctl.cli.main`` unchanged.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
from types import FrameType

from nimctl.cli import main

_profiler = cProfile.Profile()


def _start(signum: int, frame: FrameType | None) -> None:
    _profiler.enable()


def _stop(signum: int, frame: FrameType | None) -> None:
    _profiler.disable()
    _profiler.dump_stats(os.environ["NIMCTL_BENCH_PROFILE_OUT"])


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    sys.exit(main(sys.argv[1:]))
