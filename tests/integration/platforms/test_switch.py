"""Switching ``spec.inferencePlatform`` removes the other platform's objects.

standalone -> kserve: the Deployment, Service (and what else standalone made)
go, the InferenceService comes; kserve -> standalone: the InferenceService goes
(and KServe's predictor with it), the Deployment and Service come back. The
RBAC objects both platforms make stay.
"""

from __future__ import annotations

import pytest

from nimctl.demo import DEMO_NAME, apply_objects
from tests.integration.controllers.harness import API, wait_for
from tests.integration.platforms.conftest import Env, exists, objects_in, ready

pytestmark = pytest.mark.asyncio(loop_scope="module")

ISVC = ("serving.kserve.io/v1beta1", "InferenceService", DEMO_NAME)
STANDALONE = [
    ("apps/v1", "Deployment", DEMO_NAME),
    ("v1", "Service", DEMO_NAME),
    ("autoscaling/v2", "HorizontalPodAutoscaler", DEMO_NAME),
]
BOTH = [
    ("v1", "ServiceAccount", DEMO_NAME),
    ("rbac.authorization.k8s.io/v1", "Role", DEMO_NAME),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", DEMO_NAME),
]
SCALE = {"enabled": True, "hpa": {"minReplicas": 1, "maxReplicas": 2}}


async def _switch(env: Env, ns: str, platform: str) -> None:
    await env.admin.patch(
        API, "NIMService", DEMO_NAME, {"spec": {"inferencePlatform": platform}}, namespace=ns
    )


async def test_switching_platform_cleans_up(env: Env) -> None:
    ns = "s-switch"
    objs = objects_in(ns, scale=SCALE)
    svc = next(o for o in objs if o["kind"] == "NIMService")
    del svc["spec"]["replicas"]
    await apply_objects(env.admin, objs)
    await ready(env.admin, ns)
    for obj in STANDALONE + BOTH:
        assert await exists(env.admin, *obj, ns), obj

    await _switch(env, ns, "kserve")

    async def on_kserve() -> bool:
        gone = [not await exists(env.admin, *o, ns) for o in STANDALONE]
        return all(gone) and await exists(env.admin, *ISVC, ns)

    await wait_for(on_kserve, timeout=30)
    await ready(env.admin, ns)
    for obj in BOTH:
        assert await exists(env.admin, *obj, ns), obj

    await _switch(env, ns, "standalone")

    async def back() -> bool:
        there = [await exists(env.admin, *o, ns) for o in STANDALONE]
        return all(there) and not await exists(env.admin, *ISVC, ns)

    await wait_for(back, timeout=30)
    await ready(env.admin, ns)
