"""``nimctl local``: localcluster, the CRDs and the operator (with its webhooks) in one process.

The embedded cluster comes up first, the operator is composed against it as
against any cluster, and the chosen demo (a NIM, the NeMo services, or the GPU
stack from bare nodes) is applied and watched until Ready.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nimctl.demo import DEMO_NAME, DEMO_NAMESPACE, apply_objects, demo_objects, watch_demo
from nimctl.operator import compose_operator, install_crds
from nimctl_runtime.logsetup import configure_logging

if TYPE_CHECKING:
    from nimctl_runtime.client import Client


OPERATOR_LOG = "operator.log"
"""The operator's log, beside the kubeconfig, unless ``--log-level``/``--log-format`` is given."""


def cmd_local(args: argparse.Namespace) -> int:
    from localcluster import StateDirBusy, claim_state_dir

    kubeconfig = Path(args.kubeconfig).absolute()
    try:
        # one nimctl local per state directory: a second would take over the first
        # one's kubeconfig and webhook certificates and break it
        lock = claim_state_dir(kubeconfig.parent, "nimctl local")
    except StateDirBusy as exc:
        print(exc, file=sys.stderr)
        return 1
    if getattr(args, "profile", None):
        from localcluster import load_profile

        try:  # a wrong name or file: one line, before anything starts
            load_profile(args.profile)
        except ValueError as exc:
            print(f"nimctl local: --profile: {exc}", file=sys.stderr)
            lock.close()
            return 2
    if not getattr(args, "log_explicit", False):
        # The terminal is for the banner, progress and the demo's tables; the
        # operator's JSON lines go to a file (the flags bring them back to stderr).
        configure_logging("json", "info", file=kubeconfig.parent / OPERATOR_LOG)
    try:
        webhook: LocalWebhook | None = None
        if args.enable_webhooks:
            webhook = prepare_local_webhook(kubeconfig.parent / "webhook-certs")
        return asyncio.run(run_local(args, kubeconfig, webhook))
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


def talk_to_the_nim(kubeconfig: Path) -> str:
    """The two lines a NIM user runs next, as NVIDIA's docs give them."""
    return (
        f"\nTalk to the NIM (in another terminal, after export KUBECONFIG={kubeconfig}):\n"
        f"  kubectl -n {DEMO_NAMESPACE} port-forward service/{DEMO_NAME} 8000:8000\n"
        "  curl -s http://localhost:8000/v1/models\n"
    )


def usage(kubeconfig: Path, demo: str | None, log_file: Path | None = None) -> str:
    lines = [
        f"nimctl local: cluster is up; kubeconfig written to {kubeconfig}",
        *(
            [f"Operator log: {log_file} (--log-level or --log-format print it here instead)"]
            if log_file
            else []
        ),
        "",
        "Look around with kubectl:",
        f"  export KUBECONFIG={kubeconfig}",
        "  kubectl get nodes",
        "  kubectl get nimcaches,nimservices -A",
    ]
    if demo == "nemo":
        from nimctl.demo_nemo import USAGE

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


async def run_local(
    args: argparse.Namespace, kubeconfig: Path, webhook: LocalWebhook | None = None
) -> int:
    from localcluster import LocalCluster, install_ecosystem, install_openshift
    from nimctl_runtime.client import AlreadyExists, Client

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signame in ("SIGINT", "SIGTERM"):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(getattr(signal, signame), stop.set)
    gpu_operator = bool(getattr(args, "gpu_operator", False))
    gpu_cluster = bool(getattr(args, "gpu_cluster", False))
    if gpu_operator and gpu_cluster:
        print(
            "nimctl local: --gpu-operator and --gpu-cluster exclude each other "
            "(a ClusterPolicy and a GPUCluster may not exist at the same time)",
            file=sys.stderr,
        )
        return 2
    # Operands go to the GPU Operator's usual namespace (the chart sets it in a
    # cluster), so a ClusterPolicy applied to any local cluster is served.
    os.environ.setdefault("OPERATOR_NAMESPACE", "gpu-operator")
    openshift = bool(getattr(args, "openshift", False))
    default_profile: str | None = None
    if gpu_cluster:
        default_profile = "gpu-host-driver"  # a GPUCluster needs a host driver
    elif openshift:
        default_profile = "gpu-openshift"  # RHCOS nodes on cri-o, bare as gpu-bare's
    elif gpu_operator:
        default_profile = "gpu-bare"
    async with LocalCluster(
        port=args.port,
        profile=getattr(args, "profile", None) or default_profile,
        kubernetes_version=getattr(args, "kubernetes_version", None),
        authorization_mode=getattr(args, "authorization_mode", None) or "AlwaysAllow",
    ) as cluster:
        cluster.write_kubeconfig(kubeconfig)
        async with Client(str(kubeconfig)) as client:
            await install_crds(client)
            await install_ecosystem(client)  # LWS, KServe, Gateway API, ... for NVIDIA's samples
            if openshift:  # what OpenShift serves beside Kubernetes (ClusterVersion, SCCs, ...)
                await install_openshift(client)
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
            # The operator runs outside the simulated cluster: it asks each NIM for its
            # model through the API server's Service proxy (status.model.name).
            from controllers.nimservice import proxy_model_query

            manager = await compose_operator(
                client,
                args,
                model_query=proxy_model_query(client),
                webhook_server=server,
                leader_election=False,
            )
            manager_task = asyncio.create_task(manager.start(stop), name="manager")
            if webhook is not None:
                await register_local_webhook(
                    client, webhook, defaulting=not getattr(args, "disable_defaulting", False)
                )
            log_file = (
                None if getattr(args, "log_explicit", False) else kubeconfig.parent / OPERATOR_LOG
            )
            sys.stdout.write(usage(kubeconfig, args.demo, log_file))
            sys.stdout.flush()
            demo_task: asyncio.Task[None] | None = None
            ready_text = f"NIMCache and NIMService {DEMO_NAME} are Ready"
            if gpu_operator:
                from nimctl import demo_gpu as gpu_demo

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
            elif gpu_cluster:
                from nimctl import demo_gpucluster as dra_demo

                sys.stdout.write("\n".join(["GPU cluster (DRA):", *dra_demo.USAGE, ""]) + "\n")

                async def dra_nim_demo() -> None:
                    await apply_objects(client, dra_demo.dra_demo_objects())
                    await watch_demo(client, sys.stdout)

                demo_task = asyncio.create_task(
                    dra_demo.run(client, sys.stdout, dra_nim_demo), name="demo"
                )
                ready_text = (
                    "the DRA stack is up, the GPUs are published as ResourceSlices, and "
                    f"NIMCache and NIMService {DEMO_NAME} are Ready on an allocated ResourceClaim"
                )
            elif args.demo == "nemo":
                from nimctl import demo_nemo as local_demo

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
                if args.demo != "nemo":
                    sys.stdout.write(talk_to_the_nim(kubeconfig))
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
