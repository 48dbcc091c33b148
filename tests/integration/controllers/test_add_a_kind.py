"""docs/architecture.md's "Adding a kind", done inside the test suite (issue 28).

A kind of a new shape, ``Greeting`` (``example.nimctl.io/v1``: a ConfigMap per
CR carrying its message), takes exactly what the walk-through promises: one
contract (``GreetingContract``: owned kinds, a pure render, a pure readiness)
and one ``Kind`` binding (``GreetingKind``), run by the shared skeleton
(``KindReconciler``) and wired with ``Builder`` and ``wiring.own_kinds``. On
localcluster it renders, reports Ready, updates by hash, prunes what the
render drops, and a second pass writes nothing. A per-object write rule is one
method of the binding (``GreetingKind.write_policy``): ConfigMaps of a
``keep: true`` Greeting survive the prune.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controllers.plan import WritePolicy
from controllers.reconciler import Kind, KindReconciler
from controllers.wiring import own_kinds, spec_change_predicate
from localcluster import LocalCluster
from manifests.labels import standard_labels
from manifests.meta import object_meta, owner_reference
from nimctl_runtime.builder import Builder
from nimctl_runtime.client import Client, NotFound
from nimctl_runtime.controller import Controller
from nimctl_runtime.manager import Manager, ManagerOptions
from nimctl_runtime.meta import Obj, ObjView, dig
from nimctl_runtime.reconcile import Request
from platforms.capabilities import GVK, Capabilities
from platforms.contract import Blocked, Observed, Readiness
from tests.integration.controllers.harness import CountingClient, wait_for

GROUP = "example.nimctl.io"
API_VERSION = f"{GROUP}/v1"
KIND = "Greeting"
KEEP_LABEL = f"{GROUP}/keep"

CRD: Obj = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"greetings.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "greetings", "singular": "greeting", "kind": KIND},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "properties": {
                                    "message": {"type": "string"},
                                    "copies": {"type": "integer", "minimum": 1, "default": 1},
                                    "keep": {"type": "boolean"},
                                },
                            },
                            "status": {
                                "type": "object",
                                "x-kubernetes-preserve-unknown-fields": True,
                            },
                        },
                    }
                },
            }
        ],
    },
}


# -- the contract (platforms/) ---------------------------------------------------------


@dataclass(frozen=True)
class Greeting:
    """The typed CR (api/ would hold it as a pydantic model)."""

    obj: Obj
    name: str
    namespace: str
    message: str
    copies: int
    keep: bool = False


class GreetingContract:
    api_version = API_VERSION
    kind = KIND

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        return (("v1", "ConfigMap"),)

    def render(self, cr: Greeting, facts: None) -> list[Obj]:
        return [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": object_meta(
                    cr.name if i == 0 else f"{cr.name}-{i}",
                    cr.namespace,
                    labels={
                        **standard_labels(cr.name, "greeting"),
                        **({KEEP_LABEL: "true"} if cr.keep else {}),
                    },
                    owner_references=[owner_reference(cr.obj)],
                ),
                "data": {"message": cr.message},
            }
            for i in range(cr.copies)
        ]

    def readiness(self, cr: Greeting, facts: None, observed: Observed) -> Readiness:
        missing = [
            name_of_desired["metadata"]["name"]
            for name_of_desired in self.render(cr, facts)
            if observed.get("v1", "ConfigMap", name_of_desired["metadata"]["name"]) is None
        ]
        if missing:
            return Readiness("NotReady", "Waiting", f"ConfigMap {missing[0]} is not created yet")
        return Readiness("Ready", "Ready", f"{cr.copies} ConfigMap(s) say it", ready=True)


# -- the Kind binding (controllers/) ---------------------------------------------------


class GreetingKind(Kind[Greeting, None]):
    contract = GreetingContract()
    api_version = API_VERSION
    kind = KIND

    def parse(self, obj: Obj) -> Greeting:
        message = dig(obj, "spec", "message", default="")
        if not message:
            raise Blocked(Readiness("Failed", "InvalidSpec", "spec.message: Required value"))
        return Greeting(
            obj=obj,
            name=obj["metadata"]["name"],
            namespace=obj["metadata"]["namespace"],
            message=str(message),
            copies=int(dig(obj, "spec", "copies", default=1)),
            keep=bool(dig(obj, "spec", "keep", default=False)),
        )

    def write_policy(self, owner: ObjView, obj: ObjView) -> WritePolicy:
        """A kept greeting's ConfigMaps outlive the render that drops them."""
        return WritePolicy(keep_on_prune=dig(obj, "metadata", "labels", KEEP_LABEL) == "true")

    async def gather(self, cr: Greeting, obj: Obj, reader: Any) -> None:
        return None

    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        return {"state": readiness.state, "reason": readiness.reason, "message": readiness.message}


def setup_greeting(manager: Manager, client: Client) -> Controller:
    """The whole controller: For(Greeting) on spec changes, Owns(ConfigMap)."""
    cache = manager.cache
    reconciler: KindReconciler[Greeting, None] = KindReconciler(
        kind=GreetingKind(),
        cache=cache,
        client=client,
        api_reader=cache.api_reader,
        recorder=manager.event_recorder("greeting-controller"),
        use_finalizer=False,
    )
    builder = (
        Builder(manager)
        .named("greeting")
        .for_(API_VERSION, KIND, predicates=[spec_change_predicate()])
    )
    own_kinds(builder, manager, GreetingContract().owned_kinds(Capabilities.nothing()))
    return builder.build(reconciler)


# -- on localcluster -------------------------------------------------------------------


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[tuple[Client, CountingClient, Controller]]:
    async with LocalCluster(workdir=tmp_path, simulator=False) as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "admin.kubeconfig")
        async with Client(str(kubeconfig)) as admin:
            await admin.create(CRD)

            async def served() -> bool:
                try:
                    await admin.list(API_VERSION, KIND, namespace="default")
                except Exception:  # not served yet
                    return False
                return True

            await wait_for(served)
            client = CountingClient(str(kubeconfig))
            manager = Manager(client, ManagerOptions())
            controller = setup_greeting(manager, client)
            stop = asyncio.Event()
            task = asyncio.create_task(manager.start(stop))
            try:
                yield admin, client, controller
            finally:
                stop.set()
                await asyncio.wait_for(task, 30)
                await client.close()


async def _state(admin: Client, name: str) -> str:
    obj = await admin.get(API_VERSION, KIND, name, "default")
    return str(dig(obj, "status", "state", default=""))


async def test_a_new_kind_renders_reports_updates_prunes_and_settles(
    env: tuple[Client, CountingClient, Controller],
) -> None:
    admin, operator, controller = env
    greeting = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "hello", "namespace": "default"},
        "spec": {"message": "hi", "copies": 2},
    }
    await admin.create(greeting)
    await wait_for(lambda: _is(admin, "hello", "Ready"))
    for name in ("hello", "hello-1"):
        cm = await admin.get("v1", "ConfigMap", name, "default")
        assert cm["data"] == {"message": "hi"}
        assert cm["metadata"]["ownerReferences"][0]["kind"] == KIND

    # a new spec updates the ConfigMaps by hash and prunes the one dropped
    live = await admin.get(API_VERSION, KIND, "hello", "default")
    live["spec"] = {"message": "hello again", "copies": 1}
    await admin.update(live)

    async def pruned() -> bool:
        try:
            await admin.get("v1", "ConfigMap", "hello-1", "default")
        except NotFound:
            cm = await admin.get("v1", "ConfigMap", "hello", "default")
            return bool(cm["data"] == {"message": "hello again"})
        return False

    await wait_for(pruned)
    await wait_for(lambda: _is(admin, "hello", "Ready"))

    # an invalid spec is reported, naming the field, and nothing is written for it
    await admin.create({**greeting, "metadata": {"name": "empty", "namespace": "default"},
                        "spec": {"message": ""}})  # fmt: skip
    await wait_for(lambda: _is(admin, "empty", "Failed"))
    empty = await admin.get(API_VERSION, KIND, "empty", "default")
    assert empty["status"]["message"] == "spec.message: Required value"
    with pytest.raises(NotFound):
        await admin.get("v1", "ConfigMap", "empty", "default")

    # the binding's write policy: a kept greeting's dropped ConfigMap is not pruned
    await admin.create({**greeting, "metadata": {"name": "kept", "namespace": "default"},
                        "spec": {"message": "hi", "copies": 2, "keep": True}})  # fmt: skip
    await wait_for(lambda: _is(admin, "kept", "Ready"))
    kept = await admin.get(API_VERSION, KIND, "kept", "default")
    kept["spec"] = {"message": "bye", "copies": 1, "keep": True}
    await admin.update(kept)

    async def one_left() -> bool:  # status is written after the pass's writes
        obj = await admin.get(API_VERSION, KIND, "kept", "default")
        return bool(dig(obj, "status", "message") == "1 ConfigMap(s) say it")

    await wait_for(one_left)
    assert (await admin.get("v1", "ConfigMap", "kept", "default"))["data"] == {"message": "bye"}
    survivor = await admin.get("v1", "ConfigMap", "kept-1", "default")
    assert survivor["data"] == {"message": "hi"}

    # a pass over converged objects writes nothing
    writes_before = len(operator.object_writes())
    controller.enqueue(Request("default", "hello"))
    controller.enqueue(Request("default", "empty"))
    controller.enqueue(Request("default", "kept"))
    await wait_for(lambda: _drained(controller))
    assert operator.object_writes()[writes_before:] == []


async def _is(admin: Client, name: str, state: str) -> bool:
    return await _state(admin, name) == state


async def _drained(controller: Controller) -> bool:
    return len(controller.queue) == 0 and controller.in_flight() == 0
