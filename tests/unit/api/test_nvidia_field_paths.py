"""Our generated CRDs against the field paths of NVIDIA's CRDs
(tests/fixtures/nvidia_crd_paths): per kind at least 99% of NVIDIA's paths exist
in ours, every path we lack is in a reviewed allowlist with its reason, and on
the paths both have, the type, required-ness, default and enum agree (or the
difference is allowlisted)."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from api import k8s
from api.crdgen import generate_crds
from tests.unit.api.crd_paths import crd_facts, parse_facts

FIXTURES: Final = Path(__file__).resolve().parents[2] / "fixtures" / "nvidia_crd_paths"
KINDS: Final = (
    "NIMService",
    "NIMCache",
    "NIMPipeline",
    "NIMBuild",
    "NemoCustomizer",
    "NemoDatastore",
    "NemoEntitystore",
    "NemoEvaluator",
    "NemoGuardrail",
    "ClusterPolicy",
    "NVIDIADriver",
    "GPUCluster",
)
MIN_COVERAGE: Final = 0.99

# NVIDIA paths our CRDs intentionally lack: kind -> {path: reason}. Review each
# entry; the test fails on a missing path not listed here and on a stale entry.
ALLOWED_MISSING: Final[dict[str, dict[str, str]]] = {kind: {} for kind in KINDS}

# Paths both CRDs have whose facts (type, required, default, enum) intentionally
# differ: kind -> {path: reason}.
ALLOWED_DIFFERENT: Final[dict[str, dict[str, str]]] = {kind: {} for kind in KINDS}
_SHARED_TYPE = (
    "ClusterPolicy's DCGMExporterSpec, shared as in NVIDIA's Go; NVIDIA's GPUCluster CRD "
    "was generated with another Prometheus Operator RelabelConfig than its ClusterPolicy CRD"
)
ALLOWED_DIFFERENT["GPUCluster"] = {
    "spec.dcgmExporter.serviceMonitor.relabelings[].modulus": _SHARED_TYPE,
    "spec.dcgmExporter.serviceMonitor.relabelings[].sourceLabels[]": _SHARED_TYPE,
}

OURS: Final = {c["spec"]["names"]["kind"]: crd_facts(c) for c in generate_crds()}


def _nvidia(kind: str) -> dict[str, str]:
    return parse_facts((FIXTURES / f"{kind}.txt").read_text(encoding="utf-8"))


def test_every_kind_has_a_fixture_and_a_readme_naming_its_source() -> None:
    assert sorted(p.stem for p in FIXTURES.glob("*.txt")) == sorted(KINDS)
    readme = (FIXTURES / "README.md").read_text(encoding="utf-8")
    for source in ("NVIDIA/k8s-nim-operator", "NVIDIA/gpu-operator", "crd_paths"):
        assert source in readme


@pytest.mark.parametrize("kind", KINDS)
def test_our_crd_covers_nvidias_field_paths(kind: str) -> None:
    nvidia, ours = _nvidia(kind), OURS[kind]
    missing = sorted(set(nvidia) - set(ours))
    coverage = 1 - len(missing) / len(nvidia)
    print(f"{kind}: {coverage:.2%} of {len(nvidia)} NVIDIA paths; missing: {missing}")
    assert coverage >= MIN_COVERAGE, f"{kind} covers {coverage:.2%}; missing {missing}"
    unexplained = [p for p in missing if p not in ALLOWED_MISSING[kind]]
    assert unexplained == [], f"{kind} lacks NVIDIA paths: {unexplained}"
    stale = sorted(set(ALLOWED_MISSING[kind]) - set(missing))
    assert stale == [], f"{kind}: allowlisted paths we now have: {stale}"


@pytest.mark.parametrize("kind", KINDS)
def test_shared_paths_have_nvidias_type_required_default_and_enum(kind: str) -> None:
    nvidia, ours = _nvidia(kind), OURS[kind]
    differing = {
        path: (nvidia[path], ours[path])
        for path in sorted(set(nvidia) & set(ours))
        if nvidia[path] != ours[path] and path not in ALLOWED_DIFFERENT[kind]
    }
    assert differing == {}, f"{kind}: facts differ (NVIDIA, ours): {differing}"


def test_core_types_of_an_older_kubernetes_would_be_caught() -> None:
    # The comparison is what catches core types generated from the wrong version:
    # NIMService's env from Kubernetes v1.32 lacks NVIDIA's fileKeyRef paths.
    env = k8s.structural_schema("io.k8s.api.core.v1.EnvVar", "v1.32.0")
    crd = {
        "spec": {
            "versions": [
                {
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "properties": {
                                "spec": {"properties": {"env": {"type": "array", "items": env}}}
                            }
                        }
                    },
                }
            ]
        }
    }
    old = crd_facts(crd)
    nvidia_env = {p for p in _nvidia("NIMService") if p.startswith("spec.env")}
    lacking = sorted(nvidia_env - set(old))
    assert "spec.env[].valueFrom.fileKeyRef.volumeName" in lacking
    assert old["spec.env[].valueFrom.configMapKeyRef.name"] == 'string\tdefault=""'


def test_defaulted_required_fields_are_listed_as_required_and_no_marker_leaks() -> None:
    # controller-gen lists a Go field without omitempty in `required` even when it
    # has a default (NVIDIADriver's driverType); the marker that asks for it is ours
    # alone and must not reach a CRD (kube-apiserver refuses unknown x- keys).
    crds = {c["spec"]["names"]["kind"]: c for c in generate_crds()}
    spec = crds["NVIDIADriver"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    driver = spec["properties"]["spec"]
    assert {"driverType", "image"} <= set(driver["required"])
    assert driver["properties"]["driverType"]["default"] == "gpu"
    assert "x-nimctl-" not in repr(list(crds.values()))
