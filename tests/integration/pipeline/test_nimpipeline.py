"""NIMPipeline against a LocalCluster with the operator running, through real HTTP.

One cluster and one operator serve the module; each test uses its own
namespace. What a user sees: which NIMServices exist, their env, the
pipeline's ``status.states``/``state``/conditions, Events, and that a
NIMService someone else made is left alone.
"""

from __future__ import annotations

import copy
import shutil
from typing import Any

import pytest

from nimctl.demo import DEMO_NAME, apply_objects, demo_objects
from nimctl_runtime.client import Client, NotFound
from tests.conftest import Kubectl
from tests.integration.controllers.harness import API, settle, wait_for, writes_of_reconcile
from tests.integration.pipeline.conftest import Env

pytestmark = pytest.mark.asyncio(loop_scope="module")


def _base(namespace: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The namespace, secrets and a NIMCache, and a NIMService spec using that cache."""
    objs = demo_objects(namespace)
    svc = next(o for o in objs if o["kind"] == "NIMService")
    return [o for o in objs if o["kind"] != "NIMService"], copy.deepcopy(svc["spec"])


def _pipeline(namespace: str, services: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "NIMPipeline",
        "metadata": {"name": "rag", "namespace": namespace},
        "spec": {"services": services},
    }


async def _status(admin: Client, namespace: str) -> dict[str, Any]:
    obj = await admin.get(API, "NIMPipeline", "rag", namespace)
    return dict(obj.get("status") or {})


async def _exists(admin: Client, name: str, namespace: str) -> bool:
    try:
        await admin.get(API, "NIMService", name, namespace)
    except NotFound:
        return False
    return True


def _condition(status: dict[str, Any], type_: str) -> dict[str, Any]:
    return next(c for c in status.get("conditions") or [] if c["type"] == type_)


async def test_services_follow_enabled_env_lands_and_state_goes_ready(env: Env) -> None:
    ns = "pipe-enable"
    base, spec = _base(ns)
    dependent = {
        "name": "llm",
        "enabled": True,
        "spec": spec,
        "dependencies": [
            {"name": "emb", "port": 8000, "envName": "EMBEDDING_URL", "envValue": "emb.pipe:8000"}
        ],
    }
    await apply_objects(
        env.admin, [*base, _pipeline(ns, [dependent, {"name": "emb", "spec": spec}])]
    )

    nimservice = await wait_for(lambda: env.admin.get(API, "NIMService", "llm", ns))
    env_vars = {e["name"]: e.get("value") for e in nimservice["spec"].get("env") or []}
    assert env_vars["EMBEDDING_URL"] == "emb.pipe:8000"
    owner = nimservice["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("NIMPipeline", "rag", True)
    assert not await _exists(env.admin, "emb", ns), "enabled omitted: not deployed"

    # NotReady while the NIMService comes up, then Ready with the Ready condition True.
    seen: set[str] = set()

    async def ready() -> bool:
        st = await _status(env.admin, ns)
        seen.add(str(st.get("state")))
        return st.get("state") == "Ready"

    await wait_for(ready, timeout=60)
    assert "NotReady" in seen
    st = await _status(env.admin, ns)
    assert st["states"] == {"llm": "Ready"}
    assert _condition(st, "Ready")["status"] == "True"
    assert _condition(st, "Failed")["status"] == "False"

    events = (await env.admin.list("v1", "Event", ns))["items"]
    messages = {
        (e["reason"], e["message"]) for e in events if e["involvedObject"]["kind"] == "NIMPipeline"
    }
    assert ("Ready", "NIMPipeline rag status Ready, service states map[llm:Ready]") in messages

    # Enabling emb creates it; states grow; disabling llm deletes it and drops it from states.
    pipe = await env.admin.get(API, "NIMPipeline", "rag", ns)
    pipe["spec"]["services"][1]["enabled"] = True
    pipe["spec"]["services"][0]["enabled"] = False
    await env.admin.update(pipe)
    await wait_for(lambda: _exists(env.admin, "emb", ns))

    async def llm_gone() -> bool:
        return not await _exists(env.admin, "llm", ns)

    await wait_for(llm_gone)

    async def only_emb_ready() -> bool:
        st = await _status(env.admin, ns)
        return st.get("states") == {"emb": "Ready"} and st.get("state") == "Ready"

    await wait_for(only_emb_ready, timeout=60)


async def test_a_second_reconcile_writes_nothing(env: Env) -> None:
    ns = "pipe-quiet"
    base, spec = _base(ns)
    await apply_objects(
        env.admin, [*base, _pipeline(ns, [{"name": "llm", "enabled": True, "spec": spec}])]
    )

    async def ready() -> bool:
        return (await _status(env.admin, ns)).get("state") == "Ready"

    await wait_for(ready, timeout=60)

    # A change to the owned NIMService wakes the pipeline; nothing it wants differs.
    async def touch() -> None:
        await env.admin.patch(
            API, "NIMService", "llm", {"metadata": {"labels": {"touched": "1"}}}, namespace=ns
        )

    writes = await writes_of_reconcile(env.operator, "nimpipeline", touch)
    assert [w for w in writes if f"/namespaces/{ns}/" in w[1]] == []


async def test_a_nimservice_not_owned_is_reported_not_overwritten(env: Env) -> None:
    ns = "pipe-foreign"
    base, spec = _base(ns)
    theirs = {
        "apiVersion": API,
        "kind": "NIMService",
        "metadata": {"name": "llm", "namespace": ns},
        "spec": copy.deepcopy(spec),
    }
    await apply_objects(env.admin, [*base, theirs])
    before = await env.admin.get(API, "NIMService", "llm", ns)
    pipeline_spec = copy.deepcopy(spec)
    pipeline_spec["replicas"] = 2
    await apply_objects(
        env.admin, [_pipeline(ns, [{"name": "llm", "enabled": True, "spec": pipeline_spec}])]
    )

    async def reported() -> dict[str, Any] | None:
        st = await _status(env.admin, ns)
        conds = {c["type"]: c for c in st.get("conditions") or []}
        return st if conds.get("Ready", {}).get("reason") == "NIMServiceNotOwned" else None

    st = await wait_for(reported, timeout=30)
    assert st["state"] == "NotReady" and st["states"] == {"llm": "NotReady"}
    assert _condition(st, "Ready")["message"] == (
        "NIMservice llm already exists and is not owned by the NIMPipeline rag"
    )
    await settle(env.operator)
    after = await env.admin.get(API, "NIMService", "llm", ns)
    assert after["spec"] == before["spec"] and after["spec"].get("replicas") != 2
    assert not after["metadata"].get("ownerReferences")
    events = (await env.admin.list("v1", "Event", ns))["items"]
    assert any(
        e["reason"] == "NIMServiceNotOwned" and e["type"] == "Warning"
        for e in events
        if e["involvedObject"]["kind"] == "NIMPipeline"
    )


async def test_pipeline_fails_when_a_service_fails_and_recovers(env: Env) -> None:
    ns = "pipe-fail"
    base, spec = _base(ns)
    broken = copy.deepcopy(spec)
    broken["storage"] = {"nimCache": {"name": "no-such-cache"}}
    services = [
        {"name": "llm", "enabled": True, "spec": spec},
        {"name": "broken", "enabled": True, "spec": broken},
    ]
    await apply_objects(env.admin, [*base, _pipeline(ns, services)])

    async def failed() -> dict[str, Any] | None:
        st = await _status(env.admin, ns)
        return st if st.get("state") == "Failed" else None

    st = await wait_for(failed, timeout=60)
    assert st["states"]["broken"] == "Failed"
    assert _condition(st, "Failed")["status"] == "True"
    assert _condition(st, "Ready")["status"] == "False"

    # The missing cache appears: the service and then the pipeline become Ready.
    cache = next(o for o in base if o["kind"] == "NIMCache")
    cache = copy.deepcopy(cache)
    cache["metadata"]["name"] = "no-such-cache"
    await apply_objects(env.admin, [cache])

    async def ready() -> bool:
        return (await _status(env.admin, ns)).get("state") == "Ready"

    await wait_for(ready, timeout=90)


async def test_kubectl_wait_for_condition_ready_returns(env: Env) -> None:
    binary = shutil.which("kubectl")
    if binary is None:
        pytest.skip("kubectl is not installed")
    ns = "pipe-kubectl"
    base, spec = _base(ns)
    await apply_objects(
        env.admin, [*base, _pipeline(ns, [{"name": DEMO_NAME, "enabled": True, "spec": spec}])]
    )
    home = env.tmp / "home"
    home.mkdir(exist_ok=True)
    kubectl = Kubectl(binary, env.cluster.write_kubeconfig(env.tmp / "kubectl.kubeconfig"), home)
    result = await kubectl.run(
        "wait", "--for=condition=Ready", "nimpipeline/rag", "-n", ns, "--timeout=90s", timeout=120
    )
    assert "condition met" in result.stdout
