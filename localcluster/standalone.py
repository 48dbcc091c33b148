"""``nimctl localcluster``: run the in-process API server as its own process.

Writes the admin kubeconfig where ``--kubeconfig`` says, prints how to use it
and serves until SIGINT or SIGTERM. One process per state directory (the
kubeconfig's): a second one is refused (``statedir.py``).

Once serving, the start-up heap (CRD and built-in schemas, compiled CEL, the
image catalog) is collected once and frozen, and the young generation's
threshold raised (``nimctl_runtime.gcpolicy.settle``, as the operator does
after its caches sync): every full collection walked that heap again, about a
tenth of the server's CPU while 500 NIMServices rolled out (issue 30). Only
the server's own process does this; an in-process ``LocalCluster`` (tests,
``nimctl local``) leaves the host process's collector alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path

from nimctl_runtime.gcpolicy import settle

from . import statedir
from .cluster import LocalCluster


async def serve(
    args: argparse.Namespace, kubeconfig: Path, stop: asyncio.Event | None = None
) -> int:
    """Start the cluster, write the kubeconfig, wait for *stop* or a signal."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    cluster = LocalCluster(
        host=args.host,
        port=args.port,
        simulator=not args.no_simulator,
        profile=args.profile,
        debug_api=args.enable_debug_api,
        kubernetes_version=getattr(args, "kubernetes_version", None),
        authorization_mode=getattr(args, "authorization_mode", None) or "AlwaysAllow",
    )
    async with cluster:
        cluster.write_kubeconfig(kubeconfig)
        settle()
        print(
            f"localcluster serving Kubernetes v{cluster.kubernetes_version} at {cluster.url}",
            flush=True,
        )
        print(f"kubeconfig written to {kubeconfig}", flush=True)
        if cluster.authorization_mode == "RBAC":
            print(
                "authorization: RBAC (the kubeconfig's admin user is in system:masters; "
                "try kubectl auth can-i --as USER ...)",
                flush=True,
            )
        print(f"try: kubectl --kubeconfig {kubeconfig} get namespaces", flush=True)
        await stop.wait()
    return 0


def main(args: argparse.Namespace) -> int:
    """Entry point of ``nimctl localcluster`` (see ``nimctl.cli``)."""
    kubeconfig = Path(os.path.abspath(args.kubeconfig))
    try:
        lock = statedir.claim(kubeconfig.parent, "nimctl localcluster")
    except statedir.StateDirBusy as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        return asyncio.run(serve(args, kubeconfig))
    except (OSError, ValueError) as exc:
        # a busy port, an unwritable kubeconfig path, a bad --profile: one clear line
        print(f"nimctl localcluster: cannot start: {exc}", file=sys.stderr)
        return 1
    finally:
        lock.close()
