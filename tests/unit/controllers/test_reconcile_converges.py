"""Property: reconciling spec A, then spec B, leaves exactly render(B) owned by the NIMService.

Specs are drawn from the NIMService examples in docs/examples and variations
of them (ingress, gateway routes, EPP, autoscaling, metrics, multi-node,
KServe). After the second reconcile, the objects the NIMService controls are
exactly the objects ``render(B)`` returns, by (apiVersion, kind, name):
nothing stale, nothing missing. PersistentVolumeClaims are the one deliberate
exception (pruning one would delete the model store): they are kept.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from api.apps.v1alpha1.nimservice import NIMService
from api.serialize import load_all
from controllers.nimservice import NIMServiceReconciler
from nimctl_runtime.meta import is_controlled_by
from nimctl_runtime.reconcile import Request
from platforms.capabilities import Capabilities
from platforms.nimservice import NIMServiceContract
from platforms.objects import as_dict
from platforms.parsing import InvalidResource, parse
from platforms.standalone.errors import RenderError
from tests.unit.controllers.fakes import FakeAPI, FakeRecorder

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"
API = "apps.nvidia.com/v1alpha1"
NS = "nim-service"
NAME = "llm"


def _example_specs() -> list[dict[str, Any]]:
    specs = []
    for path in sorted(EXAMPLES.glob("nim*.yaml")):
        for model in load_all(path.read_text()):
            doc = as_dict(model)
            if doc.get("kind") != "NIMService":
                continue
            spec = doc["spec"]
            if "nimCache" not in (spec.get("storage") or {}):
                continue  # PVC-created or host-path stores: covered by the PVC rule below
            if (spec.get("draResources") or spec.get("multiNode", {}).get("computeDomain")):
                continue
            spec = copy.deepcopy(spec)
            spec["storage"] = {"nimCache": {"name": "cache"}}
            specs.append(spec)
    return specs


EXAMPLE_SPECS = _example_specs()

VARIATIONS: dict[str, dict[str, Any]] = {
    "ingress": {"expose": {"service": {"port": 8000}, "ingress": {"enabled": True, "spec": {
        "ingressClassName": "nginx",
        "rules": [{"host": "llm.example.com", "http": {"paths": [{"path": "/", "pathType":
            "Prefix", "backend": {"service": {"name": NAME, "port": {"number": 8000}}}}]}}],
    }}}},
    "router-ingress": {"expose": {"service": {"port": 8000}, "router": {
        "hostDomainName": "example.com", "ingress": {"ingressClass": "nginx"}}}},
    "gateway": {"expose": {"service": {"port": 8000, "grpcPort": 8001}, "router": {
        "hostDomainName": "example.com",
        "gateway": {"namespace": "gw", "name": "gw", "httpRoutesEnabled": True,
                    "grpcRoutesEnabled": True}}}},
    "epp": {"expose": {"service": {"port": 8000}, "router": {
        "hostDomainName": "example.com",
        "gateway": {"namespace": "gw", "name": "gw", "httpRoutesEnabled": True},
        "eppConfig": {"containerSpec": {"name": "epp", "image": {
            "repository": "registry.k8s.io/gateway-api-inference-extension/epp",
            "tag": "v1.0.0"}}}}}},
    "hpa": {"scale": {"enabled": True, "hpa": {"minReplicas": 1, "maxReplicas": 3}}},
    "metrics": {"metrics": {"enabled": True, "serviceMonitor": {}}},
    "multinode": {"multiNode": {"backendType": "lws",
                                "parallelism": {"pipeline": 2, "tensor": 1}, "ray": {}}},
    "kserve": {"inferencePlatform": "kserve",
               "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"}},
    "plain": {},
}


def _spec(base: int, variation: str) -> dict[str, Any]:
    spec = copy.deepcopy(EXAMPLE_SPECS[base])
    for key in ("expose", "scale", "metrics", "multiNode", "inferencePlatform"):
        spec.pop(key, None)
    spec["expose"] = {"service": {"port": 8000}}
    spec.update(copy.deepcopy(VARIATIONS[variation]))
    return spec


def _nimcache() -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "NIMCache",
        "metadata": {"name": "cache", "namespace": NS},
        "spec": {"source": {"ngc": {"authSecret": "ngc", "modelPuller": "nvcr.io/nim/x:1"}},
                 "storage": {"pvc": {"create": True, "size": "50Gi"}}},
        "status": {"state": "Ready", "pvc": "cache-pvc",
                   "profiles": [{"name": "p", "model": "m", "release": "1", "config": {}}]},
    }


def _owned(api: FakeAPI, uid: str) -> set[tuple[str, str, str]]:
    return {
        (av, kind, name)
        for (av, kind, _, name), obj in api.objects.items()
        if is_controlled_by(obj, uid) and kind != "PersistentVolumeClaim"
    }


async def _reconcile_to(api: FakeAPI, r: NIMServiceReconciler, spec: dict[str, Any]) -> bool:
    """Reconcile ``spec``; False when the renderer refuses it (covered by render tests)."""
    live = api.objects[(API, "NIMService", NS, NAME)]
    live["spec"] = copy.deepcopy(spec)
    live["metadata"]["generation"] = live["metadata"].get("generation", 0) + 1
    try:
        parse(NIMService, live)
    except InvalidResource:
        return False  # a spec the API server refuses (CRD validation rules)
    try:
        await r.reconcile(Request(NS, NAME))
    except RenderError:
        return False
    return True


def test_the_examples_are_drawn_from() -> None:
    assert len(EXAMPLE_SPECS) >= 10


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    a=st.tuples(st.integers(0, len(EXAMPLE_SPECS) - 1), st.sampled_from(sorted(VARIATIONS))),
    b=st.tuples(st.integers(0, len(EXAMPLE_SPECS) - 1), st.sampled_from(sorted(VARIATIONS))),
)
async def test_reconcile_a_then_b_leaves_exactly_render_b(
    a: tuple[int, str], b: tuple[int, str]
) -> None:
    api = FakeAPI()
    api.put(_nimcache())
    svc = api.put({"apiVersion": API, "kind": "NIMService",
                   "metadata": {"name": NAME, "namespace": NS, "generation": 0}, "spec": {}})
    uid = svc["metadata"]["uid"]
    caps = Capabilities.everything()
    r = NIMServiceReconciler(
        cache=api, client=api, api_reader=api, recorder=FakeRecorder(), capabilities=caps
    )
    spec_a, spec_b = _spec(*a), _spec(*b)
    await _reconcile_to(api, r, spec_a)
    assume(await _reconcile_to(api, r, spec_b))

    live = api.objects[(API, "NIMService", NS, NAME)]
    cr = r.kind.parse(live)
    ctx = await r.kind.gather(cr, live, api)
    desired = NIMServiceContract().render(cr, ctx)
    expected = {
        (o["apiVersion"], o["kind"], o["metadata"]["name"])
        for o in desired
        if o["kind"] != "PersistentVolumeClaim"
    }
    assert _owned(api, uid) == expected, (a, b)


async def test_pvcs_are_kept_when_a_spec_stops_rendering_them() -> None:
    api = FakeAPI()
    svc = api.put({"apiVersion": API, "kind": "NIMService",
                   "metadata": {"name": NAME, "namespace": NS, "generation": 1},
                   "spec": {"image": {"repository": "nvcr.io/nim/x", "tag": "1"},
                            "authSecret": "ngc", "replicas": 1,
                            "storage": {"pvc": {"create": True, "size": "10Gi",
                                                "volumeAccessMode": "ReadWriteOnce"}},
                            "expose": {"service": {"port": 8000}}}})
    r = NIMServiceReconciler(cache=api, client=api, api_reader=api, recorder=FakeRecorder())
    await r.reconcile(Request(NS, NAME))
    pvcs = [k for k in api.objects if k[1] == "PersistentVolumeClaim"]
    assert len(pvcs) == 1
    api.put(_nimcache())
    assert await _reconcile_to(
        api, r, {**svc["spec"], "storage": {"nimCache": {"name": "cache"}}}
    )
    assert [k for k in api.objects if k[1] == "PersistentVolumeClaim"] == pvcs
    assert api.obj("apps/v1", "Deployment", NAME, NS) is not None

