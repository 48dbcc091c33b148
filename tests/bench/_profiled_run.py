"""``python -m nimctl`` with a profiling window switched by signals (for the scale benchmarks).

SIGUSR1 starts profiling the main thread (where the operator's event loop runs),
SIGUSR2 stops it and writes the result to ``$NIMCTL_BENCH_PROFILE_OUT``.
Everything else is ``nimctl.cli.main`` unchanged.

Two profilers, chosen by ``$NIMCTL_BENCH_PROFILER``:

* ``cprofile`` (the default): cProfile's exact call counts. It charges every
  Python call, so deep recursive Python code (a CEL tree walk) looks many times
  costlier than it is next to C code (JSON, pickle);
* ``sample``: a thread samples the main thread's stack every millisecond; each
  function's share of the samples (on the stack, and on top) is its share of
  the time, without that distortion. Written as JSON for ``print_profile``.
"""

from __future__ import annotations

import cProfile
import json
import os
import signal
import sys
import threading
import time
from collections import Counter
from types import FrameType

from nimctl.cli import main

_profiler = cProfile.Profile()
_MAIN = threading.main_thread().ident


class _Sampler:
    def __init__(self, interval: float = 0.001) -> None:
        self.interval = interval
        self.samples = 0
        self.on_stack: Counter[str] = Counter()
        self.on_top: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            frame = sys._current_frames().get(_MAIN)
            if frame is None:
                continue
            self.samples += 1
            seen: set[str] = set()
            top = True
            while frame is not None:
                code = frame.f_code
                name = f"{code.co_filename}:{code.co_firstlineno}({code.co_name})"
                if top:
                    self.on_top[f"{name} line {frame.f_lineno}"] += 1
                    top = False
                if name not in seen:
                    seen.add(name)
                    self.on_stack[name] += 1
                frame = frame.f_back

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self, path: str) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        with open(path, "w") as f:
            json.dump(
                {
                    "sampler": True,
                    "samples": self.samples,
                    "interval": self.interval,
                    "at": time.time(),
                    "on_stack": self.on_stack.most_common(60),
                    "on_top": self.on_top.most_common(60),
                },
                f,
            )


_sampler = _Sampler()
_use_sampler = os.environ.get("NIMCTL_BENCH_PROFILER", "cprofile") == "sample"


def _start(signum: int, frame: FrameType | None) -> None:
    if _use_sampler:
        _sampler.start()
    else:
        _profiler.enable()


def _stop(signum: int, frame: FrameType | None) -> None:
    out = os.environ["NIMCTL_BENCH_PROFILE_OUT"]
    if _use_sampler:
        _sampler.stop(out)
    else:
        _profiler.disable()
        _profiler.dump_stats(out)


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _start)
    signal.signal(signal.SIGUSR2, _stop)
    sys.exit(main(sys.argv[1:]))
