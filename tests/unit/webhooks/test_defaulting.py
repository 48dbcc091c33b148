"""The defaulting webhook: which defaults, when, and that a second admission changes nothing."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from nimctl_runtime.meta import Obj
from nimctl_runtime.webhook import WebhookServer
from nimctl_runtime.webhook.admission import AdmissionRequest
from webhooks.defaulting import (
    NIMCACHE_DEFAULTS,
    NIMSERVICE_DEFAULTS,
    DefaultingWebhook,
    apply_defaults,
)
from webhooks.facts import StaticClusterFacts
from webhooks.setup import mutating_webhook_configuration, register


def nimservice(**spec: Any) -> Obj:
    base: Obj = {"image": {"repository": "nvcr.io/nim/x", "tag": "1"}, "authSecret": "ngc"}
    base.update(spec)
    return {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMService",
            "metadata": {"name": "llm", "namespace": "ns"}, "spec": base}  # fmt: skip


def nimcache(**spec: Any) -> Obj:
    base: Obj = {"source": {"ngc": {"modelPuller": "nvcr.io/nim/x:1", "authSecret": "ngc"}}}
    base.update(spec)
    return {"apiVersion": "apps.nvidia.com/v1alpha1", "kind": "NIMCache",
            "metadata": {"name": "c", "namespace": "ns"}, "spec": base}  # fmt: skip


MULTI = {"parallelism": {"pipeline": 2, "tensor": 8}}
SCALE = {"enabled": True, "hpa": {"maxReplicas": 3}}

CREATE_CASES = [
    ("plain service", nimservice(), {"userID": 1000, "groupID": 2000, "replicas": 1}),
    ("autoscaled: no replicas", nimservice(scale=SCALE), {"userID": 1000, "groupID": 2000}),
    ("user values kept", nimservice(userID=7, groupID=8, replicas=3), {}),
    ("multi-node defaults to MPI", nimservice(replicas=1, multiNode=MULTI),
     {"userID": 1000, "groupID": 2000, "multiNode": {**MULTI, "mpi": {"mpiStartTimeout": 300}}}),
    ("ray is not given MPI", nimservice(replicas=1, multiNode={**MULTI, "ray": {}}),
     {"userID": 1000, "groupID": 2000}),
]  # fmt: skip


@pytest.mark.parametrize(("case", "obj", "added"), CREATE_CASES, ids=[c[0] for c in CREATE_CASES])
def test_nimservice_defaults_on_create(case: str, obj: Obj, added: Obj) -> None:
    out = apply_defaults(obj, NIMSERVICE_DEFAULTS)
    assert out["spec"] == {**obj["spec"], **added}
    assert apply_defaults(out, NIMSERVICE_DEFAULTS) == out, "a second admission changes nothing"


def test_nimcache_defaults_on_create() -> None:
    out = apply_defaults(nimcache(), NIMCACHE_DEFAULTS)
    assert out["spec"]["nodeSelector"] == {"feature.node.kubernetes.io/pci-10de.present": "true"}
    assert (out["spec"]["userID"], out["spec"]["groupID"]) == (1000, 2000)
    mine = apply_defaults(nimcache(nodeSelector={"pool": "a100"}), NIMCACHE_DEFAULTS)
    assert mine["spec"]["nodeSelector"] == {"pool": "a100"}


def test_update_never_adds_a_default_the_old_object_lacked() -> None:
    # An object made before the webhook existed: its immutable spec stays as it is.
    old = nimcache()
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"team": "a"}
    assert apply_defaults(new, NIMCACHE_DEFAULTS, old) == new
    old_svc = nimservice(replicas=1, multiNode=MULTI)
    assert apply_defaults(old_svc, NIMSERVICE_DEFAULTS, old_svc) == old_svc


def test_update_puts_back_a_default_the_user_dropped() -> None:
    old = apply_defaults(nimservice(multiNode=MULTI), NIMSERVICE_DEFAULTS)
    replaced = nimservice(multiNode=MULTI)  # `kubectl replace` of the original manifest
    assert apply_defaults(replaced, NIMSERVICE_DEFAULTS, old)["spec"] == old["spec"]


def request(operation: str, obj: Obj, old: Obj | None = None) -> AdmissionRequest:
    return AdmissionRequest(
        uid="u", api_version="admission.k8s.io/v1", kind={"kind": obj["kind"]}, resource={},
        sub_resource="", name="llm", namespace="ns", operation=operation, user_info={},
        object=obj, old_object=old, dry_run=False, raw={},
    )  # fmt: skip


async def test_the_handler_answers_with_a_json_patch() -> None:
    hook = DefaultingWebhook(NIMSERVICE_DEFAULTS)
    obj = nimservice()
    resp = await hook.handle(request("CREATE", obj))
    assert resp.allowed and resp.patch
    patched = jsonpatch.apply_patch(obj, resp.patch)
    assert patched["spec"]["replicas"] == 1
    again = await hook.handle(request("CREATE", patched))
    assert again.allowed and again.patch is None
    assert (await hook.handle(request("DELETE", obj))).patch is None


def test_registration_and_configuration(tmp_path: Path) -> None:
    server = WebhookServer(cert_dir=tmp_path, port=0)
    register(server, StaticClusterFacts(), defaulting=True)
    assert "/mutate-apps-nvidia-com-v1alpha1-nimservice" in server.paths
    assert "/mutate-apps-nvidia-com-v1alpha1-nimcache" in server.paths
    off = WebhookServer(cert_dir=tmp_path, port=0)
    register(off, StaticClusterFacts(), defaulting=False)
    assert not [p for p in off.paths if p.startswith("/mutate-")]
    config = mutating_webhook_configuration(b"ca", url="https://127.0.0.1:9443")
    assert config["kind"] == "MutatingWebhookConfiguration"
    hooks = {h["name"]: h for h in config["webhooks"]}
    assert set(hooks) == {"mnimservice-v1alpha1.kb.io", "mnimcache-v1alpha1.kb.io"}
    nims = hooks["mnimservice-v1alpha1.kb.io"]
    assert nims["clientConfig"]["url"].endswith("/mutate-apps-nvidia-com-v1alpha1-nimservice")
    assert nims["rules"][0]["operations"] == ["CREATE", "UPDATE"]
    assert nims["reinvocationPolicy"] == "Never" and nims["sideEffects"] == "None"
