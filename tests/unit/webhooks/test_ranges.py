"""Issue 19 items 2 and 7: out-of-range integers and malformed quantities are refused with a path.

NVIDIA's Go webhook would fail to decode these objects at all; ours reads the raw
object, so it must refuse them itself, naming the field.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nimctl_runtime.meta import Obj
from nimctl_runtime.webhook import ValidationFailed
from webhooks.facts import StaticClusterFacts
from webhooks.nimcache import NIMCacheValidator
from webhooks.nimservice import NIMServiceValidator
from webhooks.ranges import integer_range_errors


def nimservice(change: Callable[[Obj], None]) -> Obj:
    spec: Obj = {
        "image": {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.3.3"},
        "authSecret": "ngc-api-secret",
        "storage": {"nimCache": {"name": "llm-cache"}},
        "expose": {"service": {"type": "ClusterIP", "port": 8000}},
        "replicas": 1,
    }
    change(spec)
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": "llm", "namespace": "nim"},
        "spec": spec,
    }


def nimcache(change: Callable[[Obj], None]) -> Obj:
    spec: Obj = {
        "source": {"ngc": {"modelPuller": "nvcr.io/nim/x:1", "pullSecret": "s", "authSecret": "a"}},
        "storage": {"pvc": {"create": True, "size": "50Gi", "volumeAccessMode": "ReadWriteOnce"}},
    }
    change(spec)
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMCache",
        "metadata": {"name": "c", "namespace": "nim"},
        "spec": spec,
    }


async def _nimservice_denial(obj: Obj) -> str:
    validator = NIMServiceValidator(StaticClusterFacts())
    with pytest.raises(ValidationFailed) as err:
        await validator.validate_create(obj)
    return str(err.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda s: s.update(replicas=18446744073709551616),
            "nimservice.spec.replicas: Invalid value: 18446744073709551616: must be a 32-bit integer",
        ),
        (
            lambda s: s.update(replicas=2**31),
            "nimservice.spec.replicas: Invalid value: 2147483648: must be a 32-bit integer",
        ),
        (
            lambda s: s["expose"]["service"].update(port=-(2**40)),
            "nimservice.spec.expose.service.port: Invalid value: -1099511627776: must be a 32-bit",
        ),
        (
            lambda s: s.update(livenessProbe={"probe": {"httpGet": {"port": 2**33, "path": "/"}}}),
            "nimservice.spec.livenessProbe.probe.httpGet.port: Invalid value: 8589934592: must be a 32-bit",
        ),
        (
            lambda s: s.update(userID=2**64),
            "nimservice.spec.userID: Invalid value: 18446744073709551616: must be a 64-bit integer",
        ),
    ],
)
async def test_nimservice_integers_out_of_range_are_denied_with_their_path(
    change: Callable[[Obj], None], expected: str
) -> None:
    assert expected in await _nimservice_denial(nimservice(change))


async def test_nimservice_integers_at_the_edge_of_their_range_are_allowed() -> None:
    validator = NIMServiceValidator(StaticClusterFacts())
    obj = nimservice(lambda s: s.update(replicas=2**31 - 1, userID=2**63 - 1))
    await validator.validate_create(obj)


async def test_nimservice_pvc_size_must_be_a_quantity() -> None:
    obj = nimservice(lambda s: s.update(storage={"pvc": {"create": True, "size": "50Gi50Gi50Gi"}}))
    text = await _nimservice_denial(obj)
    assert (
        'nimservice.spec.storage.pvc.size: Invalid value: "50Gi50Gi50Gi": must be a quantity'
        in text
    )


@pytest.mark.parametrize("size", ["50Gi50Gi50Gi", "lots", "-"])
async def test_nimcache_pvc_size_must_be_a_quantity(size: str) -> None:
    with pytest.raises(ValidationFailed) as err:
        await NIMCacheValidator().validate_create(
            nimcache(lambda s: s["storage"]["pvc"].update(size=size))
        )
    assert f'nimcache.spec.storage.pvc.size: Invalid value: "{size}": must be a quantity' in str(
        err.value
    )


async def test_nimcache_valid_sizes_and_ranges_pass() -> None:
    await NIMCacheValidator().validate_create(
        nimcache(lambda s: s["storage"]["pvc"].update(size="1.5Ti"))
    )


def test_integers_in_lists_and_maps_are_walked() -> None:
    schema = {
        "type": "object",
        "properties": {
            "xs": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": {"type": "integer", "format": "int32"},
                },
            }
        },
    }
    errs = integer_range_errors({"xs": [{"a": 1}, {"b": 2**31}]}, schema, "spec")
    assert [e.field for e in errs] == ["spec.xs[1].b"]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda s: s.update(draResources=7),
            "nimservice.spec.draResources: Invalid value: 7: must be of type array",
        ),
        (
            lambda s: s.update(image="nvcr.io/x:1"),
            'nimservice.spec.image: Invalid value: "nvcr.io/x:1": must be of type object',
        ),
        (
            lambda s: s.update(replicas="3"),
            'nimservice.spec.replicas: Invalid value: "3": must be of type integer',
        ),
    ],
)
async def test_wrong_types_are_denied_before_any_rule_can_trip_on_them(
    change: Callable[[Obj], None], expected: str
) -> None:
    # Found by the fuzz suite: draResources=7 crashed a rule (a 500 denial).
    text = await _nimservice_denial(nimservice(change))
    assert expected in text
    assert "TypeError" not in text


async def test_a_spec_that_is_not_an_object_is_one_type_error() -> None:
    obj = nimservice(lambda s: None)
    obj["spec"] = 7
    assert (
        await _nimservice_denial(obj) == "nimservice.spec: Invalid value: 7: must be of type object"
    )
    cache = nimcache(lambda s: None)
    cache["spec"] = ["x"]
    with pytest.raises(ValidationFailed, match=r"nimcache\.spec: Invalid value"):
        await NIMCacheValidator().validate_create(cache)
