"""Every NIMService admission rule (nim-operator.md §6.1): denied with NVIDIA's path and
message when broken, allowed when respected; warnings are warnings."""

from __future__ import annotations

import copy
from collections.abc import Callable

import pytest

from nimctl_runtime.meta import Obj
from nimctl_runtime.webhook import ValidationFailed
from webhooks.facts import StaticClusterFacts
from webhooks.nimservice import (
    AUTH_SECRET_WARNING,
    DEPRECATED_INGRESS_WARNING,
    LOADBALANCER_WARNING,
    NIMServiceValidator,
)


def base() -> Obj:
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": "llm", "namespace": "nim"},
        "spec": {
            "image": {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.3.3"},
            "authSecret": "ngc-api-secret",
            "storage": {"nimCache": {"name": "llm-cache", "profile": ""}},
            "expose": {"service": {"type": "ClusterIP", "port": 8000}},
            "replicas": 1,
        },
    }


def with_(change: Callable[[Obj], None]) -> Obj:
    obj = base()
    change(obj["spec"])
    return obj


DRA_DEVICE = {"name": "gpu", "count": 1, "deviceClassName": "gpu.nvidia.com"}

# (id, spec mutation, expected error text (exact, or a substring when it ends with "…"))
DENIED: list[tuple[str, Callable[[Obj], None], str]] = [
    ("image.repository", lambda s: s["image"].pop("repository"), "nimservice.spec.image.repository: Required value: is required"),
    ("image.tag", lambda s: s["image"].update(tag=""), "nimservice.spec.image.tag: Required value: is required"),
    ("shm<=0", lambda s: s["storage"].update(sharedMemorySizeLimit="0"), 'nimservice.spec.storage.sharedMemorySizeLimit: Invalid value: "0": must be > 0'),
    ("no storage", lambda s: s.update(storage={}), "nimservice.spec.storage: Required value: one of nimservice.spec.storage.nimCache, nimservice.spec.storage.pvc, nimservice.spec.storage.emptyDir or nimservice.spec.storage.hostPath, must be defined"),
    ("two storages", lambda s: s["storage"].update(emptyDir={}), 'nimservice.spec.storage: Invalid value: "multiple storage sources defined": only one of…'),
    ("profile without name", lambda s: s["storage"].update(nimCache={"profile": "abc"}), "nimservice.spec.storage.nimCache.name: Required value: is required when nimservice.spec.storage.nimCache is defined"),
    ("pvc without name", lambda s: s.update(storage={"pvc": {"size": "10Gi"}}), "nimservice.spec.storage.pvc.name: Required value: must be provided when nimservice.spec.storage.pvc.create is false"),
    ("pvc access mode", lambda s: s.update(storage={"pvc": {"name": "p", "volumeAccessMode": "RWX"}}), 'nimservice.spec.storage.pvc.volumeAccessMode: Invalid value: "RWX": unrecognized volumeAccessMode'),
    ("router without host", lambda s: s["expose"].update(router={"ingress": {"ingressClass": "nginx"}}), "nimservice.spec.expose.router.hostDomainName: Required value: is required"),
    ("ingress and gateway", lambda s: s["expose"].update(router={"hostDomainName": "example.com", "ingress": {"ingressClass": "nginx"}, "gateway": {"namespace": "g", "name": "g"}}), "nimservice.spec.expose.router: Forbidden: ingress and gateway cannot be specified together"),
    ("metrics without monitor", lambda s: s.update(metrics={"enabled": True, "serviceMonitor": {}}), "nimservice.spec.metrics.serviceMonitor: Required value: must be defined if nimservice.spec.metrics.enabled is true"),
    ("scale without hpa", lambda s: (s.pop("replicas"), s.update(scale={"enabled": True})), "nimservice.spec.scale.hpa: Required value: must be defined if nimservice.spec.scale.enabled is true"),
    ("scale with replicas", lambda s: s.update(scale={"enabled": True, "hpa": {"maxReplicas": 3}}), "nimservice.spec.replicas: Forbidden: cannot be set when autoscaling is enabled; configure min/max replicas in spec.scale.hpa instead"),
    ("resources.claims", lambda s: s.update(resources={"claims": [{"name": "x"}]}), "nimservice.spec.resources.claims: Forbidden: must be empty"),
    ("deprecated ingress with router ingress", lambda s: s["expose"].update(ingress={"enabled": True}, router={"hostDomainName": "example.com", "ingress": {"ingressClass": "nginx"}}), "nimservice.spec.expose.ingress: Forbidden: nimservice.spec.expose.ingress is deprecated. Omit the field if you use .spec.expose.router instead"),
    ("grpc routes without grpc port", lambda s: s["expose"].update(router={"hostDomainName": "example.com", "gateway": {"namespace": "g", "name": "g", "grpcRoutesEnabled": True}}), "nimservice.spec.expose.service.grpcPort: Required value: must be set when .spec.expose.router.gateway.grpcRoutesEnabled is true"),
    ("dra no source", lambda s: s.update(draResources=[{"requests": ["gpu"]}]), "nimservice.spec.draResources[0]: Required value: one of…"),
    ("dra two sources", lambda s: s.update(draResources=[{"resourceClaimName": "a", "resourceClaimTemplateName": "b"}]), 'nimservice.spec.draResources[0]: Invalid value: "multiple dra resource sources defined"…'),
    ("dra claim with replicas>1", lambda s: s.update(replicas=2, draResources=[{"resourceClaimName": "a"}]), "nimservice.spec.draResources[0].resourceClaimName: Forbidden: must not be set when nimservice.spec.replicas > 1…"),
    ("dra claim with scale", lambda s: (s.pop("replicas"), s.update(scale={"enabled": True, "hpa": {"maxReplicas": 2}}, draResources=[{"resourceClaimName": "a"}])), "nimservice.spec.draResources[0].resourceClaimName: Forbidden: must not be set when nimservice.spec.scale.enabled is true…"),
    ("dra duplicate names", lambda s: s.update(draResources=[{"resourceClaimName": "a"}, {"resourceClaimName": "a"}]), 'nimservice.spec.draResources[1].resourceClaimName: Duplicate value: "a"'),
    ("dra empty devices", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": []}}]), "nimservice.spec.draResources[0].claimCreationSpec.devices: Required value: must be non-empty"),
    ("dra device name", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "name": ""}]}}]), "nimservice.spec.draResources[0].claimCreationSpec.devices[0].name: Required value: is required"),
    ("dra device count", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "count": 0}]}}]), "nimservice.spec.draResources[0].claimCreationSpec.devices[0].count: Invalid value: 0: must be > 0"),
    ("dra device class", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "deviceClassName": ""}]}}]), "nimservice.spec.draResources[0].claimCreationSpec.devices[0].deviceClassName: Required value: is required"),
    ("dra duplicate selector keys", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "attributeSelectors": [{"key": "arch", "op": "Equal", "value": {"stringValue": "x"}}], "capacitySelectors": [{"key": "gpu.nvidia.com/arch", "op": "Equal", "value": "1"}]}]}}]), "…Duplicate value: \"gpu.nvidia.com/arch\""),
    ("dra attribute op", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "attributeSelectors": [{"key": "a", "op": "Bigger", "value": {"intValue": 1}}]}]}}]), '…attributeSelectors[0].op: Invalid value: "Bigger": must be one of [Equal NotEqual GreaterThan GreaterThanOrEqual LessThan LessThanOrEqual]'),
    ("dra attribute missing op", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "attributeSelectors": [{"key": "a", "value": {"intValue": 1}}]}]}}]), "…attributeSelectors[0].op: Required value: is required"),
    ("dra attribute two values", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "attributeSelectors": [{"key": "a", "op": "Equal", "value": {"intValue": 1, "boolValue": True}}]}]}}]), '…attributeSelectors[0].value: Invalid value: "multiple attribute values defined"…'),
    ("dra attribute no value", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "attributeSelectors": [{"key": "a", "op": "Equal", "value": {}}]}]}}]), "…attributeSelectors[0].value: Required value…"),
    ("dra bad semver", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "attributeSelectors": [{"key": "a", "op": "Equal", "value": {"versionValue": "1.2"}}]}]}}]), '…attributeSelectors[0].value: Invalid value: "1.2": must be a valid semantic version: No Major.Minor.Patch elements found'),
    ("dra semver leading zero", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "attributeSelectors": [{"key": "driverVersion", "op": "GreaterThan", "value": {"versionValue": "550.127.08"}}]}]}}]), '…attributeSelectors[0].value: Invalid value: "550.127.08": must be a valid semantic version: Patch number must not contain leading zeroes "08"'),
    ("dra capacity op", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "capacitySelectors": [{"key": "mem", "op": "Most", "value": "40Gi"}]}]}}]), '…capacitySelectors[0].op: Invalid value: "Most"…'),
    ("dra capacity value", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "capacitySelectors": [{"key": "mem", "op": "Equal"}]}]}}]), "…capacitySelectors[0].value: Required value: is required"),
    ("kserve multinode", lambda s: s.update(inferencePlatform="kserve", multiNode={"parallelism": {"tensor": 8}}), "nimservice.spec.multiNode: Forbidden: cannot be set when the inferencePlatform is KServe"),
]


def _matches(message: str, expected: str) -> bool:
    """The expected error text appears in the aggregate ("…" marks an elided part)."""
    return all(part in message for part in expected.split("…") if part)


@pytest.mark.parametrize(("case", "change", "expected"), DENIED, ids=[d[0] for d in DENIED])
async def test_rule_denies_with_nvidias_path_and_message(
    case: str, change: Callable[[Obj], None], expected: str
) -> None:
    validator = NIMServiceValidator(StaticClusterFacts(version="v1.34.1"))
    with pytest.raises(ValidationFailed) as info:
        await validator.validate_create(with_(change))
    assert _matches(str(info.value), expected), str(info.value)
    assert "Traceback" not in str(info.value)


ALLOWED: list[tuple[str, Callable[[Obj], None]]] = [
    ("base", lambda s: None),
    ("pvc create", lambda s: s.update(storage={"pvc": {"create": True, "size": "10Gi", "volumeAccessMode": "ReadWriteOnce"}})),
    ("existing pvc", lambda s: s.update(storage={"pvc": {"name": "models"}})),
    ("emptyDir", lambda s: s.update(storage={"emptyDir": {"sizeLimit": "10Gi"}})),
    ("hostPath", lambda s: s.update(storage={"hostPath": "/models"})),
    ("router gateway", lambda s: s["expose"].update(router={"hostDomainName": "example.com", "gateway": {"namespace": "g", "name": "g"}})),
    ("grpc with port", lambda s: s["expose"]["service"].update(grpcPort=8001) or s["expose"].update(router={"hostDomainName": "example.com", "gateway": {"namespace": "g", "name": "g", "grpcRoutesEnabled": True}})),
    ("metrics", lambda s: s.update(metrics={"enabled": True, "serviceMonitor": {"interval": "30s"}})),
    ("scale", lambda s: (s.pop("replicas"), s.update(scale={"enabled": True, "hpa": {"maxReplicas": 3}}))),
    ("dra template", lambda s: s.update(replicas=2, draResources=[{"resourceClaimTemplateName": "t"}])),
    ("dra template twice", lambda s: s.update(draResources=[{"resourceClaimTemplateName": "t"}, {"resourceClaimTemplateName": "t"}])),
    ("dra spec", lambda s: s.update(draResources=[{"claimCreationSpec": {"devices": [{**DRA_DEVICE, "attributeSelectors": [{"key": "driverVersion", "op": "GreaterThanOrEqual", "value": {"versionValue": "560.35.3"}}]}]}}])),
    ("kserve standard", lambda s: s.update(inferencePlatform="kserve", scale={"enabled": True, "hpa": {"maxReplicas": 2}}) or s.pop("replicas")),
]


@pytest.mark.parametrize(("case", "change"), ALLOWED, ids=[a[0] for a in ALLOWED])
async def test_rule_respected_is_allowed(case: str, change: Callable[[Obj], None]) -> None:
    validator = NIMServiceValidator(StaticClusterFacts(version="v1.34.1"))
    assert await validator.validate_create(with_(change)) == []


async def test_image_errors_are_reported_once_not_twice() -> None:
    obj = with_(lambda s: s.update(image={}))
    with pytest.raises(ValidationFailed) as info:
        await NIMServiceValidator(StaticClusterFacts()).validate_create(obj)
    assert str(info.value).count("image.repository") == 1
    assert str(info.value).count("image.tag") == 1


@pytest.mark.parametrize(
    ("change", "warning"),
    [
        (lambda s: s.pop("authSecret"), AUTH_SECRET_WARNING),
        (lambda s: s["expose"].update(ingress={"enabled": True}), DEPRECATED_INGRESS_WARNING),
        (
            lambda s: s["expose"].update(
                service={"type": "LoadBalancer", "port": 8000},
                router={"hostDomainName": "example.com", "gateway": {"namespace": "g", "name": "g"}},
            ),
            LOADBALANCER_WARNING,
        ),
    ],
)
async def test_warnings_allow_the_object(change: Callable[[Obj], None], warning: str) -> None:
    warnings = await NIMServiceValidator(StaticClusterFacts()).validate_create(with_(change))
    assert warnings == [warning]


async def test_dra_needs_kubernetes_1_34() -> None:
    obj = with_(lambda s: s.update(draResources=[{"resourceClaimTemplateName": "t"}]))
    with pytest.raises(ValidationFailed, match=r"please upgrade to k8s version 'v1.34.0' or higher"):
        await NIMServiceValidator(StaticClusterFacts(version="v1.32.4+k3s1")).validate_create(obj)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda s: s.update(scale={"enabled": True, "hpa": {"maxReplicas": 2}}) or s.pop("replicas"), "nimservice.spec.scale"),
        (lambda s: s["expose"].update(ingress={"enabled": True}), "nimservice.spec.expose.ingress"),
        (lambda s: s["expose"].update(router={"hostDomainName": "e.com", "ingress": {"ingressClass": "n"}}), "nimservice.spec.expose.router.ingress"),
        (lambda s: s["expose"].update(router={"hostDomainName": "e.com", "gateway": {"namespace": "g", "name": "g"}}), "nimservice.spec.expose.router.gateway"),
        (lambda s: s.update(metrics={"enabled": True, "serviceMonitor": {"interval": "5s"}}), "nimservice.spec.metrics"),
    ],
)
async def test_knative_mode_forbids(change: Callable[[Obj], None], path: str) -> None:
    obj = with_(lambda s: (s.update(inferencePlatform="kserve"), change(s)))
    obj["spec"]["annotations"] = {"serving.kserve.io/deploymentMode": "Serverless"}
    with pytest.raises(ValidationFailed) as info:
        await NIMServiceValidator(StaticClusterFacts()).validate_create(obj)
    assert f"{path}: Forbidden: " in str(info.value)
    assert "cannot be set when KServe runs in knative mode" in str(info.value)


async def test_invalid_kserve_mode_annotation_is_reported() -> None:
    obj = with_(lambda s: s.update(inferencePlatform="kserve", annotations={"serving.kserve.io/deploymentMode": "Fast"}))
    with pytest.raises(ValidationFailed, match="deployment mode annotation found but value is invalid: Fast"):
        await NIMServiceValidator(StaticClusterFacts()).validate_create(obj)


@pytest.mark.parametrize(
    ("old_change", "new_change", "message"),
    [
        (lambda s: s.update(multiNode={"parallelism": {"tensor": 8}}), lambda s: s.update(multiNode={"parallelism": {"tensor": 4}}), "spec.multiNode: Forbidden: is immutable once the resource is created"),
        (lambda s: s.update(storage={"pvc": {"create": True, "size": "10Gi"}}), lambda s: s.update(storage={"pvc": {"create": True, "size": "20Gi"}}), "spec.storage.pvc: Forbidden: is immutable once it is created with spec.storage.pvc.create = true"),
        (lambda s: s.update(draResources=[{"resourceClaimTemplateName": "a"}]), lambda s: s.update(draResources=[{"resourceClaimTemplateName": "b"}]), "spec.draResources: Forbidden: is immutable"),
    ],
)
async def test_update_only_immutability(
    old_change: Callable[[Obj], None], new_change: Callable[[Obj], None], message: str
) -> None:
    validator = NIMServiceValidator(StaticClusterFacts(version="v1.34.0"))
    old, new = with_(old_change), with_(old_change)
    new_change(new["spec"])
    with pytest.raises(ValidationFailed) as info:
        await validator.validate_update(old, new)
    assert message in str(info.value)
    same = copy.deepcopy(old)
    assert await validator.validate_update(old, same) == []
