"""The NIMService controller queues state reports behind news (issue 30).

With 1,000 NIMServices applied at once, each one's objects are created before
earlier ones' Deployment, Pod and Event states are followed: the owned objects'
creations and status-only updates, pod changes and Warning Events queue at
``LOW_PRIORITY``; a NIMService created or edited, and an owned object deleted or
whose spec changed, at 0. (The status still follows: integration tests of the
NIMService status cover that; this checks the wiring.)
"""

from __future__ import annotations

from typing import Any

from localcluster.cluster import LocalCluster
from nimctl_runtime.client import Client
from nimctl_runtime.handler import (
    LOW_PRIORITY,
    EnqueueRequestForObject,
    EnqueueRequestForOwner,
    EnqueueRequestsFromMapFunc,
)


async def test_owned_states_pods_and_events_queue_behind_news(cluster: LocalCluster) -> None:
    from controllers.setup import SetupOptions, discover_capabilities, setup_nimservice
    from nimctl.operator import install_crds
    from nimctl_runtime.manager import Manager

    async with Client(str(cluster.kubeconfig_path)) as client:
        await install_crds(client)
        manager = Manager(client)
        added: list[Any] = []
        manager.add = added.append  # type: ignore[method-assign]
        options = SetupOptions(capabilities=await discover_capabilities(client))
        setup_nimservice(manager, client, options)
        (controller,) = [c for c in added if getattr(c, "name", "") == "nimservice"]
        handlers = {w.kind: w.handler for w in controller.watches}

        assert isinstance(handlers["NIMService"], EnqueueRequestForObject)
        for kind in ("Deployment", "Service", "ServiceAccount", "Role", "RoleBinding"):
            owner = handlers[kind]
            assert isinstance(owner, EnqueueRequestForOwner), kind
            assert owner.state_priority == LOW_PRIORITY, kind
        for kind in ("Pod", "Event"):
            mapped = handlers[kind]
            assert isinstance(mapped, EnqueueRequestsFromMapFunc), kind
            assert mapped.priority == LOW_PRIORITY, kind
        assert isinstance(handlers["NIMCache"], EnqueueRequestsFromMapFunc)
        assert handlers["NIMCache"].priority == 0  # a NIMCache getting Ready is news
