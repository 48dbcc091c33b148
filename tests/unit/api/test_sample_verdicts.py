"""The verdict NVIDIA's CRDs give a sample, decided from the facts of NVIDIA's CRDs:
stale NVIDIA samples are refused for the field NVIDIA's current CRD lacks, current
ones and every docs example are accepted."""

from __future__ import annotations

import copy

import pytest

from tests.unit.api.sample_verdicts import Sample, docs_samples, nvidia_samples, nvidia_verdict

NVIDIA = {s.id: s for s in nvidia_samples()}


@pytest.mark.parametrize(
    ("sample_id", "verdict"),
    [
        (
            "nvidia/nim-operator_apps_v1alpha1_nimcache.yaml#0",
            'unknown field "spec.source.ngc.model.autoDetect"',
        ),
        (
            "nvidia/nim-operator_apps_v1alpha1_nemoguardrails.yaml#0",
            'no matches for kind "NemoGuardrails" in apps.nvidia.com/v1alpha1',
        ),
        (
            "nvidia/nim-operator_apps_v1alpha1_nemoevaluator.yaml#0",
            "spec.entitystore: Required value",
        ),
        ("nvidia/gpu-operator_nvidia_v1alpha1_nvidiadriver.yaml#0", 'unknown field "spec.foo"'),
        (
            "nvidia/nim-operator_apps_v1alpha1_nimservice.yaml",
            "error parsing the file as YAML (kubectl refuses it before sending)",
        ),
        ("nvidia/nim-operator_nim_serving_advanced_epp_nimservice.yaml#0", None),
        ("nvidia/nim-operator_apps_v1alpha1_nimpipeline.yaml#0", None),
    ],
)
def test_nvidia_samples_get_the_verdict_of_nvidias_crd(sample_id: str, verdict: str | None) -> None:
    assert nvidia_verdict(NVIDIA[sample_id]) == verdict


def test_every_docs_example_is_accepted_by_nvidias_crds() -> None:
    samples = docs_samples()
    assert len(samples) >= 40
    assert {s.id: nvidia_verdict(s) for s in samples} == {s.id: None for s in samples}


def _epp_sample() -> Sample:
    return copy.deepcopy(NVIDIA["nvidia/nim-operator_nim_serving_advanced_epp_nimservice.yaml#0"])


@pytest.mark.parametrize(
    ("change", "verdict"),
    [
        (
            {"inferencePlatform": "kubeflow"},
            "spec.inferencePlatform: Unsupported value: 'kubeflow'",
        ),
        ({"replicas": "2"}, "spec.replicas: must be of type integer"),
        ({"image": {"repository": "r"}}, "spec.image.tag: Required value"),
        ({"labels": {"a": 1}}, "spec.labels{}: must be of type string"),
        ({"replicas": None}, None),
        ({"replicas": -1}, "spec.replicas: should be greater than or equal to 0"),
        ({"authSecret": ""}, None),
    ],
)
def test_enums_types_required_fields_maps_and_bounds_are_checked(
    change: dict[str, object], verdict: str | None
) -> None:
    sample = _epp_sample()
    sample.obj["spec"].update(change)
    assert nvidia_verdict(sample) == verdict


def test_unknown_fields_inside_the_endpoint_picker_config_are_kept() -> None:
    sample = _epp_sample()
    config = sample.obj["spec"]["expose"]["router"]["eppConfig"]["config"]
    config["somethingNew"] = {"x": 1}
    assert nvidia_verdict(sample) is None
    config["plugins"][0]["parameters"] = {"hashBlockSize": 5}
    assert nvidia_verdict(sample) == (
        "spec.expose.router.eppConfig.config.plugins[].parameters: must be of type string"
    )


def test_patterns_are_searched_as_kubernetes_does() -> None:
    sample = _epp_sample()
    router = sample.obj["spec"]["expose"]["router"]
    router["hostDomainName"] = "Demo.Example.COM"
    verdict = nvidia_verdict(sample)
    assert verdict is not None
    assert verdict.startswith("spec.expose.router.hostDomainName: should match")
