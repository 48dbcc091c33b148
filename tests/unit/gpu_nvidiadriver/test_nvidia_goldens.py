"""Our NVIDIADriver render against NVIDIA's own render goldens, leaf by leaf.

Each case's input (``../shared/nvidia-render-goldens/nvidiadriver/inputs/<case>``)
is rendered as ``nimctl render -f nvidiadriver.yaml --nodes nodes.yaml`` would
(namespace ``test-operator``, as NVIDIA's test runner sets it) and compared
with NVIDIA's ``driver-<case>.yaml`` (see ``goldens.py`` for how). Every
difference left is listed in ``ALLOWED`` with its reason; a new difference
fails, and so does an allow-list entry nothing matches any more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from platforms.gpu import nvidiadriver_daemonset
from platforms.gpu.nvidiadriver_digest import DriverInstallState, config_digest
from tests.unit.gpu_nvidiadriver import goldens

pytestmark = pytest.mark.skipif(
    not goldens.cases(),
    reason=f"NVIDIA's render goldens are not here ({goldens.GOLDENS} is absent)",
)

DS = r"DaemonSet/[a-z0-9.-]+?\.spec\.template\.spec\."
ADDITIONAL = ("test-cm", "test-host-path", "test-host-path-ro")
NO_KERNEL_MODULE_TYPE = [
    "driver-additional-configs",
    "driver-gdrcopy",
    "driver-gdrcopy-openshift",
    "driver-gds",
    "driver-hostnetwork",
    "driver-minimal",
    "driver-openshift-drivertoolkit",
    "driver-precompiled",
    "driver-rdma",
    "driver-rdma-hostmofed",
    "driver-secret-env",
    "driver-vgpu-host-manager",
    "driver-vgpu-host-manager-openshift",
    "driver-vgpu-licensing",
    "driver-vgpu-licensing-secret",
]


@dataclass(frozen=True)
class Allowed:
    """Differences a case may show: leaves matching ``leaf`` (a regex), and why."""

    cases: tuple[str, ...] | None
    leaf: str
    reason: str

    def matches(self, case: str, path: str) -> bool:
        return (self.cases is None or case in self.cases) and re.fullmatch(
            self.leaf, path
        ) is not None


ALLOWED: tuple[Allowed, ...] = (
    Allowed(
        None,
        r"ConfigMap/nvidia-driver-startup-probe\.data\.startup-probe\.sh",
        "our own startup-probe script (NVIDIA's scripts are not copied): the same checks and "
        "the same YAML `KEY: value` ready file (test_startup_probe_script runs it)",
    ),
    Allowed(
        None,
        DS + r"(containers|initContainers)\[name=[a-z0-9-]+\]\.env\[name=DRIVER_CONFIG_DIGEST\]"
        r"\.value",
        "NVIDIA's fixtures hash HostRoot '' and kernelModuleType ''; a real controller hashes the "
        "host root '/' and the CRD default 'auto'. With the fixtures' inputs our digest is "
        "NVIDIA's (test_digest_is_nvidias_for_the_fixture_inputs)",
    ),
    Allowed(
        None,
        DS + r"nodeSelector\.(nvidia\.com/gpu\.present|nvidia\.com/gpu-operator\.driver\.owner|"
        r"feature\.node\.kubernetes\.io/system-os_release\.(ID|VERSION_ID))",
        "NVIDIA's fixtures give no node pool; its controller's getNodePools adds the pool's "
        "selector (GPU present, owner, OS ID and version), as we do",
    ),
    Allowed(
        tuple(NO_KERNEL_MODULE_TYPE),
        DS + r"containers\[name=nvidia-driver-ctr\]\.env(\[name=KERNEL_MODULE_TYPE\]\.(name|value)"
        r"|\.<order>)",
        "NVIDIA's fixtures leave kernelModuleType empty; the CRD defaults it to 'auto', which "
        "NVIDIA's template renders as KERNEL_MODULE_TYPE=auto",
    ),
    Allowed(
        None,
        DS
        + r"(volumes|containers\[name=[a-z-]+\]\.volumeMounts)(\[name=("
        + "|".join(ADDITIONAL)
        + r")\]\..*|\.<order>)",
        "NVIDIA's fixtures inject sample additionalConfigs (test-cm, test-host-path, "
        "test-host-path-ro) no NVIDIADriver field produces (NOTES.md)",
    ),
    Allowed(
        ("driver-gds", "driver-gdrcopy", "driver-secret-env"),
        DS + r"containers\[name=nvidia-(fs|gdrcopy)-ctr\]\.image",
        "NVIDIA's fixtures give the GDS/GDRCopy image path directly; its controller "
        "(GetImagePath) appends -<osTag>, as we do (NOTES.md)",
    ),
    Allowed(
        ("driver-vgpu-licensing", "driver-vgpu-licensing-secret"),
        DS + r"containers\[name=nvidia-driver-ctr\]\.volumeMounts\[mountPath=/drivers/"
        r"(gridd\.conf|ClientConfigToken/client_configuration_token\.tok)\]\.readOnly",
        "NVIDIA's fixtures inject the licensing mounts without readOnly; its controller "
        "(getDriverAdditionalConfigs) marks them readOnly, as we do (NOTES.md)",
    ),
)


def _compare(case: str) -> goldens.Comparison:
    theirs, mine = goldens.golden(case), goldens.ours(case)
    return goldens.compare(goldens.renamed(theirs, goldens.injected_names(theirs, mine)), mine)


@pytest.mark.parametrize("case", goldens.cases())
def test_render_matches_nvidias_golden(case: str) -> None:
    result = _compare(case)
    unexplained = {
        path: values
        for path, values in result.differences.items()
        if not any(a.matches(case, path) for a in ALLOWED)
    }
    assert not unexplained, "\n".join(
        f"{path}: NVIDIA {theirs!r} != ours {ours!r}"
        for path, (theirs, ours) in unexplained.items()
    )


def test_every_allowed_difference_still_occurs() -> None:
    seen = {a.leaf: False for a in ALLOWED}
    for case in goldens.cases():
        for path in _compare(case).differences:
            for a in ALLOWED:
                if a.matches(case, path):
                    seen[a.leaf] = True
    assert all(seen.values()), [leaf for leaf, hit in seen.items() if not hit]


def test_objects_are_nvidias() -> None:
    """Same objects (kind and name) in every case."""
    for case in goldens.cases():
        theirs, mine = goldens.golden(case), goldens.ours(case)
        names = goldens.injected_names(theirs, mine)
        want = {(o["kind"], goldens.renamed(o["metadata"]["name"], names)) for o in theirs}
        assert {(o["kind"], o["metadata"]["name"]) for o in mine} == want, case


def test_match_figures(capsys: pytest.CaptureFixture[str]) -> None:
    """Equal leaves over all cases (printed). The rest are the ALLOWED themes, most of them
    leaves NVIDIA's fixtures inject (61.6% before nimctl rendered NVIDIA's NVIDIADriver
    state; 92.8% after)."""
    total = equal = 0
    for case in goldens.cases():
        result = _compare(case)
        total += result.total
        equal += result.equal
        print(f"{case}: {result.equal}/{result.total} ({result.percent:.1f}%)")
    print(f"all cases: {equal}/{total} ({100.0 * equal / total:.1f}%)")
    assert equal / total >= 0.925


def _golden_digest(case: str) -> str:
    ds = next(o for o in goldens.golden(case) if o["kind"] == "DaemonSet")
    ctr = ds["spec"]["template"]["spec"]["containers"][0]
    return str(next(e["value"] for e in ctr["env"] if e["name"] == "DRIVER_CONFIG_DIGEST"))


@pytest.mark.parametrize(
    "case",
    [
        c
        for c in goldens.cases()
        # the fixtures inject additionalConfigs / images / names these inputs cannot express
        if c
        not in {
            "driver-additional-configs",
            "driver-gdrcopy",
            "driver-gds",
            "driver-rdma",
            "driver-rdma-hostmofed",
            "driver-gdrcopy-openshift",
            "driver-openshift-drivertoolkit",
            "driver-vgpu-host-manager-openshift",
            "driver-vgpu-licensing",
            "driver-secret-env",
            # injected licensing mounts without readOnly (the digest hashes ReadOnly)
            "driver-vgpu-licensing-secret",
            # NOT reproduced yet: NVIDIA's fixture digest 2311915915 differs from ours with the
            # fixture's visible inputs; the field behind it is not found (see docs/differences.md)
            "driver-full-spec",
        }
    ],
)
def test_digest_is_nvidias_for_the_fixture_inputs(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the fixtures' HostRoot '' and (unset) kernelModuleType, our digest is NVIDIA's."""

    def fixture_digest(state: DriverInstallState) -> str:
        state.HostRoot = ""
        if case in NO_KERNEL_MODULE_TYPE:
            state.KernelModuleType = ""
        return config_digest(state)

    monkeypatch.setattr(nvidiadriver_daemonset, "config_digest", fixture_digest)
    ds = next(o for o in goldens.ours(case) if o["kind"] == "DaemonSet")
    ctr = ds["spec"]["template"]["spec"]["containers"][0]
    ours = next(e["value"] for e in ctr["env"] if e["name"] == "DRIVER_CONFIG_DIGEST")
    assert ours == _golden_digest(case)
