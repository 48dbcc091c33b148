"""Defaulting through the API server: what a user reads back is what runs.

The operator serves the defaulting webhook next to NVIDIA's validators and
``nimctl local`` registers both; a NIMService and a NIMCache read back with
the defaults written into their spec; an update that changes nothing in the
spec comes back unchanged; the NIMService still reconciles to Ready.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from localcluster.cluster import LocalCluster
from nimctl.cli import build_parser
from nimctl.demo import DEMO_NAME, apply_objects, demo_objects
from nimctl.local import prepare_local_webhook, register_local_webhook
from nimctl.operator import compose_operator, install_crds
from nimctl_runtime.client import Client
from nimctl_runtime.webhook import WebhookServer
from tests.integration.controllers.harness import API
from tests.integration.platforms.conftest import ready

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def admin(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    tmp: Path = tmp_path_factory.mktemp("defaulting")
    async with LocalCluster(workdir=tmp) as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as client, Client(str(kubeconfig)) as operator:
            await install_crds(client)
            webhook = prepare_local_webhook(tmp / "webhook-certs")
            server = WebhookServer(cert_dir=webhook.cert_dir, host="127.0.0.1", port=webhook.port)
            args = build_parser().parse_args(["local"])
            manager = await compose_operator(
                operator, args, model_query=None, webhook_server=server, leader_election=False
            )
            stop = asyncio.Event()
            task = asyncio.create_task(manager.start(stop))
            try:
                await register_local_webhook(client, webhook)
                yield client
            finally:
                stop.set()
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(task, 60)


async def test_defaults_are_written_and_stay(admin: Client) -> None:
    ns = "defaults"
    await apply_objects(admin, demo_objects(ns))
    svc = await admin.get(API, "NIMService", DEMO_NAME, ns)
    assert (svc["spec"]["userID"], svc["spec"]["groupID"]) == (1000, 2000)
    assert svc["spec"]["replicas"] == 1
    cache = await admin.get(API, "NIMCache", DEMO_NAME, ns)
    assert cache["spec"]["nodeSelector"] == {"feature.node.kubernetes.io/pci-10de.present": "true"}

    # An update of metadata only: the (immutable) NIMCache spec comes back as it was.
    labelled = await admin.patch(
        API, "NIMCache", DEMO_NAME, {"metadata": {"labels": {"team": "a"}}}, namespace=ns
    )
    assert labelled["spec"] == cache["spec"]
    # A replace with the original manifest keeps the defaults it was given.
    original: dict[str, Any] = next(o for o in demo_objects(ns) if o["kind"] == "NIMService")
    live = await admin.get(API, "NIMService", DEMO_NAME, ns)
    original["metadata"]["resourceVersion"] = live["metadata"]["resourceVersion"]
    replaced = await admin.update(original)
    assert replaced["spec"] == live["spec"]
    await ready(admin, ns)


async def test_defaulting_can_be_turned_off() -> None:
    assert build_parser().parse_args(["local", "--disable-defaulting"]).disable_defaulting
    assert not build_parser().parse_args(["local"]).disable_defaulting
