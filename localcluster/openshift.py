"""Opt-in: what an OpenShift cluster serves beside Kubernetes, for operators that look for it.

Operators tell OpenShift from Kubernetes by the APIs and objects only OpenShift
has. ``install_openshift`` gives a LocalCluster those of them (a real OpenShift
serves them from its own API servers and CRDs; vanilla Kubernetes has none):

- ``config.openshift.io/v1`` ClusterVersion (cluster-scoped, status subresource)
  and the ``version`` object, whose ``status.history`` holds one ``Completed``
  update to the given release and ``status.desired`` that release;
- ``config.openshift.io/v1`` Proxy and the ``cluster`` object (its spec: the
  cluster-wide ``httpProxy``/``httpsProxy``/``noProxy`` and ``trustedCA``; empty
  when no proxy is given, as on a cluster without one);
- ``security.openshift.io/v1`` SecurityContextConstraints and the built-in
  ``privileged``, ``hostmount-anyuid``, ``anyuid``, ``nonroot`` and ``restricted``
  SCCs (their main fields; localcluster admits pods without checking SCCs);
- the ``openshift-monitoring`` namespace (cluster monitoring's);
- ``image.openshift.io/v1`` ImageStream, the ``openshift`` namespace and its
  ``driver-toolkit`` ImageStream: one tag per RHCOS release of the cluster's
  nodes, naming that release's Driver Toolkit image, plus ``latest``.

Nodes running RHCOS come from a node profile (``gpu-openshift``: NFD's
``rhcos`` OS labels with ``OSTREE_VERSION``, and cri-o). The schemas accept any
content; nothing here simulates OpenShift's behaviour.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any, Final

from nimctl_runtime.client import AlreadyExists, ApiError, Client
from nimctl_runtime.meta import Obj

__all__ = [
    "DEFAULT_RHCOS",
    "DEFAULT_VERSION",
    "install_openshift",
    "openshift_crds",
    "openshift_objects",
]

DEFAULT_VERSION: Final = "4.16.3"
DEFAULT_RHCOS: Final = "416.94.202410211619-0"
DTK_REPOSITORY: Final = "quay.io/openshift-release-dev/ocp-v4.0-art-dev"

# group, version, plural, kind, namespaced, status subresource
_CRDS: Final[tuple[tuple[str, str, str, str, bool, bool], ...]] = (
    ("config.openshift.io", "v1", "clusterversions", "ClusterVersion", False, True),
    ("config.openshift.io", "v1", "proxies", "Proxy", False, True),
    (
        "security.openshift.io",
        "v1",
        "securitycontextconstraints",
        "SecurityContextConstraints",
        False,
        False,
    ),
    ("image.openshift.io", "v1", "imagestreams", "ImageStream", True, True),
)
_SHORT_NAMES: Final[Mapping[str, list[str]]] = {
    "SecurityContextConstraints": ["scc"],
    "ImageStream": ["is"],
}


def _crd(  # noqa: PLR0917 - one row of _CRDS
    group: str, version: str, plural: str, kind: str, namespaced: bool, status: bool
) -> Obj:
    names: Obj = {
        "plural": plural,
        "singular": kind.lower(),
        "kind": kind,
        "listKind": f"{kind}List",
    }
    if kind in _SHORT_NAMES:
        names["shortNames"] = list(_SHORT_NAMES[kind])
    served: Obj = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if status:
        served["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced" if namespaced else "Cluster",
            "names": names,
            "versions": [served],
        },
    }


def openshift_crds() -> list[Obj]:
    """The CRDs of the OpenShift kinds above."""
    return [_crd(*row) for row in _CRDS]


def _scc(name: str, *, privileged: bool, host_dirs: bool, run_as: str, users: list[str]) -> Obj:
    return {
        "apiVersion": "security.openshift.io/v1",
        "kind": "SecurityContextConstraints",
        "metadata": {"name": name},
        "allowHostDirVolumePlugin": host_dirs,
        "allowHostIPC": privileged,
        "allowHostNetwork": privileged,
        "allowHostPID": privileged,
        "allowHostPorts": privileged,
        "allowPrivilegeEscalation": True,
        "allowPrivilegedContainer": privileged,
        "allowedCapabilities": ["*"] if privileged else None,
        "readOnlyRootFilesystem": False,
        "runAsUser": {"type": run_as},
        "seLinuxContext": {"type": "RunAsAny" if privileged else "MustRunAs"},
        "fsGroup": {"type": "RunAsAny"},
        "supplementalGroups": {"type": "RunAsAny"},
        "volumes": ["*"],
        "users": users,
        "groups": ["system:cluster-admins", "system:nodes"] if privileged else [],
    }


def openshift_objects(
    *,
    version: str = DEFAULT_VERSION,
    rhcos: Iterable[str] = (DEFAULT_RHCOS,),
    proxy: Mapping[str, Any] | None = None,
) -> list[Obj]:
    """The objects above, for OpenShift ``version`` with nodes on the RHCOS releases
    ``rhcos`` and the cluster-wide ``proxy`` spec (None: no proxy)."""
    releases = sorted(set(rhcos))
    tags: list[Obj] = [
        {
            "name": r,
            "from": {"kind": "DockerImage", "name": f"{DTK_REPOSITORY}@sha256:{_digest(r)}"},
        }
        for r in releases
    ]
    if releases:
        tags.append({"name": "latest", "from": dict(tags[-1]["from"])})
    return [
        {
            "apiVersion": "config.openshift.io/v1",
            "kind": "ClusterVersion",
            "metadata": {"name": "version"},
            "spec": {
                "channel": f"stable-{'.'.join(version.split('.')[:2])}",
                "clusterID": _digest(version)[:32],
            },
            "status": {
                "desired": {"version": version},
                "history": [
                    {
                        "state": "Completed",
                        "version": version,
                        "verified": False,
                        "startedTime": "2026-01-01T00:00:00Z",
                        "completionTime": "2026-01-01T00:40:00Z",
                    }
                ],
                "observedGeneration": 1,
            },
        },
        {
            "apiVersion": "config.openshift.io/v1",
            "kind": "Proxy",
            "metadata": {"name": "cluster"},
            "spec": dict(proxy or {}),
        },
        _scc(
            "privileged",
            privileged=True,
            host_dirs=True,
            run_as="RunAsAny",
            users=["system:admin", "system:serviceaccount:openshift-infra:build-controller"],
        ),
        _scc(
            "hostmount-anyuid",
            privileged=False,
            host_dirs=True,
            run_as="RunAsAny",
            users=["system:serviceaccount:openshift-infra:pv-recycler-controller"],
        ),
        _scc("anyuid", privileged=False, host_dirs=False, run_as="RunAsAny", users=[]),
        _scc("nonroot", privileged=False, host_dirs=False, run_as="MustRunAsNonRoot", users=[]),
        _scc("restricted", privileged=False, host_dirs=False, run_as="MustRunAsRange", users=[]),
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift"}},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-monitoring"}},
        {
            "apiVersion": "image.openshift.io/v1",
            "kind": "ImageStream",
            "metadata": {"name": "driver-toolkit", "namespace": "openshift"},
            "spec": {"lookupPolicy": {"local": False}, "tags": tags},
        },
    ]


def _digest(seed: str) -> str:
    return hashlib.sha256(seed.encode()).hexdigest()


async def _served(client: Client, crds: list[Obj]) -> None:
    for crd in crds:
        spec = crd["spec"]
        api_version = f"{spec['group']}/{spec['versions'][0]['name']}"
        while True:
            try:
                await client.mapper.rest_mapping(api_version, spec["names"]["kind"])
                break
            except ApiError:
                await asyncio.sleep(0.1)


async def install_openshift(
    client: Client,
    *,
    version: str = DEFAULT_VERSION,
    rhcos: Iterable[str] = (DEFAULT_RHCOS,),
    proxy: Mapping[str, Any] | None = None,
    wait_seconds: float = 30.0,
) -> list[Obj]:
    """Create the CRDs, wait until served, then the objects (status written through the
    status subresource, as OpenShift's operators do); returns the objects as stored."""
    crds = openshift_crds()
    for crd in crds:
        try:
            await client.create(crd)
        except AlreadyExists:
            continue
    async with asyncio.timeout(wait_seconds):
        await _served(client, crds)
    out: list[Obj] = []
    for obj in openshift_objects(version=version, rhcos=rhcos, proxy=proxy):
        try:
            created = await client.create(obj)
        except AlreadyExists:
            meta = obj["metadata"]
            created = await client.get(
                obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")
            )
        if "status" in obj and created.get("status") != obj["status"]:
            created = await client.update_status({**created, "status": obj["status"]})
        out.append(created)
    return out
