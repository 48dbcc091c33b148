"""Our GPUCluster renders against NVIDIA's 8 render goldens, field by field.

The inputs are NVIDIA's Go fixtures (``sampleGPUCluster``, ``fullSpecGPUCluster``,
``exporterCR`` in gpucluster_render_test.go / dra_driver_test.go), written here as
YAML; the cluster serves resource.k8s.io/v1, is not OpenShift, and the operator
namespace is ``test-operator``. NVIDIA's sample is named ``gpucluster-sample``;
ours is ``gpu-cluster`` (the CRD's singleton rule), which no rendered object carries.

Every leaf of every golden object must be equal in ours, except the leaves in
``EXPECTED_DIFFERENCES`` (each with its reason); ours may not have objects or
leaves the golden lacks. The share of equal leaves is printed (``-s``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from ruamel.yaml import YAML

from api.nvidia.v1alpha1.gpucluster import GPUCluster
from platforms.gpu.gpucluster import render_states
from platforms.gpu.gpucluster_common import GPUClusterFacts

GOLDENS: Final = (
    Path(__file__).resolve().parents[3] / ".." / "shared" / "nvidia-render-goldens" / "gpucluster"
)
ENV: Final = {
    "VALIDATOR_IMAGE": "nvcr.io/nvidia/gpu-operator-validator:test",
    "DCGM_IMAGE": "nvcr.io/nvidia/cloud-native/dcgm:test",
    "DCGM_EXPORTER_IMAGE": "nvcr.io/nvidia/k8s/dcgm-exporter:test",
}
FACTS: Final = GPUClusterFacts(operator_namespace="test-operator", operator_env=ENV)

SAMPLE: Final = """
apiVersion: nvidia.com/v1alpha1
kind: GPUCluster
metadata: {name: gpu-cluster}
spec:
  draDriver:
    repository: nvcr.io/nvidia
    image: k8s-dra-driver-gpu
    version: v0.1.0
    imagePullPolicy: IfNotPresent
    featureGates: {MPSSupport: true, AdminAccess: false}
  daemonsets:
    tolerations:
    - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
    priorityClassName: system-node-critical
  hostPaths:
    driverInstallDir: /run/nvidia/driver
    kubeletRootDir: /var/lib/kubelet
"""

FULL_SPEC: Final = """
gpus:
  kubeletPlugin:
    env: [{name: GPUS_EXTRA, value: "1"}]
    resources:
      limits: {cpu: 500m, memory: 256Mi}
      requests: {cpu: 100m, memory: 128Mi}
    healthcheck: {port: 52000}
computeDomains:
  enabled: true
  controller:
    env: [{name: CD_CONTROLLER_EXTRA, value: "1"}]
  kubeletPlugin:
    env: [{name: CD_PLUGIN_EXTRA, value: "1"}]
    resources:
      limits: {cpu: 300m, memory: 512Mi}
      requests: {cpu: 200m, memory: 64Mi}
"""

_ARGS = "(our own entrypoint script: the same steps, written by us, not NVIDIA's text)"
EXPECTED_DIFFERENCES: Final[dict[str, str]] = {
    "DaemonSet/nvidia-dra-driver-kubelet-plugin:spec.template.spec.containers[0].args[0]": _ARGS,
    "DaemonSet/nvidia-dra-driver-kubelet-plugin:spec.template.spec.containers[1].args[0]": _ARGS,
}


def _yaml(text: str) -> Any:
    return YAML(typ="safe").load(text)


def _sample() -> dict[str, Any]:
    out: dict[str, Any] = _yaml(SAMPLE)
    return out


def _cr(doc: dict[str, Any]) -> GPUCluster:
    return GPUCluster.model_validate(doc)


def _case(name: str) -> GPUCluster:
    doc = _sample()
    spec = doc["spec"]
    if name == "dra-driver-passthrough-support":
        spec["draDriver"]["featureGates"]["PassthroughSupport"] = True
    elif name == "dra-driver-full-spec":
        spec["draDriver"].update(_yaml(FULL_SPEC))
    elif name in ("dcgm", "dcgm-exporter-remote-engine"):
        spec["dcgm"] = {"enabled": True}
    if name.startswith("dcgm-exporter"):
        spec["dcgmExporter"] = {"enablePodLabels": True} if name.endswith("pod-metadata") else {}
    return _cr(doc)


STATE_OF: Final = {
    "dra-driver-gpus-only": "state-dra-driver",
    "dra-driver-passthrough-support": "state-dra-driver",
    "dra-driver-full-spec": "state-dra-driver",
    "dra-validation": "state-dra-validation",
    "dcgm": "state-dcgm",
    "dcgm-exporter-embedded": "state-dcgm-exporter",
    "dcgm-exporter-pod-metadata": "state-dcgm-exporter",
    "dcgm-exporter-remote-engine": "state-dcgm-exporter",
}


def _leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, f"{path}[{i}]")
    else:
        yield path, value


def _ours(case: str) -> list[dict[str, Any]]:
    states = dict(render_states(_case(case), FACTS))
    return copy.deepcopy(states[STATE_OF[case]])


def _golden(case: str) -> list[dict[str, Any]]:
    path = GOLDENS / f"gpucluster-{case}.yaml"
    if not path.exists():
        pytest.skip(f"NVIDIA's render goldens are not at {GOLDENS}")
    return [d for d in YAML(typ="safe").load_all(path.read_text()) if d]


def _key(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def compare(case: str) -> tuple[int, int, list[str]]:
    """(equal leaves, golden leaves, unexpected differences)."""
    golden, ours = _golden(case), _ours(case)
    by_key = {_key(o): o for o in ours}
    problems: list[str] = []
    assert [_key(o) for o in golden] == [_key(o) for o in ours], "objects or their order differ"
    equal = total = 0
    for theirs in golden:
        key = _key(theirs)
        mine = dict(_leaves(by_key[key]))
        their_leaves = dict(_leaves(theirs))
        for path, value in their_leaves.items():
            total += 1
            if mine.get(path, ...) == value:
                equal += 1
            elif f"{key}:{path}" not in EXPECTED_DIFFERENCES:
                problems.append(
                    f"{key}:{path}: NVIDIA {value!r}, ours {mine.get(path, '<absent>')!r}"
                )
        for path in sorted(set(mine) - set(their_leaves)):
            problems.append(f"{key}:{path}: only ours ({mine[path]!r})")
    return equal, total, problems


@pytest.mark.parametrize("case", sorted(STATE_OF))
def test_state_matches_nvidias_golden_field_by_field(case: str) -> None:
    equal, total, problems = compare(case)
    print(f"gpucluster-{case}: {equal}/{total} leaves equal ({equal / total:.1%})")
    assert problems == []


def test_the_expected_differences_are_still_differences() -> None:
    _golden("dra-driver-full-spec")
    seen: set[str] = set()
    for case in STATE_OF:
        golden, ours = _golden(case), {_key(o): o for o in _ours(case)}
        for theirs in golden:
            key = _key(theirs)
            mine = dict(_leaves(ours[key]))
            for path, value in _leaves(theirs):
                if f"{key}:{path}" in EXPECTED_DIFFERENCES and mine.get(path) != value:
                    seen.add(f"{key}:{path}")
    assert seen == set(EXPECTED_DIFFERENCES)


def test_overall_share_of_equal_leaves() -> None:
    _golden("dcgm")
    equal = total = 0
    for case in STATE_OF:
        e, t, _ = compare(case)
        equal, total = equal + e, total + t
    print(f"all 8 goldens: {equal}/{total} leaves equal ({equal / total:.2%})")
    assert equal / total > 0.99
