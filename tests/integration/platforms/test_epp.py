"""NVIDIA's endpoint-picker sample: the EPP objects and the InferencePool, then Ready.

The EPP ServiceAccount, Role, RoleBinding, Service and Deployment
``<name>-epp``, the inline config ConfigMap ``<name>-epp-config`` and the
InferencePool ``<name>`` appear; the NIMService reaches Ready unchanged; an
idle reconcile writes nothing.
"""

from __future__ import annotations

import pytest

from nimctl.demo import apply_objects
from tests.integration.controllers.test_nim_controllers import EXAMPLES_DIR, example_objects
from tests.integration.platforms.conftest import Env, annotate, exists, ready

pytestmark = pytest.mark.asyncio(loop_scope="module")


async def test_nvidia_epp_sample_reaches_ready_unchanged(env: Env) -> None:
    ns = "e-epp"
    objs = example_objects(EXAMPLES_DIR / "nimservice-epp-inferencepool.yaml", ns)
    await apply_objects(env.admin, objs)
    name = next(o["metadata"]["name"] for o in objs if o["kind"] == "NIMService")
    await ready(env.admin, ns, name)
    for api_version, kind, obj_name in (
        ("v1", "ServiceAccount", f"{name}-epp"),
        ("rbac.authorization.k8s.io/v1", "Role", f"{name}-epp"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding", f"{name}-epp"),
        ("v1", "Service", f"{name}-epp"),
        ("apps/v1", "Deployment", f"{name}-epp"),
    ):
        assert await exists(env.admin, api_version, kind, obj_name, ns), (kind, obj_name)
    pool = await env.admin.get("inference.networking.k8s.io/v1", "InferencePool", name, ns)
    assert pool["spec"]["endpointPickerRef"]["name"] == f"{name}-epp"
    epp = await env.admin.get("apps/v1", "Deployment", f"{name}-epp", ns)
    assert epp["status"].get("availableReplicas") == epp["spec"]["replicas"]
    poke = annotate(env.admin, "apps/v1", "Deployment", name, ns)
    assert await env.idle_reconcile_writes(ns, poke) == [], "a second reconcile writes nothing"
