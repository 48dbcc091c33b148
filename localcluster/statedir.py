"""One running ``nimctl local``/``nimctl localcluster`` per state directory.

Both commands keep their kubeconfig (and ``nimctl local`` its webhook
certificates) in a state directory, ``.nimctl/`` by default. A second process on
the same directory used to overwrite the first one's kubeconfig and
certificates and break it (webhook TLS failures, stuck deletes). :func:`claim`
takes an exclusive ``flock`` on ``<dir>/.lock`` for the life of the process
(the kernel drops it when the process ends, however it ends) and refuses with a
message that says which process holds the directory and what to do instead.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO

LOCK_NAME = ".lock"


class StateDirBusy(RuntimeError):
    """Another process is using the state directory."""


def claim(state_dir: Path, command: str) -> IO[str]:
    """Lock *state_dir* for this process; keep the returned file open while running.

    Raises :class:`StateDirBusy` naming the holder's pid when another process has it.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    handle = (state_dir / LOCK_NAME).open("a+")
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = handle.read().strip() or "another process"
        handle.close()
        raise StateDirBusy(
            f"{command}: {state_dir} is in use by {holder}; stop it first, or run this one "
            "from another directory or with --kubeconfig pointing into another directory"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{command} (pid {os.getpid()})\n")
    handle.flush()
    return handle
