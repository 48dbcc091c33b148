"""Our NVIDIADriver render against NVIDIA's own render goldens, leaf by leaf.

Each case's input (``../shared/nvidia-render-goldens/nvidiadriver/inputs/<case>``)
is rendered as ``nimctl render -f nvidiadriver.yaml --nodes nodes.yaml`` would
(namespace ``test-operator``, as NVIDIA's test runner sets it) and compared
with NVIDIA's ``driver-<case>.yaml`` (see ``goldens.py`` for how). Every
difference left is listed in ``ALLOWED`` with its reason; a new difference
fails, and so does an allow-list entry nothing matches any more.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from platforms.gpu import nvidiadriver_daemonset
from platforms.gpu.nvidiadriver_digest import (
    DriverInstallState,
    VolumeConfig,
    config_digest,
    volume_mounts,
)
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
        "NVIDIA's fixtures hash HostRoot '' and kernelModuleType '' (and inject names, images and "
        "volumes); a real controller hashes the host root '/' and the CRD default 'auto'. With "
        "each fixture's inputs our digest is NVIDIA's, in all 16 cases "
        "(test_digest_is_nvidias_for_the_fixture_inputs)",
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


def _no_os_suffix(image: str) -> str:
    return image.removesuffix("-ubuntu22.04")


def _mounts_not_read_only(state: DriverInstallState) -> None:
    state.AdditionalVolumeMounts = [
        dataclasses.replace(m, ReadOnly=False) for m in state.AdditionalVolumeMounts
    ]


def _no_driver_type(state: DriverInstallState) -> None:
    state.DriverType = ""


def _gds_gdrcopy_images_without_os(state: DriverInstallState) -> None:
    state.GDSImage = _no_os_suffix(state.GDSImage)
    state.GDRCopyImage = _no_os_suffix(state.GDRCopyImage)


def _sample_additional_configs(state: DriverInstallState) -> None:
    """getSampleAdditionalConfigs(): three volumes the fixtures inject (NOTES.md)."""
    state.AdditionalVolumeMounts = volume_mounts(
        [
            *(dataclasses.asdict(m) for m in state.AdditionalVolumeMounts),
            {"name": "test-cm", "mountPath": "/opt/config/test-file", "subPath": "test-file",
             "readOnly": True},
            {"name": "test-host-path", "mountPath": "/opt/config/test-host-path"},
            {"name": "test-host-path-ro", "mountPath": "/opt/config/test-host-path-ro",
             "readOnly": True},
        ]
    )  # fmt: skip
    state.AdditionalVolumes = sorted(
        [
            *state.AdditionalVolumes,
            VolumeConfig("test-cm", "test-cm"),
            VolumeConfig("test-host-path", HostPath="/opt/config/test-host-path"),
            VolumeConfig("test-host-path-ro", HostPath="/opt/config/test-host-path-ro"),
        ],
        key=lambda v: v.Name,
    )


def _all(*steps: Callable[[DriverInstallState], None]) -> Callable[[DriverInstallState], None]:
    def run(state: DriverInstallState) -> None:
        for step in steps:
            step(state)

    return run


def _forced_rhel8_image(state: DriverInstallState) -> None:
    """The OpenShift fixtures force the image driver:525.85.03-rhel8.0 (NOTES.md)."""
    state.DriverImage = state.DriverImage.replace("-rhcos4.13", "-rhel8.0")
    if state.PeermemImage:
        state.PeermemImage = state.DriverImage


def _no_proxy(state: DriverInstallState) -> None:
    state.HTTPProxy = state.HTTPSProxy = state.NoProxy = state.TrustedCAConfigMapName = ""


# What each fixture hands NVIDIA's template differently from a real controller (NOTES.md):
FIXTURE_INPUTS: dict[str, Callable[[DriverInstallState], None]] = {
    # TestDriverSpec replaces the minimal spec with one that has no driverType
    "driver-full-spec": _no_driver_type,
    "driver-vgpu-licensing-secret": _mounts_not_read_only,
    "driver-vgpu-licensing": _mounts_not_read_only,
    "driver-secret-env": _gds_gdrcopy_images_without_os,
    "driver-additional-configs": _sample_additional_configs,
    "driver-rdma": _sample_additional_configs,
    "driver-rdma-hostmofed": _sample_additional_configs,
    "driver-gds": _all(_sample_additional_configs, _gds_gdrcopy_images_without_os),
    "driver-gdrcopy": _all(_sample_additional_configs, _gds_gdrcopy_images_without_os),
    "driver-openshift-drivertoolkit": _forced_rhel8_image,
    "driver-gdrcopy-openshift": _all(_forced_rhel8_image, _sample_additional_configs),
    "driver-vgpu-host-manager-openshift": _all(_forced_rhel8_image, _no_proxy),
}


@pytest.mark.parametrize("case", goldens.cases())
def test_digest_is_nvidias_for_the_fixture_inputs(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the fixtures' inputs (HostRoot '', kernelModuleType unset, and what
    ``FIXTURE_INPUTS`` names), our DRIVER_CONFIG_DIGEST is the one in NVIDIA's golden."""

    def fixture_digest(state: DriverInstallState) -> str:
        state.HostRoot = ""
        if case in NO_KERNEL_MODULE_TYPE:
            state.KernelModuleType = ""
        FIXTURE_INPUTS.get(case, lambda _: None)(state)
        return config_digest(state)

    monkeypatch.setattr(nvidiadriver_daemonset, "config_digest", fixture_digest)
    ds = next(o for o in goldens.ours(case) if o["kind"] == "DaemonSet")
    ctr = ds["spec"]["template"]["spec"]["containers"][0]
    ours = next(e["value"] for e in ctr["env"] if e["name"] == "DRIVER_CONFIG_DIGEST")
    assert ours == _golden_digest(case)
