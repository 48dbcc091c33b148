"""The operator as one process: a Manager with every controller and webhook wired in.

``compose_operator`` is the composition root shared by ``nimctl run``,
``nimctl local`` and the tests: it discovers what the cluster serves, builds
the Manager's filtered cache, registers the controller groups the flags leave
on and, when asked, the admission webhooks.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import TYPE_CHECKING, Any

from nimctl_runtime.logsetup import get_logger

if TYPE_CHECKING:
    from nimctl_runtime.client import Client
    from nimctl_runtime.manager import Manager


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
    from nimctl_runtime.looplag import LoopLagMonitor
    from nimctl_runtime.manager import Manager, ManagerOptions

    capabilities = await discover_capabilities(client)
    options = ManagerOptions.from_args(
        args, cache_by_object=filtered_cache_options(capabilities), **manager_overrides
    )
    manager = Manager(client, options)
    # every replica measures its event loop's lag (metric, and a log line when high)
    manager.add(LoopLagMonitor())
    query = model_query
    if model_query == "http":
        query = nimservice_ctrl.HttpModelQuery()
        manager.add(query)  # closes its session when the manager stops
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


async def run_operator(args: argparse.Namespace) -> int:
    from nimctl_runtime.client import Client, ConfigError, NoKindMatchError, load_config
    from nimctl_runtime.manager import LeaderElectionLostError

    log = get_logger("nimctl.run")
    from nimctl_runtime.client.connectivity import certificate_problem

    try:
        config = load_config(args.kubeconfig)
    except ConfigError as exc:
        print(f"nimctl run: {exc}", file=sys.stderr)
        return 1
    # A CA that does not sign the server's certificate will not fix itself: say so, exit.
    problem = await certificate_problem(config)
    if problem is not None:
        print(f"nimctl run: cannot use the API server {config.host}: {problem}", file=sys.stderr)
        return 1
    async with Client(config) as client:
        try:
            manager = await compose_operator(client, args)
            manager.add(_gc_policy(manager))
            await manager.start()
        except LeaderElectionLostError:
            log.error("leader election lost; exiting")
            return 1
        except ValueError as exc:  # e.g. leader-election timings that do not fit
            print(f"nimctl run: {exc}", file=sys.stderr)
            return 1
        except NoKindMatchError as exc:
            print(
                f"nimctl run: {exc.message}: the nimctl CRDs are not installed in this cluster;"
                " install them with `nimctl crds | kubectl apply --server-side -f -`",
                file=sys.stderr,
            )
            return 1
    return 0


#: The operator's young-generation threshold: 100,000 allocations between young
#: collections (the runtime default is 10,000). Most of what a reconcile or a
#: watch event allocates dies by refcount; a young collection walks what is
#: still alive, so fewer of them cost less: at 1,000 NIMServices applied at
#: once, ten young collections took ~0.12 ms of CPU per NIMService (7%) with
#: 10,000 and none ran with 100,000 (docs/benchmarks.md, issue 30 fifth pass).
OPERATOR_GC_THRESHOLDS = (100_000, 20, 20)


def _gc_policy(manager: Manager) -> Any:
    """Freeze the start-up heap once the caches synced (``nimctl_runtime.gcpolicy``)."""
    from nimctl_runtime.gcpolicy import GCPolicy

    return GCPolicy(lambda: manager.cache.wait_for_sync(None), thresholds=OPERATOR_GC_THRESHOLDS)


async def install_crds(client: Client, *, wait_seconds: float = 30.0) -> None:
    """Create (or replace) the CRDs generated from ``api/`` and wait until they are served."""
    from api.crdgen import installable_crds
    from nimctl_runtime.client import AlreadyExists, ApiError

    crds = installable_crds()
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
