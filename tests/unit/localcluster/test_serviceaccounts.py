"""Every active namespace has a ``default`` ServiceAccount, as kube-controller-manager keeps it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from localcluster.registry import Registry
from localcluster.serviceaccounts import ServiceAccountsController
from localcluster.storage import Storage


def _ns(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


@pytest.fixture
async def storage() -> AsyncIterator[Storage]:
    s = Storage(Registry(), history_size=100, watch_buffer=50)
    s.create(_ns("default"))
    controller = ServiceAccountsController(s)
    controller.start()
    yield s
    await controller.stop()


def _accounts(storage: Storage, namespace: str) -> list[str]:
    return [o["metadata"]["name"] for o in storage.list("v1", "ServiceAccount", namespace)]


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_existing_and_new_namespaces_get_a_default_service_account(storage: Storage) -> None:
    assert _accounts(storage, "default") == ["default"]  # namespaces present at start
    storage.create(_ns("nim"))
    await _settle()
    assert _accounts(storage, "nim") == ["default"]


async def test_a_deleted_default_comes_back_but_not_in_a_terminating_namespace(
    storage: Storage,
) -> None:
    storage.create(_ns("nim"))
    await _settle()
    storage.delete("v1", "ServiceAccount", "default", "nim")
    await _settle()
    assert _accounts(storage, "nim") == ["default"]
    storage.delete("v1", "Namespace", "nim")  # terminating: the controller leaves it alone
    storage.delete("v1", "ServiceAccount", "default", "nim")
    await _settle()
    assert _accounts(storage, "nim") == []
