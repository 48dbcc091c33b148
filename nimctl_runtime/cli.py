"""The ``nimctl`` command: the composition root.

This is the one runtime module allowed to import the operator's own packages
(api, controllers, webhooks, platforms, manifests). Each sub-command imports
what it needs lazily so ``nimctl --help`` stays fast.

Sub-commands:
  localcluster  run the in-process Kubernetes API server on its own
  local         localcluster + CRDs + the operator in one process
  run           the operator against a real cluster (kubeconfig or in-cluster)
  crds          write the CustomResourceDefinitions generated from api/
  render        print the objects a CR would produce, offline
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from nimctl_runtime.logsetup import configure_logging

Handler = Callable[[argparse.Namespace], int]


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _add_operator_flags(p: argparse.ArgumentParser) -> None:
    """Flags spelled like controller-runtime's, shared by ``run`` and ``local``."""
    p.add_argument("--leader-elect", action="store_true", help="enable Lease leader election")
    p.add_argument("--leader-election-id", default="nimctl.apps.nvidia.com")
    p.add_argument("--leader-election-namespace", default=None)
    p.add_argument("--metrics-bind-address", default=":8080", help='"0" disables metrics')
    p.add_argument("--health-probe-bind-address", default=":8081")
    p.add_argument("--webhook-port", type=int, default=9443)
    p.add_argument("--webhook-cert-dir", default=None)
    p.add_argument(
        "--enable-webhooks",
        action="store_true",
        default=_env_flag("ENABLE_WEBHOOKS"),
        help="serve admission webhooks (also ENABLE_WEBHOOKS=true)",
    )
    p.add_argument("--watch-namespace", default=os.environ.get("WATCH_NAMESPACE", ""))


def _cmd_localcluster(args: argparse.Namespace) -> int:
    from nimctl_runtime.localcluster.standalone import main

    return main(args)


def _cmd_local(args: argparse.Namespace) -> int:
    from nimctl_runtime.operator import run_local

    return run_local(args)


def _cmd_run(args: argparse.Namespace) -> int:
    from nimctl_runtime.operator import run_operator

    return run_operator(args)


def _cmd_crds(args: argparse.Namespace) -> int:
    from api.crdgen import main

    return main(args.output)


def _cmd_render(args: argparse.Namespace) -> int:
    from platforms.cli import main

    return main(args.filename, args.cache)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="nimctl", description=__doc__.split("\n\n")[0])
    parser.add_argument("--log-format", choices=["json", "console"], default="json")
    parser.add_argument("--log-level", default="info")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    lc = sub.add_parser("localcluster", help="run the in-process Kubernetes API server")
    lc.add_argument("--kubeconfig", default=".nimctl/kubeconfig", help="where to write it")
    lc.add_argument("--host", default="127.0.0.1")
    lc.add_argument("--port", type=int, default=0, help="0 picks a free port")
    lc.add_argument("--no-simulator", action="store_true", help="store objects only")
    lc.add_argument("--profile", default=None, help="node profile YAML (default: 2 GPU + 1 CPU)")
    lc.add_argument("--enable-debug-api", action="store_true", help="serve /debug/ fault APIs")
    lc.set_defaults(handler=_cmd_localcluster)

    local = sub.add_parser("local", help="embedded cluster with the operator in it")
    local.add_argument("--kubeconfig", default=".nimctl/kubeconfig", help="where to write it")
    local.add_argument("--port", type=int, default=0)
    local.add_argument("--demo", action="store_true", help="apply a NIMCache + NIMService")
    _add_operator_flags(local)
    local.set_defaults(handler=_cmd_local)

    run = sub.add_parser("run", help="run the operator against a cluster")
    run.add_argument("--kubeconfig", default=None)
    _add_operator_flags(run)
    run.set_defaults(handler=_cmd_run)

    crds = sub.add_parser("crds", help="write the generated CRDs")
    crds.add_argument("--output", default=None, help="directory (default: stdout)")
    crds.set_defaults(handler=_cmd_crds)

    render = sub.add_parser("render", help="print what a CR would produce, offline")
    render.add_argument("-f", "--filename", required=True)
    render.add_argument("--cache", default=None, help="a NIMCache manifest to resolve against")
    render.set_defaults(handler=_cmd_render)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nimctl`` console script."""
    args = build_parser().parse_args(argv)
    configure_logging(args.log_format, args.log_level)
    handler: Handler = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
