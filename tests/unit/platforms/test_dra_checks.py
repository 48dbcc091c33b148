"""DRA as NVIDIA's unit tests pin it (internal/shared/resourceclaims_test.go, the NIMService
DRA tests): device CEL expressions, the controller's refusals and their messages."""

from __future__ import annotations

from typing import Any

import pytest

from api.apps.v1alpha1.nimservice import DRADeviceSpec, DRAResource
from platforms.contract import Blocked
from platforms.nimservice import DRA_UNSUPPORTED, NIMServiceContract
from platforms.standalone import Capabilities, RenderContext
from platforms.standalone.dra_checks import (
    CEL_WITH_SELECTORS,
    DRAExpressionError,
    device_cel_expressions,
    dra_spec_problem,
    semver_error,
)
from tests.unit.platforms.helpers import nimservice

D = "gpu.nvidia.com"


def _device(**extra: Any) -> DRADeviceSpec:
    return DRADeviceSpec.model_validate({"name": "gpu", "driverName": D, **extra})


CEL_CASES: list[tuple[str, dict[str, Any], list[str]]] = [
    ("driver only", {}, [f'device.driver == "{D}"']),
    (
        "cel expressions",
        {
            "celExpressions": [
                'device.attributes["gpu.nvidia.com"].foo == "bar"',
                "device.attributes[\"gpu.nvidia.com\"].bar.compareTo(semver('7.0')) >= 0",
            ]
        },
        [
            f'device.driver == "{D}"',
            'device.attributes["gpu.nvidia.com"].foo == "bar"',
            "device.attributes[\"gpu.nvidia.com\"].bar.compareTo(semver('7.0')) >= 0",
        ],
    ),
    (
        "attribute selectors",
        {
            "attributeSelectors": [
                {"key": "foo", "op": "Equal", "value": {"stringValue": "bar"}},
                {"key": "bar", "op": "GreaterThanOrEqual", "value": {"versionValue": "7.0"}},
                {"key": "n", "op": "LessThan", "value": {"intValue": 4}},
                {"key": "other.io/mig", "op": "NotEqual", "value": {"boolValue": True}},
            ]
        },
        [
            f'device.driver == "{D}"',
            'device.attributes["gpu.nvidia.com"].foo == "bar"',
            '(device.attributes["gpu.nvidia.com"].bar).compareTo(semver("7.0")) >= 0',
            'device.attributes["gpu.nvidia.com"].n < 4',
            'device.attributes["other.io"].mig != true',
        ],
    ),
    (
        "capacity selectors",
        {
            "capacitySelectors": [
                {"key": "foo", "op": "GreaterThanOrEqual", "value": "8"},
                {"key": "gpu.nvidia.com/bar", "op": "GreaterThanOrEqual", "value": "7"},
            ]
        },
        [
            f'device.driver == "{D}"',
            '(device.capacity["gpu.nvidia.com"].foo).compareTo(quantity("8")) >= 0',
            '(device.capacity["gpu.nvidia.com"].bar).compareTo(quantity("7")) >= 0',
        ],
    ),
    (
        "attributes then capacity",
        {
            "attributeSelectors": [{"key": "foo", "op": "Equal", "value": {"stringValue": "x"}}],
            "capacitySelectors": [{"key": "bar", "op": "GreaterThanOrEqual", "value": "8"}],
        },
        [
            f'device.driver == "{D}"',
            'device.attributes["gpu.nvidia.com"].foo == "x"',
            '(device.capacity["gpu.nvidia.com"].bar).compareTo(quantity("8")) >= 0',
        ],
    ),
]


@pytest.mark.parametrize(("case", "spec", "expected"), CEL_CASES, ids=[c[0] for c in CEL_CASES])
def test_device_cel_expressions_as_nvidia_builds_them(
    case: str, spec: dict[str, Any], expected: list[str]
) -> None:
    assert device_cel_expressions(_device(**spec)) == expected


@pytest.mark.parametrize(
    "selectors",
    [
        {"attributeSelectors": [{"key": "a", "op": "Equal", "value": {"intValue": 1}}]},
        {"capacitySelectors": [{"key": "a", "op": "Equal", "value": "1"}]},
    ],
)
def test_cel_expressions_with_selectors_are_refused(selectors: dict[str, Any]) -> None:
    # The CRD refuses this combination at admission; the render refuses it too.
    device = _device(**selectors).model_copy(update={"cel_expressions": ["true"]})
    with pytest.raises(DRAExpressionError, match=CEL_WITH_SELECTORS):
        device_cel_expressions(device)


def test_an_ordering_operator_on_a_string_is_refused() -> None:
    device = _device(
        attributeSelectors=[{"key": "a", "op": "GreaterThan", "value": {"stringValue": "x"}}]
    )
    with pytest.raises(DRAExpressionError, match='invalid operator ">" for string type'):
        device_cel_expressions(device)


@pytest.mark.parametrize(
    ("version", "error"),
    [
        ("550.127.08", 'Patch number must not contain leading zeroes "08"'),
        ("1.2", "No Major.Minor.Patch elements found"),
        ("", "Version string empty"),
        ("01.2.3", 'Major number must not contain leading zeroes "01"'),
        ("1.x.3", 'Invalid character(s) found in minor number "x"'),
        ("1.2.3-01", 'Numeric PreRelease version must not contain leading zeroes "01"'),
        ("1.2.3+a..b", "Build meta data is empty"),
        ("560.35.3", None),
        ("1.2.3-rc.1+build.5", None),
    ],
)
def test_semver_errors_in_the_parsers_words(version: str, error: str | None) -> None:
    assert semver_error(version) == error


def _resources(*items: dict[str, Any]) -> list[DRAResource]:
    return [DRAResource.model_validate(i) for i in items]


BAD_VERSION = {
    "claimCreationSpec": {
        "devices": [
            {
                "name": "test-device",
                "count": 1,
                "driverName": D,
                "deviceClassName": D,
                "attributeSelectors": [
                    {"key": "testKey", "op": "GreaterThan", "value": {"versionValue": "550.127.08"}}
                ],
            }
        ]
    }
}
PROBLEMS: list[tuple[str, list[dict[str, Any]], str | None]] = [
    (
        "claim name twice",
        [{"resourceClaimName": "test-resource-claim"}] * 2,
        "spec.draResources[1].resourceClaimName: duplicate resource claim name: "
        "'test-resource-claim'",
    ),
    (
        "invalid version value",
        [BAD_VERSION],
        "spec.draResources[0].claimCreationSpec.devices[0].attributeSelectors[0].value"
        '.versionValue.version: invalid version "550.127.08": '
        'Patch number must not contain leading zeroes "08"',
    ),
    ("template twice is fine", [{"resourceClaimTemplateName": "t"}] * 2, None),
]


@pytest.mark.parametrize(("case", "items", "message"), PROBLEMS, ids=[p[0] for p in PROBLEMS])
def test_nvidias_dra_checks(case: str, items: list[dict[str, Any]], message: str | None) -> None:
    assert dra_spec_problem(_resources(*items)) == message


@pytest.mark.parametrize(
    ("draResources", "caps", "message"),
    [
        ([{"resourceClaimName": "c"}], Capabilities.nothing(), DRA_UNSUPPORTED),
        (
            [{"resourceClaimName": "test-resource-claim"}] * 2,
            Capabilities.everything(),
            PROBLEMS[0][2],
        ),
        ([BAD_VERSION], Capabilities.everything(), PROBLEMS[1][2]),
    ],
)
def test_a_refused_nimservice_is_failed_with_dra_resources_unsupported(
    draResources: list[dict[str, Any]], caps: Capabilities, message: str
) -> None:
    svc = nimservice({"draResources": draResources})
    with pytest.raises(Blocked) as info:
        NIMServiceContract().render(svc, RenderContext(capabilities=caps))
    readiness = info.value.readiness
    assert (readiness.state, readiness.reason, readiness.message) == (
        "Failed",
        "DRAResourcesUnsupported",
        message,
    )
    assert DRA_UNSUPPORTED == (
        "DRA resources are not supported by NIM-Operator on this cluster, please upgrade to "
        "k8s version 'v1.34.0' or higher"
    )
