"""Table of invalid manifests, one row per CEL rule, bound, enum and pattern of the
NIM kinds, shared by the model-level tests and the API-server (localcluster) tests.

Each row starts from a valid base manifest of its kind, applies edits (a dotted
path with ``[i]`` indexes set to a value, or :data:`DELETE`), and states the field
path the error is reported at and what the error says: NVIDIA's message for a CEL
rule, or the Kubernetes wording fragment for a bound, enum or pattern.
"""

from __future__ import annotations

import copy
import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Final

DELETE: Final = object()

IMAGE = {"repository": "nvcr.io/nim/meta/llama-3.1-8b-instruct", "tag": "1.3.3"}

BASES: Final[dict[str, dict[str, Any]]] = {
    "NIMService": {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMService",
        "metadata": {"name": "neg"},
        "spec": {"image": IMAGE, "storage": {"nimCache": {"name": "cache"}}},
    },
    "NIMCache": {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMCache",
        "metadata": {"name": "neg"},
        "spec": {
            "source": {"ngc": {"authSecret": "ngc-api", "modelPuller": "nvcr.io/nim/x:1"}},
            "storage": {"pvc": {"create": True, "size": "10Gi"}},
        },
    },
    "NIMPipeline": {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMPipeline",
        "metadata": {"name": "neg"},
        "spec": {"services": [{"name": "a", "enabled": True, "spec": {"image": IMAGE}}]},
    },
    "NIMBuild": {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMBuild",
        "metadata": {"name": "neg"},
        "spec": {"nimCache": {"name": "cache"}, "image": IMAGE},
    },
}

HF = {"endpoint": "https://huggingface.co", "namespace": "meta", "modelName": "m",
      "authSecret": "hf", "modelPuller": "p:1", "pullSecret": "ps"}
DS = {"endpoint": "http://ds:3000/v1/hf", "modelName": "m", "authSecret": "hf",
      "modelPuller": "p:1", "pullSecret": "ps"}
GW = {"namespace": "gw", "name": "gw"}
DEV = {"name": "gpu"}


@dataclass(frozen=True)
class Case:
    """One invalid manifest and the error it must get."""

    id: str
    kind: str
    edits: tuple[tuple[str, Any], ...]
    path: str
    message: str
    """NVIDIA's CEL message, or a fragment of Kubernetes' wording."""
    cel: bool = False
    status: bool = False
    """The invalid value is in .status (only checked through the status subresource)."""
    tags: frozenset[str] = field(default_factory=frozenset)

    def manifest(self) -> dict[str, Any]:
        obj = copy.deepcopy(BASES[self.kind])
        for path, value in self.edits:
            set_path(obj, path, value)
        return obj


_TOKEN = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def set_path(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set (or with DELETE remove) ``a.b[0].c`` in ``obj``, creating parents."""
    parts: list[str | int] = [
        int(m.group(2)) if m.group(2) is not None else m.group(1) for m in _TOKEN.finditer(path)
    ]
    node: Any = obj
    for here, nxt in itertools.pairwise(parts):
        if isinstance(here, int):
            while len(node) <= here:
                node.append({})
            node = node[here]
        else:
            if here not in node or node[here] is None:
                node[here] = [] if isinstance(nxt, int) else {}
            node = node[here]
    last = parts[-1]
    if value is DELETE:
        del node[last]
    elif isinstance(last, int):
        while len(node) <= last:
            node.append(None)
        node[last] = copy.deepcopy(value)
    else:
        node[last] = copy.deepcopy(value)


def cel(id_: str, kind: str, edits: dict[str, Any], path: str, message: str) -> Case:
    return Case(id_, kind, tuple(edits.items()), path, message, cel=True)


def bound(id_: str, kind: str, edits: dict[str, Any], path: str, fragment: str) -> Case:
    return Case(id_, kind, tuple(edits.items()), path, fragment)


NS, NC = "NIMService", "NIMCache"
DEPRECATED_INGRESS = (
    ".spec.expose.ingress is deprecated, and will be removed in a future release. If "
    ".spec.expose.ingress is set, please do not set .spec.expose.router.ingress."
)
EXACTLY_ONE_DRA = (
    "exactly one of spec.resourceClaimName, spec.resourceClaimTemplateName, or "
    "spec.claimCreationSpec must be set."
)
GE = "should be greater than or equal to"
LE = "should be less than or equal to"
ENUM = "Unsupported value"
PATTERN = "should match"
MIN_LEN = "should be at least"
MAX_LEN = "Too long"
REQUIRED = "Required value"

CASES: Final[tuple[Case, ...]] = (
    # ---- CEL rules, NIMService ------------------------------------------------------
    cel("multinode-with-autoscaling", NS,
        {"spec.multiNode": {"parallelism": {"pipeline": 2}}, "spec.scale.enabled": True,
         "spec.scale.hpa.maxReplicas": 2},
        "spec", "autoScaling must be nil or disabled when multiNode is set"),
    cel("replicas-with-autoscaling", NS,
        {"spec.replicas": 2, "spec.scale.enabled": True, "spec.scale.hpa.maxReplicas": 3},
        "spec", "spec.replicas cannot be set when spec.scale.enabled is true"),
    cel("deprecated-ingress-with-router-ingress", NS,
        {"spec.expose.ingress.enabled": True,
         "spec.expose.router": {"hostDomainName": "example.com",
                                "ingress": {"ingressClass": "nginx"}}},
        "spec", DEPRECATED_INGRESS),
    cel("router-ingress-and-gateway", NS,
        {"spec.expose.router": {"hostDomainName": "example.com",
                                "ingress": {"ingressClass": "nginx"}, "gateway": GW}},
        "spec.expose.router", "ingress and gateway cannot be specified together"),
    cel("epp-configmap-and-config", NS,
        {"spec.expose.router.eppConfig": {
            "containerSpec": {"name": "epp", "image": IMAGE},
            "configMapRef": {"name": "cm", "key": "k"},
            "config": {"plugins": [], "schedulingProfiles": []}}},
        "spec.expose.router.eppConfig", "specify either configMapRef or config, not both"),
    cel("backendref-service-without-port", NS,
        {"spec.expose.router.gateway": {**GW, "backendRef": {"name": "svc"}}},
        "spec.expose.router.gateway.backendRef", "Must have port for Service reference"),
    cel("multinode-mpi-and-ray", NS,
        {"spec.multiNode": {"parallelism": {"pipeline": 2}, "mpi": {}, "ray": {}}},
        "spec.multiNode", "mpi and ray are mutually exclusive"),
    cel("computedomain-create-with-name", NS,
        {"spec.multiNode": {"parallelism": {"pipeline": 2},
                            "computeDomain": {"create": True, "name": "cd"}}},
        "spec.multiNode.computeDomain",
        "if create is true, name must not be set; otherwise name is required."),
    cel("computedomain-no-create-no-name", NS,
        {"spec.multiNode": {"parallelism": {"pipeline": 2}, "computeDomain": {}}},
        "spec.multiNode.computeDomain",
        "if create is true, name must not be set; otherwise name is required."),
    cel("dra-none-of-three", NS, {"spec.draResources": [{"requests": ["gpu"]}]},
        "spec.draResources[0]", EXACTLY_ONE_DRA),
    cel("dra-two-of-three", NS,
        {"spec.draResources": [{"resourceClaimName": "a", "resourceClaimTemplateName": "b"}]},
        "spec.draResources[0]", EXACTLY_ONE_DRA),
    cel("dra-cel-with-selectors", NS,
        {"spec.draResources": [{"claimCreationSpec": {"devices": [
            {"name": "gpu", "celExpressions": ["true"],
             "attributeSelectors": [{"key": "k", "value": {"boolValue": True}}]}]}}]},
        "spec.draResources[0].claimCreationSpec.devices[0]",
        "celExpressions must not be set if attributeSelectors or capacitySelectors are set"),
    Case("dra-status-both", NS,
         (("status.draResourceStatuses", [{"name": "c", "resourceClaimStatus": {"name": "a"},
                                           "resourceClaimTemplateStatus": {"name": "b"}}]),),
         "status.draResourceStatuses[0]",
         "exactly one of resourceClaimStatus and resourceClaimTemplateStatus must be set.",
         cel=True, status=True),
    # ---- CEL rules, NIMCache ----------------------------------------------------------
    cel("source-none", NC, {"spec.source": {}},
        "spec.source", "Exactly one of ngc, dataStore, or hf must be defined"),
    cel("source-ngc-and-hf", NC, {"spec.source.hf": HF},
        "spec.source", "Exactly one of ngc, dataStore, or hf must be defined"),
    cel("ngc-model-and-endpoint", NC,
        {"spec.source.ngc.model": {"profiles": ["all"]}, "spec.source.ngc.modelEndpoint": "x"},
        "spec.source.ngc", "Only one of 'model' or 'modelEndpoint' can be specified"),
    cel("hf-model-and-dataset", NC,
        {"spec.source": {"hf": {**HF, "datasetName": "d"}}},
        "spec.source.hf", "Exactly one of modelName or datasetName must be defined"),
    cel("datastore-neither-model-nor-dataset", NC,
        {"spec.source": {"dataStore": {k: v for k, v in DS.items() if k != "modelName"}}},
        "spec.source.dataStore", "Exactly one of modelName or datasetName must be defined"),
    # ---- bounds, enums, patterns, NIMService -------------------------------------------
    bound("replicas-negative", NS, {"spec.replicas": -1}, "spec.replicas", GE),
    bound("service-port-zero", NS, {"spec.expose.service.port": 0},
          "spec.expose.service.port", GE),
    bound("service-port-too-big", NS, {"spec.expose.service.port": 65536},
          "spec.expose.service.port", LE),
    bound("grpc-port-zero", NS, {"spec.expose.service.grpcPort": 0},
          "spec.expose.service.grpcPort", GE),
    bound("metrics-port-too-big", NS, {"spec.expose.service.metricsPort": 70000},
          "spec.expose.service.metricsPort", LE),
    bound("hpa-min-replicas-zero", NS,
          {"spec.scale.hpa": {"minReplicas": 0, "maxReplicas": 2}},
          "spec.scale.hpa.minReplicas", GE),
    bound("hpa-max-replicas-missing", NS, {"spec.scale.hpa": {"minReplicas": 1}},
          "spec.scale.hpa.maxReplicas", REQUIRED),
    bound("inference-platform-enum", NS, {"spec.inferencePlatform": "kubeflow"},
          "spec.inferencePlatform", ENUM),
    bound("backend-type-enum", NS,
          {"spec.multiNode": {"backendType": "ray", "parallelism": {"pipeline": 2}}},
          "spec.multiNode.backendType", ENUM),
    bound("parallelism-pipeline-zero", NS,
          {"spec.multiNode": {"parallelism": {"pipeline": 0}}},
          "spec.multiNode.parallelism.pipeline", GE),
    bound("parallelism-tensor-zero", NS,
          {"spec.multiNode": {"parallelism": {"tensor": 0}}},
          "spec.multiNode.parallelism.tensor", GE),
    bound("parallelism-missing", NS, {"spec.multiNode": {"backendType": "lws"}},
          "spec.multiNode.parallelism", REQUIRED),
    bound("ray-port-zero", NS,
          {"spec.multiNode": {"parallelism": {"pipeline": 2}, "ray": {"rayPort": 0}}},
          "spec.multiNode.ray.rayPort", GE),
    bound("router-host-domain-pattern", NS,
          {"spec.expose.router.hostDomainName": "Example.COM"},
          "spec.expose.router.hostDomainName", PATTERN),
    bound("router-host-domain-too-long", NS,
          {"spec.expose.router.hostDomainName": "a" * 60 + ".com"},
          "spec.expose.router.hostDomainName", MAX_LEN),
    bound("router-ingress-class-empty", NS,
          {"spec.expose.router.ingress.ingressClass": ""},
          "spec.expose.router.ingress.ingressClass", MIN_LEN),
    bound("gateway-namespace-empty", NS,
          {"spec.expose.router.gateway": {"namespace": "", "name": "gw"}},
          "spec.expose.router.gateway.namespace", MIN_LEN),
    bound("gateway-name-empty", NS,
          {"spec.expose.router.gateway": {"namespace": "gw", "name": ""}},
          "spec.expose.router.gateway.name", MIN_LEN),
    bound("backendref-kind-pattern", NS,
          {"spec.expose.router.gateway": {**GW, "backendRef": {
              "name": "p", "kind": "Inference Pool", "group": "x.io"}}},
          "spec.expose.router.gateway.backendRef.kind", PATTERN),
    bound("backendref-weight-too-big", NS,
          {"spec.expose.router.gateway": {**GW, "backendRef": {
              "name": "p", "port": 80, "weight": 1000001}}},
          "spec.expose.router.gateway.backendRef.weight", LE),
    bound("backendref-namespace-pattern", NS,
          {"spec.expose.router.gateway": {**GW, "backendRef": {
              "name": "p", "port": 80, "namespace": "Bad_NS"}}},
          "spec.expose.router.gateway.backendRef.namespace", PATTERN),
    bound("servicemonitor-interval-pattern", NS,
          {"spec.metrics.serviceMonitor.interval": "30 seconds"},
          "spec.metrics.serviceMonitor.interval", PATTERN),
    bound("servicemonitor-timeout-pattern", NS,
          {"spec.metrics.serviceMonitor.scrapeTimeout": "10sec"},
          "spec.metrics.serviceMonitor.scrapeTimeout", PATTERN),
    bound("shm-quantity-pattern", NS, {"spec.storage.sharedMemorySizeLimit": "16 GB"},
          "spec.storage.sharedMemorySizeLimit", PATTERN),
    bound("dra-claim-name-pattern", NS,
          {"spec.draResources": [{"resourceClaimName": "Bad_Name"}]},
          "spec.draResources[0].resourceClaimName", PATTERN),
    bound("dra-template-name-too-long", NS,
          {"spec.draResources": [{"resourceClaimTemplateName": "a" * 254}]},
          "spec.draResources[0].resourceClaimTemplateName", MAX_LEN),
    bound("dra-request-empty", NS,
          {"spec.draResources": [{"resourceClaimName": "a", "requests": [""]}]},
          "spec.draResources[0].requests[0]", MIN_LEN),
    bound("dra-generate-name-too-long", NS,
          {"spec.draResources": [{"claimCreationSpec": {
              "generateName": "a" * 17, "devices": [DEV]}}]},
          "spec.draResources[0].claimCreationSpec.generateName", MAX_LEN),
    bound("dra-devices-missing", NS,
          {"spec.draResources": [{"claimCreationSpec": {"generateName": "a"}}]},
          "spec.draResources[0].claimCreationSpec.devices", REQUIRED),
    bound("dra-device-name-pattern", NS,
          {"spec.draResources": [{"claimCreationSpec": {"devices": [{"name": "GPU!"}]}}]},
          "spec.draResources[0].claimCreationSpec.devices[0].name", PATTERN),
    bound("dra-driver-name-pattern", NS,
          {"spec.draResources": [{"claimCreationSpec": {"devices": [
              {"name": "gpu", "driverName": "Bad Driver"}]}}]},
          "spec.draResources[0].claimCreationSpec.devices[0].driverName", PATTERN),
    bound("dra-attribute-key-too-long", NS,
          {"spec.draResources": [{"claimCreationSpec": {"devices": [
              {"name": "gpu", "attributeSelectors": [
                  {"key": "k" * 65, "value": {"boolValue": True}}]}]}}]},
          "spec.draResources[0].claimCreationSpec.devices[0].attributeSelectors[0].key",
          MAX_LEN),
    bound("dra-attribute-op-enum", NS,
          {"spec.draResources": [{"claimCreationSpec": {"devices": [
              {"name": "gpu", "attributeSelectors": [
                  {"key": "k", "op": "Bigger", "value": {"intValue": 1}}]}]}}]},
          "spec.draResources[0].claimCreationSpec.devices[0].attributeSelectors[0].op", ENUM),
    bound("dra-attribute-string-too-long", NS,
          {"spec.draResources": [{"claimCreationSpec": {"devices": [
              {"name": "gpu", "attributeSelectors": [
                  {"key": "k", "value": {"stringValue": "s" * 65}}]}]}}]},
          "spec.draResources[0].claimCreationSpec.devices[0].attributeSelectors[0]"
          ".value.stringValue", MAX_LEN),
    bound("dra-capacity-op-enum", NS,
          {"spec.draResources": [{"claimCreationSpec": {"devices": [
              {"name": "gpu", "capacitySelectors": [
                  {"key": "memory", "op": "More", "value": "40Gi"}]}]}}]},
          "spec.draResources[0].claimCreationSpec.devices[0].capacitySelectors[0].op", ENUM),
    bound("dra-capacity-value-pattern", NS,
          {"spec.draResources": [{"claimCreationSpec": {"devices": [
              {"name": "gpu", "capacitySelectors": [
                  {"key": "memory", "value": "lots"}]}]}}]},
          "spec.draResources[0].claimCreationSpec.devices[0].capacitySelectors[0].value",
          PATTERN),
    bound("image-tag-missing", NS, {"spec.image": {"repository": "r"}},
          "spec.image.tag", REQUIRED),
    # ---- bounds, enums, patterns, NIMCache ---------------------------------------------
    bound("hf-endpoint-pattern", NC, {"spec.source": {"hf": {**HF, "endpoint": "ftp://hf"}}},
          "spec.source.hf.endpoint", PATTERN),
    bound("hf-namespace-empty", NC, {"spec.source": {"hf": {**HF, "namespace": ""}}},
          "spec.source.hf.namespace", MIN_LEN),
    bound("hf-auth-secret-empty", NC, {"spec.source": {"hf": {**HF, "authSecret": ""}}},
          "spec.source.hf.authSecret", MIN_LEN),
    bound("hf-model-puller-empty", NC, {"spec.source": {"hf": {**HF, "modelPuller": ""}}},
          "spec.source.hf.modelPuller", MIN_LEN),
    bound("hf-pull-secret-empty", NC, {"spec.source": {"hf": {**HF, "pullSecret": ""}}},
          "spec.source.hf.pullSecret", MIN_LEN),
    bound("hf-revision-empty", NC, {"spec.source": {"hf": {**HF, "revision": ""}}},
          "spec.source.hf.revision", MIN_LEN),
    bound("datastore-endpoint-pattern", NC,
          {"spec.source": {"dataStore": {**DS, "endpoint": "http://ds:3000/v2"}}},
          "spec.source.dataStore.endpoint", PATTERN),
    bound("ngc-auth-secret-missing", NC, {"spec.source.ngc.authSecret": DELETE},
          "spec.source.ngc.authSecret", REQUIRED),
    bound("storage-missing", NC, {"spec.storage": DELETE}, "spec.storage", REQUIRED),
    bound("cache-cpu-quantity-pattern", NC, {"spec.resources.cpu": "two"},
          "spec.resources.cpu", PATTERN),
    # ---- NIMBuild / NIMPipeline ----------------------------------------------------------
    bound("build-nimcache-name-missing", "NIMBuild", {"spec.nimCache": {"profile": "p"}},
          "spec.nimCache.name", REQUIRED),
    cel("pipeline-service-replicas-with-autoscaling", "NIMPipeline",
        {"spec.services[0].spec.replicas": 2, "spec.services[0].spec.scale": {
            "enabled": True, "hpa": {"maxReplicas": 3}}},
        "spec.services[0].spec", "spec.replicas cannot be set when spec.scale.enabled is true"),
)
