"""The ``nimctl`` command line: the parser and one small handler per sub-command.

Sub-commands:
  localcluster  run the in-process Kubernetes API server on its own
  local         localcluster + CRDs + the operator in one process (nimctl.local)
  run           the operator against a real cluster (nimctl.operator)
  crds          write the CustomResourceDefinitions generated from api/
  render        print the objects a CR would produce, offline
  why           why a custom resource is not Ready, from the CR down to the GPU

Each handler imports what it needs lazily so ``nimctl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from collections.abc import Callable, Sequence

from nimctl.operator import CONTROLLER_GROUP_FLAGS, DEFAULT_MAX_CONCURRENT_RECONCILES
from nimctl_runtime.logsetup import configure_logging

Handler = Callable[[argparse.Namespace], int]


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _seconds(text: str) -> float:
    """A duration in seconds: ``15``, ``1.5`` or Go's ``15s``."""
    value = text.strip().removesuffix("s")
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration in seconds: {text!r}") from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"a duration must not be negative: {text!r}")
    return seconds


def _add_operator_flags(p: argparse.ArgumentParser) -> None:
    """Flags spelled like controller-runtime's, shared by ``run`` and ``local``."""
    p.add_argument("--leader-elect", action="store_true", help="enable Lease leader election")
    p.add_argument("--leader-election-id", default="nimctl.apps.nvidia.com")
    p.add_argument("--leader-election-namespace", default=None)
    p.add_argument(
        "--leader-election-lease-duration",
        type=_seconds,
        default=None,
        help="seconds a Lease is valid after a renewal (default 15)",
    )
    p.add_argument(
        "--leader-election-renew-deadline",
        type=_seconds,
        default=None,
        help="bound of one acquisition attempt, seconds (default 10)",
    )
    p.add_argument(
        "--leader-election-retry-period",
        type=_seconds,
        default=None,
        help="seconds between Lease attempts (default 2)",
    )
    p.add_argument(
        "--leader-election-safety-margin",
        type=_seconds,
        default=None,
        help="stop writing this many seconds before the Lease could expire (default 10%% of it)",
    )
    p.add_argument(
        "--leader-election-exit-on-loss",
        action="store_true",
        help="exit 1 when the Lease is lost (controller-runtime); default: rejoin as a candidate",
    )
    p.add_argument(
        "--metrics-bind-address",
        default="0",
        help='metrics address, e.g. ":8080"; "0" (default) disables',
    )
    p.add_argument(
        "--metrics-secure",
        action="store_true",
        help="serve /metrics over HTTPS (self-signed unless --metrics-cert-dir)",
    )
    p.add_argument(
        "--metrics-cert-dir",
        default=None,
        help="directory with tls.crt and tls.key for --metrics-secure",
    )
    p.add_argument("--health-probe-bind-address", default=":8081")
    p.add_argument("--webhook-port", type=int, default=9443)
    p.add_argument("--webhook-cert-dir", default=None)
    p.add_argument(
        "--enable-webhooks",
        action="store_true",
        default=_env_flag("ENABLE_WEBHOOKS"),
        help="serve admission webhooks (also ENABLE_WEBHOOKS=true)",
    )
    p.add_argument(
        "--disable-defaulting",
        action="store_true",
        default=_env_flag("DISABLE_DEFAULTING"),
        help="with webhooks: do not write the NIMService/NIMCache defaults the CRD cannot "
        "express into the spec (also DISABLE_DEFAULTING=true)",
    )
    p.add_argument("--watch-namespace", default=os.environ.get("WATCH_NAMESPACE", ""))
    p.add_argument(
        "--max-concurrent-reconciles",
        type=int,
        default=DEFAULT_MAX_CONCURRENT_RECONCILES,
        help="reconciles each controller runs at once (default %(default)s: the API server, "
        "not the operator's CPU, is what a reconcile waits on)",
    )
    # Each group of controllers can be turned off on its own (the chart's
    # nim.enabled / nemo.enabled / gpu.enabled values).
    for group, flag, what in CONTROLLER_GROUP_FLAGS:
        p.add_argument(
            flag, dest=f"disable_{group}", action="store_true", help=f"do not run the {what}"
        )


def _cmd_localcluster(args: argparse.Namespace) -> int:
    from localcluster import serve_forever

    return serve_forever(args)


def _cmd_local(args: argparse.Namespace) -> int:
    from nimctl.local import cmd_local

    return cmd_local(args)


def _cmd_run(args: argparse.Namespace) -> int:
    from nimctl.operator import run_operator

    return asyncio.run(run_operator(args))


def _cmd_crds(args: argparse.Namespace) -> int:
    if args.apply:
        from nimctl.crdupgrade import apply_crds

        return asyncio.run(apply_crds(args.kubeconfig))
    from api.crdgen import main

    return main(args.output)


def _cmd_render(args: argparse.Namespace) -> int:
    from platforms.cli import main

    return main(args.filename, args.cache, nodes=args.nodes)


def _cmd_why(args: argparse.Namespace) -> int:
    from nimctl.why import main

    return main(args)


KUBERNETES_VERSION_HELP = (
    "the Kubernetes version the cluster reports, e.g. 1.34 (default: the newest supported)"
)


def _add_authorization_mode(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--authorization-mode",
        choices=["AlwaysAllow", "RBAC"],
        default="AlwaysAllow",
        help="AlwaysAllow (default): every authenticated user may do everything; RBAC: "
        "Roles and bindings are enforced for every user outside system:masters "
        "(kubectl auth can-i --as USER tells the truth)",
    )


def _kubernetes_version(text: str) -> str:
    from localcluster import parse_kubernetes_version

    try:
        return parse_kubernetes_version(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


USER_DESCRIPTION = (
    "nimctl serves NVIDIA's NIM Operator and GPU Operator APIs (NIMService, NIMCache,\n"
    "NIMPipeline, NIMBuild, the NeMo services, ClusterPolicy): the manifests you write for\n"
    "NVIDIA's operators work unchanged."
)


USER_EPILOG = """\
Try it on your laptop (no cluster, no GPU needed):
  nimctl local --demo            a simulated cluster; a NIM is cached and served until Ready

Run it on a cluster:
  nimctl crds | kubectl apply --server-side -f -
  nimctl run                     uses your kubeconfig (or the in-cluster config)

See what a manifest becomes:
  nimctl render -f nimservice.yaml

Ask why something is not Ready (exit 0 when Ready, 1 when not):
  nimctl why nimservice/NAME -n NAMESPACE

`nimctl COMMAND --help` lists each command's flags.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nimctl",
        description=USER_DESCRIPTION,
        epilog=USER_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--log-format",
        choices=["json", "console"],
        default=None,
        help="log lines as JSON or text (default: json)",
    )
    parser.add_argument(
        "--log-level", default=None, help="debug, info, warning or error (default: info)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    lc = sub.add_parser(
        "localcluster", help="a simulated Kubernetes cluster on its own, for kubectl and your tools"
    )
    lc.add_argument("--kubeconfig", default=".nimctl/kubeconfig", help="where to write it")
    lc.add_argument("--host", default="127.0.0.1")
    lc.add_argument("--port", type=int, default=0, help="0 picks a free port")
    lc.add_argument("--no-simulator", action="store_true", help="store objects only")
    lc.add_argument("--profile", default=None, help="node profile YAML (default: 2 GPU + 1 CPU)")
    lc.add_argument("--enable-debug-api", action="store_true", help="serve /debug/ fault APIs")
    lc.add_argument("--kubernetes-version", type=_kubernetes_version, help=KUBERNETES_VERSION_HELP)
    _add_authorization_mode(lc)
    lc.set_defaults(handler=_cmd_localcluster)

    local = sub.add_parser(
        "local", help="try it without a cluster: a simulated cluster with the operator in it"
    )
    local.add_argument("--kubeconfig", default=".nimctl/kubeconfig", help="where to write it")
    local.add_argument("--port", type=int, default=0)
    local.add_argument(
        "--kubernetes-version", type=_kubernetes_version, help=KUBERNETES_VERSION_HELP
    )
    _add_authorization_mode(local)
    local.add_argument(
        "--demo",
        nargs="?",
        const="nim",
        choices=["nim", "nemo"],
        help="apply a NIMCache + NIMService (nim, the default) or NVIDIA's NeMo samples (nemo)",
    )
    local.add_argument(
        "--exit-when-ready", action="store_true", help="with --demo: stop once both are Ready"
    )
    local.add_argument(
        "--profile",
        default=None,
        help="node profile: a built-in name (e.g. gpu-rdma) or a YAML file "
        "(default: 2 GPU + 1 CPU; gpu-bare with --gpu-operator, "
        "gpu-host-driver with --gpu-cluster, else gpu-openshift with --openshift)",
    )
    local.add_argument(
        "--gpu-operator",
        action="store_true",
        help="start on bare GPU nodes, apply NVIDIA's sample ClusterPolicy, show the GPU stack "
        "coming up, then run the NIM demo on the GPUs",
    )
    local.add_argument(
        "--gpu-cluster",
        action="store_true",
        help="start on GPU nodes with a host driver, apply NVIDIA's sample GPUCluster (the DRA "
        "stack), show it coming up and the GPUs published, then run the NIM demo on a DRA claim",
    )
    local.add_argument(
        "--openshift",
        action="store_true",
        help="play OpenShift: RHCOS GPU nodes on cri-o (profile gpu-openshift) and OpenShift's "
        "ClusterVersion, Proxy, SCC and Driver Toolkit ImageStream, so the GPU operands are "
        "rendered for OpenShift",
    )
    _add_operator_flags(local)
    # An embedded dev cluster needs no probe or metrics ports unless asked for.
    local.set_defaults(handler=_cmd_local, metrics_bind_address="0", health_probe_bind_address="0")
    # The local experience matches a cluster with NVIDIA's webhooks installed:
    # validation is on unless asked off (it costs about half a second at start).
    local.add_argument(
        "--disable-webhooks",
        dest="enable_webhooks",
        action="store_false",
        help="do not serve or register the admission webhooks",
    )
    local.set_defaults(enable_webhooks=True)

    run = sub.add_parser(
        "run", help="run the operator on a real cluster (kubeconfig or in-cluster)"
    )
    run.add_argument("--kubeconfig", default=None)
    _add_operator_flags(run)
    run.set_defaults(handler=_cmd_run)

    crds = sub.add_parser("crds", help="print the CRDs to install on a cluster before `run`")
    crds.add_argument("--output", default=None, help="directory (default: stdout)")
    crds.add_argument(
        "--apply",
        action="store_true",
        help="server-side apply them to the cluster and wait until they are Established "
        "(what the chart's upgradeCRD hook runs)",
    )
    crds.add_argument("--kubeconfig", default=None, help="with --apply (default: as `run`)")
    crds.set_defaults(handler=_cmd_crds)

    render = sub.add_parser(
        "render", help="show the Kubernetes objects a NIMService/NIMCache file becomes, offline"
    )
    render.add_argument("-f", "--filename", required=True)
    render.add_argument("--cache", default=None, help="a NIMCache manifest to resolve against")
    render.add_argument(
        "--nodes", default=None, help="Nodes a ClusterPolicy or NVIDIADrivers render against"
    )
    render.set_defaults(handler=_cmd_render)

    why = sub.add_parser(
        "why",
        help="why a NIMService (or NIMCache, NIMPipeline, ...) is not Ready: the chain from "
        "the CR to its pods, node and GPU, the blocker and what to do (exit 0 when Ready)",
    )
    why.add_argument("target", metavar="KIND/NAME", help="e.g. nimservice/llm")
    why.add_argument("-n", "--namespace", default="default")
    why.add_argument(
        "--kubeconfig",
        default=None,
        help="default: KUBECONFIG, ~/.kube/config, else nimctl local's .nimctl/kubeconfig",
    )
    why.set_defaults(handler=_cmd_why)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nimctl`` console script."""
    args = build_parser().parse_args(argv)
    # `nimctl local` sends its log to a file unless the flags ask for stderr
    args.log_explicit = args.log_format is not None or args.log_level is not None
    args.log_format = args.log_format or "json"
    args.log_level = args.log_level or "info"
    configure_logging(args.log_format, args.log_level)
    handler: Handler = args.handler
    try:
        return handler(args)
    except KeyboardInterrupt:
        return 130
