"""KServe NIMServices on localcluster's simulated KServe, in every deployment mode.

Each mode (by the NIMService's ``serving.kserve.io/deploymentMode``
annotation, or KServe's configured default) gets an InferenceService with
NVIDIA's annotations and labels, becomes Ready from ``PredictorReady``, and
reports the InferenceService's addresses in ``status.model``; an idle
reconcile writes nothing. NVIDIA's two KServe samples reach Ready unchanged.
"""

from __future__ import annotations

from typing import Any

import pytest

from nimctl.demo import DEMO_NAME, apply_objects
from tests.integration.controllers.test_nim_controllers import EXAMPLES_DIR, example_objects
from tests.integration.platforms.conftest import (
    KSERVE_DEFAULT_MODE,
    Env,
    annotate,
    exists,
    objects_in,
    ready,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

ISVC = "serving.kserve.io/v1beta1"
MODE_ANNOTATION = "serving.kserve.io/deploymentMode"


@pytest.mark.parametrize("mode", ["Standard", "RawDeployment", "Knative", "Serverless", None])
async def test_each_deployment_mode_reaches_ready_with_endpoints(
    env: Env, mode: str | None
) -> None:
    ns = f"k-{(mode or 'default').lower()}"
    spec: dict[str, Any] = {"inferencePlatform": "kserve"}
    if mode:
        spec["annotations"] = {MODE_ANNOTATION: mode}
    await apply_objects(env.admin, objects_in(ns, **spec))
    st = await ready(env.admin, ns)

    isvc = await env.admin.get(ISVC, "InferenceService", DEMO_NAME, ns)
    expected_mode = mode or KSERVE_DEFAULT_MODE
    annotations = isvc["metadata"]["annotations"]
    assert annotations[MODE_ANNOTATION] == expected_mode
    assert annotations["serving.kserve.io/enable-metric-aggregation"] == "true"
    assert annotations["serving.kserve.io/enable-prometheus-scraping"] == "true"
    assert isvc["metadata"]["labels"]["networking.kserve.io/visibility"] == "cluster-local"
    assert isvc["status"]["deploymentMode"] == expected_mode
    # status.model: KServe's addresses (cluster-local: url and address agree).
    assert st["model"]["clusterEndpoint"] == isvc["status"]["address"]["url"]
    assert st["model"]["externalEndpoint"] == isvc["status"]["url"]
    assert st["model"]["clusterEndpoint"].endswith(".svc.cluster.local")
    knative = expected_mode in ("Knative", "Serverless")
    predictor = f"{DEMO_NAME}-predictor" + ("-00001-deployment" if knative else "")
    assert await exists(env.admin, "apps/v1", "Deployment", predictor, ns)
    # No standalone objects: KServe runs the NIM.
    assert not await exists(env.admin, "apps/v1", "Deployment", DEMO_NAME, ns)
    assert not await exists(env.admin, "v1", "Service", DEMO_NAME, ns)

    poke = annotate(env.admin, ISVC, "InferenceService", DEMO_NAME, ns)
    assert await env.idle_reconcile_writes(ns, poke) == [], "a second reconcile writes nothing"


@pytest.mark.parametrize(
    "example", ["nimservice-kserve-standard.yaml", "nimservice-kserve-knative.yaml"]
)
async def test_nvidia_kserve_samples_reach_ready_unchanged(env: Env, example: str) -> None:
    ns = f"kx-{example.rsplit('-', maxsplit=1)[-1].removesuffix('.yaml')}"
    objs = example_objects(EXAMPLES_DIR / example, ns)
    await apply_objects(env.admin, objs)
    name = next(o["metadata"]["name"] for o in objs if o["kind"] == "NIMService")
    st = await ready(env.admin, ns, name)
    assert st["model"]["clusterEndpoint"]
    isvc = await env.admin.get(ISVC, "InferenceService", name, ns)
    if example.endswith("standard.yaml"):
        annotations = isvc["metadata"]["annotations"]
        assert annotations["serving.kserve.io/autoscalerClass"] == "hpa"
        predictor = isvc["spec"]["predictor"]
        assert (predictor["minReplicas"], predictor["maxReplicas"]) == (1, 3)
        assert (predictor["scaleMetric"], predictor["scaleTarget"]) == ("cpu", 80)
