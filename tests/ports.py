"""Free TCP ports for servers a test starts (operator webhooks, probes, metrics).

Each port is found by binding port 0 and closing the socket. Asked one after
another, the kernel may hand out the same port twice (once closed it is free
again), and two servers of one operator then collide (`address already in use`).
``free_ports`` holds every socket open until it has them all, so the ports it
returns are distinct.
"""

from __future__ import annotations

import socket
from contextlib import ExitStack


def free_ports(count: int) -> list[int]:
    """``count`` distinct ports free on 127.0.0.1 at the time of the call."""
    with ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]
