"""The ecosystem ``nimctl local`` installs next to the nimctl CRDs, so every NIM sample can run.

NVIDIA's NIMService samples use APIs from other projects. localcluster serves
DRA (``resource.k8s.io/v1``) built in and simulates the rest once their CRDs
exist; this module is what installing those projects leaves behind:

- LeaderWorkerSet (``leaderworkerset.x-k8s.io/v1``, with the scale subresource);
- the Gateway API routes and gateways (``gateway.networking.k8s.io/v1``) and the
  Inference Extension's InferencePool (``inference.networking.k8s.io/v1``);
- Prometheus Operator's ServiceMonitor (``monitoring.coreos.com/v1``);
- NVIDIA's DRA driver's ComputeDomain (``resource.nvidia.com/v1beta1``);
- KServe: its CRD, ``inferenceservice-config`` and controller Deployment
  (``simulator.kserve.kserve_objects``), by default in Standard mode.

The CRDs keep their real names, groups, versions, short names and
subresources; their schemas accept any content (the simulator, not the
schema, gives them behaviour), except the Gateway API routes': the parts of
their published schemas that NIMService's routes use (``addons_schemas``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from localcluster.addons_schemas import route_schema
from localcluster.simulator.kserve import kserve_objects
from nimctl_runtime.client import AlreadyExists, ApiError, Client
from nimctl_runtime.meta import Obj

__all__ = ["ecosystem_crds", "ecosystem_objects", "install_ecosystem"]

# group, version, plural, kind, short names, scale subresource
_CRDS: tuple[tuple[str, str, str, str, tuple[str, ...], bool], ...] = (
    ("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", ("lws",), True),
    ("gateway.networking.k8s.io", "v1", "gatewayclasses", "GatewayClass", ("gc",), False),
    ("gateway.networking.k8s.io", "v1", "gateways", "Gateway", ("gtw",), False),
    ("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute", (), False),
    ("gateway.networking.k8s.io", "v1", "grpcroutes", "GRPCRoute", (), False),
    ("inference.networking.k8s.io", "v1", "inferencepools", "InferencePool", ("infpool",), False),
    ("monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor", ("smon",), False),
    ("resource.nvidia.com", "v1beta1", "computedomains", "ComputeDomain", (), False),
)
_CLUSTER_SCOPED = frozenset({"GatewayClass"})


def _crd(  # noqa: PLR0917 - one row of _CRDS
    group: str, version: str, plural: str, kind: str, short: tuple[str, ...], scale: bool
) -> Obj:
    subresources: Obj = {"status": {}}
    if scale:
        subresources["scale"] = {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.hpaPodSelector",
        }
    names: Obj = {
        "plural": plural,
        "singular": kind.lower(),
        "kind": kind,
        "listKind": f"{kind}List",
    }
    if short:
        names["shortNames"] = list(short)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster" if kind in _CLUSTER_SCOPED else "Namespaced",
            "names": names,
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": subresources,
                    "schema": {"openAPIV3Schema": _schema(kind)},
                }
            ],
        },
    }


def _schema(kind: str) -> Obj:
    if kind in ("HTTPRoute", "GRPCRoute"):
        return route_schema(http=kind == "HTTPRoute")
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def ecosystem_crds() -> list[Obj]:
    """The optional CRDs a NIMService may own (KServe's comes with ``kserve_objects``)."""
    return [_crd(*spec) for spec in _CRDS]


def ecosystem_objects(kserve_mode: str = "Standard") -> list[Obj]:
    """Every object of the ecosystem, CRDs first."""
    kserve = kserve_objects(kserve_mode)
    crds = [o for o in kserve if o["kind"] == "CustomResourceDefinition"]
    rest = [o for o in kserve if o["kind"] != "CustomResourceDefinition"]
    return [*ecosystem_crds(), *crds, *rest]


async def install_ecosystem(
    client: Client, *, kserve_mode: str = "Standard", wait_seconds: float = 30.0
) -> list[str]:
    """Create what is missing and wait until the CRDs are served; returns the kinds served."""
    objects = ecosystem_objects(kserve_mode)
    for obj in objects:
        try:
            await client.create(obj)
        except AlreadyExists:
            continue
    served: list[str] = []
    async with asyncio.timeout(wait_seconds):
        for crd in (o for o in objects if o["kind"] == "CustomResourceDefinition"):
            spec: Mapping[str, Any] = crd["spec"]
            api_version = f"{spec['group']}/{spec['versions'][0]['name']}"
            kind = str(spec["names"]["kind"])
            while True:
                try:
                    await client.mapper.rest_mapping(api_version, kind)
                    break
                except ApiError:
                    await asyncio.sleep(0.1)
            served.append(kind)
    return served
