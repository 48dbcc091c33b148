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
import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nimctl_runtime.logsetup import configure_logging, get_logger

if TYPE_CHECKING:
    from nimctl_runtime.client import Client
    from nimctl_runtime.manager import Manager

Handler = Callable[[argparse.Namespace], int]


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def _add_operator_flags(p: argparse.ArgumentParser) -> None:
    """Flags spelled like controller-runtime's, shared by ``run`` and ``local``."""
    p.add_argument("--leader-elect", action="store_true", help="enable Lease leader election")
    p.add_argument("--leader-election-id", default="nimctl.apps.nvidia.com")
    p.add_argument("--leader-election-namespace", default=None)
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


DEFAULT_MAX_CONCURRENT_RECONCILES = 16

CONTROLLER_GROUP_FLAGS = (
    ("nim", "--disable-nim-controllers", "NIMService/NIMCache/NIMPipeline/NIMBuild controllers"),
    ("nemo", "--disable-nemo-controllers", "NeMo microservice controllers"),
    ("gpu", "--disable-gpu-lifecycle", "GPU lifecycle (ClusterPolicy, NVIDIADriver) controllers"),
)


def enabled_controller_groups(args: argparse.Namespace) -> tuple[str, ...]:
    """The controller groups the flags leave on."""
    flags = CONTROLLER_GROUP_FLAGS
    return tuple(g for g, _, _ in flags if not getattr(args, f"disable_{g}", False))


def _cmd_localcluster(args: argparse.Namespace) -> int:
    from nimctl_runtime.localcluster.standalone import main

    return main(args)


def _cmd_local(args: argparse.Namespace) -> int:
    if args.demo and args.log_level == "info":
        # Keep the live table readable: only warnings and errors unless asked otherwise.
        configure_logging(args.log_format, "warning")
    from nimctl_runtime.localcluster import statedir

    kubeconfig = Path(args.kubeconfig).absolute()
    try:
        # one nimctl local per state directory: a second would take over the first
        # one's kubeconfig and webhook certificates and break it
        lock = statedir.claim(kubeconfig.parent, "nimctl local")
    except statedir.StateDirBusy as exc:
        print(exc, file=sys.stderr)
        return 1
    try:
        webhook: LocalWebhook | None = None
        if args.enable_webhooks:
            webhook = prepare_local_webhook(kubeconfig.parent / "webhook-certs")
        return asyncio.run(_run_local(args, kubeconfig, webhook))
    except OSError as exc:  # a busy --port, an unwritable directory: one line
        print(f"nimctl local: cannot start: {exc}", file=sys.stderr)
        return 1
    finally:
        lock.close()


@dataclasses.dataclass(frozen=True)
class LocalWebhook:
    """Where ``nimctl local`` serves admission webhooks and the CA the API server trusts."""

    cert_dir: Path
    port: int
    ca_pem: bytes

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


def prepare_local_webhook(cert_dir: Path) -> LocalWebhook:
    """A throwaway CA and a 127.0.0.1 serving certificate, and a free port (blocking I/O)."""
    import socket

    from nimctl_runtime.certs import generate_ca, generate_serving_cert

    ca = generate_ca("nimctl-local-webhook-ca")
    generate_serving_cert(ca, ["127.0.0.1", "localhost"]).write(cert_dir)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    return LocalWebhook(cert_dir=cert_dir, port=port, ca_pem=ca.cert_pem)


async def register_local_webhook(
    client: Client, webhook: LocalWebhook, *, wait_seconds: float = 20, defaulting: bool = True
) -> None:
    """Once the webhook server listens, tell the API server to call it."""
    from nimctl_runtime.client import AlreadyExists
    from webhooks.setup import mutating_webhook_configuration, validating_webhook_configuration

    async with asyncio.timeout(wait_seconds):
        while True:
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", webhook.port)
            except OSError:
                await asyncio.sleep(0.1)
                continue
            writer.close()
            break
    config = validating_webhook_configuration(webhook.ca_pem, url=webhook.url)
    with contextlib.suppress(AlreadyExists):
        await client.create(config)
    if defaulting:
        with contextlib.suppress(AlreadyExists):
            await client.create(mutating_webhook_configuration(webhook.ca_pem, url=webhook.url))


def _cmd_run(args: argparse.Namespace) -> int:
    return asyncio.run(_run_operator(args))


# -- the operator ------------------------------------------------------------------

OPERATOR_VERSION = os.environ.get("OPERATOR_VERSION", "")
DEFAULT_WEBHOOK_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"


async def compose_operator(
    client: Client,
    args: argparse.Namespace,
    *,
    model_query: Any = "http",
    webhook_server: Any = None,
    max_concurrent_reconciles: int | None = None,
    controller_groups: tuple[str, ...] = ("nim", "nemo", "gpu"),
    **manager_overrides: Any,
) -> Manager:
    """A Manager running the NIMCache and NIMService controllers (and webhooks when enabled).

    ``model_query`` is how the NIMService controller asks a NIM for its model
    name (``"http"``: ``GET /v1/models``; ``None``: never ask). When webhooks
    are enabled, ``webhook_server`` may be a ready ``WebhookServer``; otherwise
    one is built from ``--webhook-port`` / ``--webhook-cert-dir``.
    """
    from controllers import nimservice as nimservice_ctrl
    from controllers.setup import (
        SetupOptions,
        discover_capabilities,
        filtered_cache_options,
        setup_controllers,
    )
    from nimctl_runtime.manager import Manager, ManagerOptions

    capabilities = await discover_capabilities(client)
    options = ManagerOptions.from_args(
        args, cache_by_object=filtered_cache_options(capabilities), **manager_overrides
    )
    manager = Manager(client, options)
    query = nimservice_ctrl.http_model_query if model_query == "http" else model_query
    setup_controllers(
        manager,
        client,
        SetupOptions(
            capabilities=capabilities,
            operator_version=OPERATOR_VERSION,
            max_concurrent_reconciles=max_concurrent_reconciles
            or getattr(args, "max_concurrent_reconciles", None)
            or DEFAULT_MAX_CONCURRENT_RECONCILES,
            model_query=query,
        ),
        groups=tuple(g for g in controller_groups if g in enabled_controller_groups(args)),
    )
    if getattr(args, "enable_webhooks", False):
        from nimctl_runtime.webhook import WebhookServer
        from webhooks.facts import ClientClusterFacts
        from webhooks.setup import register

        server = webhook_server or WebhookServer(
            cert_dir=args.webhook_cert_dir or DEFAULT_WEBHOOK_CERT_DIR, port=args.webhook_port
        )
        defaulting = not getattr(args, "disable_defaulting", False)
        register(server, ClientClusterFacts(client), defaulting=defaulting)
        manager.add(server)
        manager.add_readyz_check("webhook", server.started_checker())
    return manager


async def _run_operator(args: argparse.Namespace) -> int:
    from nimctl_runtime.client import Client, ConfigError, NoKindMatchError, load_config
    from nimctl_runtime.manager import LeaderElectionLostError

    log = get_logger("nimctl.run")
    try:
        config = load_config(args.kubeconfig)
    except ConfigError as exc:
        print(f"nimctl run: {exc}", file=sys.stderr)
        return 1
    async with Client(config) as client:
        try:
            manager = await compose_operator(client, args)
            await manager.start()
        except LeaderElectionLostError:
            log.error("leader election lost; exiting")
            return 1
        except NoKindMatchError as exc:
            print(
                f"nimctl run: {exc.message}: the nimctl CRDs are not installed in this cluster;"
                " install them with `nimctl crds | kubectl apply --server-side -f -`",
                file=sys.stderr,
            )
            return 1
    return 0


# -- nimctl local --------------------------------------------------------------------

DEMO_NAMESPACE = "nim-demo"
DEMO_NAME = "meta-llama-3-1-8b-instruct"
DEMO_IMAGE = "nvcr.io/nim/meta/llama-3.1-8b-instruct"
DEMO_TAG = "1.3.3"


def demo_objects(namespace: str = DEMO_NAMESPACE) -> list[dict[str, Any]]:
    """The Namespace, Secrets, NIMCache and NIMService ``nimctl local --demo`` applies."""
    import base64
    import json

    dockercfg = json.dumps({"auths": {"nvcr.io": {"username": "$oauthtoken", "password": "x"}}})
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ngc-secret", "namespace": namespace},
            "type": "kubernetes.io/dockerconfigjson",
            "data": {".dockerconfigjson": base64.b64encode(dockercfg.encode()).decode()},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "ngc-api-secret", "namespace": namespace},
            "stringData": {"NGC_API_KEY": "simulated"},
        },
        {
            "apiVersion": "apps.nvidia.com/v1alpha1",
            "kind": "NIMCache",
            "metadata": {"name": DEMO_NAME, "namespace": namespace},
            "spec": {
                "source": {
                    "ngc": {
                        "modelPuller": f"{DEMO_IMAGE}:{DEMO_TAG}",
                        "pullSecret": "ngc-secret",
                        "authSecret": "ngc-api-secret",
                        "model": {"engine": "tensorrt_llm", "tensorParallelism": "1"},
                    }
                },
                "storage": {
                    "pvc": {"create": True, "size": "50Gi", "volumeAccessMode": "ReadWriteOnce"}
                },
            },
        },
        {
            "apiVersion": "apps.nvidia.com/v1alpha1",
            "kind": "NIMService",
            "metadata": {"name": DEMO_NAME, "namespace": namespace},
            "spec": {
                "image": {
                    "repository": DEMO_IMAGE,
                    "tag": DEMO_TAG,
                    "pullPolicy": "IfNotPresent",
                    "pullSecrets": ["ngc-secret"],
                },
                "authSecret": "ngc-api-secret",
                "storage": {"nimCache": {"name": DEMO_NAME}},
                "replicas": 1,
                "resources": {"limits": {"nvidia.com/gpu": 1}},
                "expose": {"service": {"type": "ClusterIP", "port": 8000}},
            },
        },
    ]


async def install_crds(client: Client, *, wait_seconds: float = 30.0) -> None:
    """Create (or replace) the CRDs generated from ``api/`` and wait until they are served."""
    from api.crdgen import generate_crds
    from nimctl_runtime.client import AlreadyExists, ApiError

    crds = generate_crds()
    for crd in crds:
        try:
            await client.create(crd)
        except AlreadyExists:
            name = crd["metadata"]["name"]
            live = await client.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
            rv = live["metadata"]["resourceVersion"]
            await client.update({**crd, "metadata": {**crd["metadata"], "resourceVersion": rv}})
    async with asyncio.timeout(wait_seconds):
        for crd in crds:
            group = crd["spec"]["group"]
            kind = crd["spec"]["names"]["kind"]
            versions = [v["name"] for v in crd["spec"]["versions"] if v.get("served", True)]
            while True:
                try:
                    await client.mapper.rest_mapping(f"{group}/{versions[0]}", kind)
                    break
                except ApiError:
                    await asyncio.sleep(0.1)


async def apply_objects(client: Client, objects: Sequence[dict[str, Any]]) -> None:
    """Create each object; an existing one is left as it is."""
    from nimctl_runtime.client import AlreadyExists

    for obj in objects:
        with contextlib.suppress(AlreadyExists):
            await client.create(obj)


async def watch_demo(
    client: Client,
    out: Any,
    *,
    namespace: str = DEMO_NAMESPACE,
    name: str = DEMO_NAME,
    interval: float = 0.5,
) -> None:
    """Show the demo objects' progress until both are Ready."""
    from nimctl_runtime.client import NotFound
    from nimctl_runtime.statustable import LiveTable, row_for

    table = LiveTable(out)
    while True:
        rows = []
        states = []
        for kind in ("NIMCache", "NIMService"):
            try:
                obj = await client.get("apps.nvidia.com/v1alpha1", kind, name, namespace)
            except NotFound:
                obj = {"kind": kind, "metadata": {"name": name}}
            workload = None
            if kind == "NIMService":
                with contextlib.suppress(NotFound):
                    workload = await client.get("apps/v1", "Deployment", name, namespace)
            rows.append(row_for(obj, workload))
            states.append((obj.get("status") or {}).get("state"))
        table.update(rows)
        if states == ["Ready", "Ready"]:
            return
        await asyncio.sleep(interval)


def _example_path(name: str) -> str:
    """The absolute path of a docs/examples file in this checkout, or its repo path."""
    path = Path(__file__).resolve().parents[1] / "docs" / "examples" / name
    return str(path) if path.is_file() else f"docs/examples/{name} (from the nimctl repository)"


def _first_nim_commands() -> list[str]:
    """Commands that work as printed from any directory (QA: a relative path and a
    missing namespace made the old hint fail)."""
    return [
        "export NGC_API_KEY=nvapi-simulated  # any value here; your NGC API key on a real cluster",
        "kubectl create namespace nim-service",
        "kubectl -n nim-service create secret generic ngc-api-secret"
        ' --from-literal=NGC_API_KEY="$NGC_API_KEY"',
        "kubectl -n nim-service create secret docker-registry ngc-secret"
        " --docker-server=nvcr.io --docker-username='$oauthtoken'"
        ' --docker-password="$NGC_API_KEY"',
        f"kubectl apply -f {_example_path('nim-minimal.yaml')}",
        "kubectl -n nim-service get nimcache,nimservice",
    ]


def _usage(kubeconfig: Path, demo: str | None) -> str:
    lines = [
        f"nimctl local: cluster is up; kubeconfig written to {kubeconfig}",
        "",
        "Look around with kubectl:",
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl get nodes",
        "  kubectl get nimcaches,nimservices -A",
    ]
    if demo == "nemo":
        from platforms.nemo.local_demo import USAGE

        lines += USAGE
    elif demo:
        lines += [
            f"  kubectl -n {DEMO_NAMESPACE} get nimcache,nimservice,deployment,service,pods",
            f"  kubectl -n {DEMO_NAMESPACE} describe nimservice {DEMO_NAME}",
        ]
    else:
        lines += ["", "Run a NIM (the example's namespace and the secrets it names come first):"]
        lines += [f"  {line}" for line in _first_nim_commands()]
    lines += ["", "Press Ctrl-C to stop."]
    return "\n".join(lines) + "\n"


async def _run_local(
    args: argparse.Namespace, kubeconfig: Path, webhook: LocalWebhook | None = None
) -> int:
    from nimctl_runtime.client import AlreadyExists, Client
    from nimctl_runtime.localcluster import LocalCluster

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signame in ("SIGINT", "SIGTERM"):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(getattr(signal, signame), stop.set)
    gpu_operator = bool(getattr(args, "gpu_operator", False))
    # Operands go to the GPU Operator's usual namespace (the chart sets it in a
    # cluster), so a ClusterPolicy applied to any local cluster is served.
    os.environ.setdefault("OPERATOR_NAMESPACE", "gpu-operator")
    async with LocalCluster(
        port=args.port,
        profile="gpu-bare" if gpu_operator else None,
        kubernetes_version=getattr(args, "kubernetes_version", None),
    ) as cluster:
        cluster.write_kubeconfig(kubeconfig)
        async with Client(str(kubeconfig)) as client:
            await install_crds(client)
            from nimctl_runtime.localcluster.addons import install_ecosystem

            await install_ecosystem(client)  # LWS, KServe, Gateway API, ... for NVIDIA's samples
            with contextlib.suppress(AlreadyExists):  # where a ClusterPolicy's operands go
                await client.create(
                    {
                        "apiVersion": "v1",
                        "kind": "Namespace",
                        "metadata": {"name": os.environ["OPERATOR_NAMESPACE"]},
                    }
                )
            server = None
            if webhook is not None:
                from nimctl_runtime.webhook import WebhookServer

                server = WebhookServer(
                    cert_dir=webhook.cert_dir, host="127.0.0.1", port=webhook.port
                )
            manager = await compose_operator(
                client, args, model_query=None, webhook_server=server, leader_election=False
            )
            manager_task = asyncio.create_task(manager.start(stop), name="manager")
            if webhook is not None:
                await register_local_webhook(
                    client, webhook, defaulting=not getattr(args, "disable_defaulting", False)
                )
            sys.stdout.write(_usage(kubeconfig, args.demo))
            sys.stdout.flush()
            demo_task: asyncio.Task[None] | None = None
            ready_text = f"NIMCache and NIMService {DEMO_NAME} are Ready"
            if gpu_operator:
                from controllers.gpu import local_demo as gpu_demo

                sys.stdout.write("\n".join(["GPU operator:", *gpu_demo.USAGE, ""]) + "\n")

                async def nim_demo() -> None:
                    await apply_objects(client, demo_objects())
                    await watch_demo(client, sys.stdout)

                demo_task = asyncio.create_task(
                    gpu_demo.run(client, sys.stdout, nim_demo), name="demo"
                )
                ready_text = (
                    f"the GPU nodes are up, and NIMCache and NIMService {DEMO_NAME} are Ready"
                )
            elif args.demo == "nemo":
                from platforms.nemo import local_demo

                crs = await local_demo.apply(client)
                demo_task = asyncio.create_task(
                    local_demo.watch(client, sys.stdout, crs), name="demo"
                )
                ready_text = "the five NeMo services are Ready"
            elif args.demo:
                await apply_objects(client, demo_objects())
                demo_task = asyncio.create_task(watch_demo(client, sys.stdout), name="demo")
            stop_task = asyncio.create_task(stop.wait())
            waiting: set[asyncio.Task[Any]] = {manager_task, stop_task}
            if demo_task is not None:
                waiting.add(demo_task)
            done, _ = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
            if demo_task is not None and demo_task in done and demo_task.exception() is None:
                sys.stdout.write(f"\nDemo ready: {ready_text}.\n")
                sys.stdout.flush()
                if getattr(args, "exit_when_ready", False):
                    stop.set()
                done, _ = await asyncio.wait(
                    {manager_task, stop_task}, return_when=asyncio.FIRST_COMPLETED
                )
            stop.set()
            if demo_task is not None and not demo_task.done():
                demo_task.cancel()
            stop_task.cancel()
            try:
                await manager_task
            except Exception as exc:
                print(f"nimctl local: operator stopped with an error: {exc}", file=sys.stderr)
                return 1
    return 0


def _cmd_crds(args: argparse.Namespace) -> int:
    from api.crdgen import main

    return main(args.output)


def _cmd_render(args: argparse.Namespace) -> int:
    from platforms.cli import main

    return main(args.filename, args.cache, nodes=args.nodes)


KUBERNETES_VERSION_HELP = (
    "the Kubernetes version the cluster reports, e.g. 1.34 (default: the newest supported)"
)


def _kubernetes_version(text: str) -> str:
    from nimctl_runtime.localcluster.discovery import parse_kubernetes_version

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
        default="json",
        help="log lines as JSON or text",
    )
    parser.add_argument("--log-level", default="info", help="debug, info, warning or error")
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
    lc.set_defaults(handler=_cmd_localcluster)

    local = sub.add_parser(
        "local", help="try it without a cluster: a simulated cluster with the operator in it"
    )
    local.add_argument("--kubeconfig", default=".nimctl/kubeconfig", help="where to write it")
    local.add_argument("--port", type=int, default=0)
    local.add_argument(
        "--kubernetes-version", type=_kubernetes_version, help=KUBERNETES_VERSION_HELP
    )
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
        "--gpu-operator",
        action="store_true",
        help="start on bare GPU nodes, apply NVIDIA's sample ClusterPolicy, show the GPU stack "
        "coming up, then run the NIM demo on the GPUs",
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
