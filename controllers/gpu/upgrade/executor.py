"""Carries out an upgrade ``Plan``: one merge patch per changed node, pod deletions, evictions.

Evictions go through the ``pods/eviction`` subresource (policy/v1) without the
client's retries: a 429 from a PodDisruptionBudget is an answer (the pod stays,
the node keeps draining and says why), not a throttle to wait out. Deletions
and evictions of a pass run side by side. A pod or node that is gone already
is not an error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from controllers.gpu.upgrade.plan import Plan, PodAction
from nimctl_runtime.client.client import Client
from nimctl_runtime.client.errors import ApiError, NotFound

__all__ = ["Outcome", "execute"]


@dataclass
class Outcome:
    """What the API said to the plan's writes."""

    writes: int = 0
    refused: dict[str, list[str]] = field(default_factory=dict)
    """Per node: evictions or deletions the API server refused, with its message."""
    errors: list[str] = field(default_factory=list)


def _cause(err: ApiError) -> str:
    causes = (err.details or {}).get("causes") or []
    texts = [str(c.get("message")) for c in causes if c.get("message")]
    return "; ".join([err.message, *texts]) if texts else err.message


async def _pod_action(client: Client, action: PodAction) -> str | None:
    if action.verb == "evict":
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": action.name, "namespace": action.namespace},
        }
        path = f"/api/v1/namespaces/{action.namespace}/pods/{action.name}/eviction"
        await client.request("POST", path, body=body, retries=0)
    else:
        await client.delete("v1", "Pod", action.name, action.namespace)
    return None


async def _run(client: Client, action: PodAction, outcome: Outcome) -> None:
    try:
        await _pod_action(client, action)
        outcome.writes += 1
    except NotFound:
        return
    except ApiError as err:
        outcome.writes += 1
        verb = "eviction" if action.verb == "evict" else "deletion"
        outcome.refused.setdefault(action.node, []).append(
            f"{verb} of {action.namespace}/{action.name} refused: {_cause(err)}"
        )


async def execute(client: Client, plan: Plan) -> Outcome:
    """Write the plan (see the module docstring)."""
    outcome = Outcome()
    for node, patch in sorted(plan.patches.items()):
        body = patch.body()
        if not body:
            continue
        try:
            await client.patch("v1", "Node", node, body)
            outcome.writes += 1
        except NotFound:
            continue
        except ApiError as err:
            outcome.errors.append(f"node {node}: {err.message}")
    await asyncio.gather(*(_run(client, a, outcome) for a in plan.pod_actions))
    return outcome
