"""What the four GPUCluster states share: the cluster facts they render against, the
DRA API version they write, the operand metadata taken from ``spec.daemonsets``,
the admin-access ResourceClaimTemplates, and the per-state image resolution.

The DRA API version is NVIDIA's choice (gpucluster.md §3): the newest
``resource.k8s.io`` version serving DeviceClass, v1 > v1beta2 > v1beta1; none
is an error that names the problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from api.nvidia.v1.clusterpolicy import DaemonsetsSpec
from platforms.gpu.errors import RenderError

__all__ = [
    "DRA_API_VERSIONS",
    "DRA_NOT_SERVED_MESSAGE",
    "GPUClusterFacts",
    "admin_claim_template",
    "dra_api_version",
    "env_list",
    "image_of",
    "object_meta",
    "pod_meta",
    "pull_secrets",
    "tolerations",
]

DRA_API_VERSIONS: Final = (
    "resource.k8s.io/v1",
    "resource.k8s.io/v1beta2",
    "resource.k8s.io/v1beta1",
)
"""Preferred first."""
DRA_NOT_SERVED_MESSAGE: Final = (
    "the resource.k8s.io DeviceClass API is not served by the cluster; "
    "ensure Dynamic Resource Allocation is enabled on the API server and kubelet"
)
EXCLUDED_POD_LABELS: Final = ("app", "app.kubernetes.io/part-of")


@dataclass(frozen=True)
class GPUClusterFacts:
    """What a GPUCluster renders against besides its spec."""

    operator_namespace: str
    operator_env: Mapping[str, str] = field(default_factory=dict)
    """The operator pod's image fallbacks (``DRA_DRIVER_IMAGE``, ``VALIDATOR_IMAGE``...)."""
    dra_versions: frozenset[str] = frozenset({"resource.k8s.io/v1"})
    """``resource.k8s.io`` versions serving DeviceClass."""
    service_monitor: bool = False
    """Whether monitoring.coreos.com/v1 ServiceMonitor is served."""
    cluster_policies: tuple[str, ...] = ()
    """Names of the ClusterPolicies that exist (any one blocks the GPUCluster)."""


def dra_api_version(facts: GPUClusterFacts) -> str:
    """The apiVersion of DeviceClasses and ResourceClaimTemplates; RenderError when none."""
    for version in DRA_API_VERSIONS:
        if version in facts.dra_versions:
            return version
    raise RenderError(f"failed to get DRA resource apiVersion: {DRA_NOT_SERVED_MESSAGE}")


class _Image(Protocol):
    repository: str | None
    image: str | None
    version: str | None


def image_of(spec: _Image | None, env_name: str, env: Mapping[str, str], field_name: str) -> str:
    """NVIDIA's image path: ``repository/image:version``, ``image`` alone, or ``env_name``
    from the operator pod; RenderError naming the field when none gives one."""
    repository, image, version = (
        (spec.repository or "", spec.image or "", spec.version or "") if spec else ("", "", "")
    )
    if image and not repository and not version:
        return image
    if repository or image or version:
        if not (repository and image and version):
            raise RenderError(
                f"spec.{field_name}: repository, image and version must all be set "
                f"(got repository={repository!r}, image={image!r}, version={version!r})"
            )
        return f"{repository}/{image}{'@' if version.startswith('sha256:') else ':'}{version}"
    from_env = env.get(env_name, "")
    if from_env:
        return from_env
    raise RenderError(
        f"spec.{field_name}: empty image path provided through both GPUCluster CR "
        f"and ENV {env_name}"
    )


def object_meta(
    name: str, namespace: str | None, labels: Mapping[str, str], ds: DaemonsetsSpec
) -> dict[str, Any]:
    """A workload's metadata: its own labels, then every ``daemonsets.labels``; annotations."""
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    meta["labels"] = {**labels, **(ds.labels or {})}
    if ds.annotations:
        meta["annotations"] = dict(ds.annotations)
    return meta


def pod_meta(
    labels: Mapping[str, str], ds: DaemonsetsSpec, annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A pod template's metadata: ``daemonsets.labels`` except ``app`` and
    ``app.kubernetes.io/part-of``; ``daemonsets.annotations`` then ``annotations``."""
    extra = {k: v for k, v in (ds.labels or {}).items() if k not in EXCLUDED_POD_LABELS}
    meta: dict[str, Any] = {"labels": {**labels, **extra}}
    merged = {**(ds.annotations or {}), **(annotations or {})}
    if merged:
        meta["annotations"] = merged
    return meta


def tolerations(ds: DaemonsetsSpec) -> list[dict[str, Any]]:
    """``daemonsets.tolerations`` as written."""
    return [dict(t) for t in ds.tolerations or []]


def pull_secrets(secrets: list[str] | None) -> list[dict[str, str]]:
    """``imagePullSecrets`` entries."""
    return [{"name": s} for s in secrets or []]


def env_list(env: list[Any] | None) -> list[dict[str, str]]:
    """User env (``name``/``value`` pairs; NVIDIA's templates write only the value)."""
    return [{"name": e.name, "value": e.value or ""} for e in env or []]


def admin_claim_template(
    name: str,
    namespace: str,
    request: str,
    api_version: str,
    *,
    count: int | None = None,
) -> dict[str, Any]:
    """A ResourceClaimTemplate for ``gpu.nvidia.com`` devices with ``adminAccess``:
    all of them, or ``count`` (ExactCount). v1/v1beta2 nest the request under ``exactly``."""
    device: dict[str, Any] = {
        "deviceClassName": "gpu.nvidia.com",
        "allocationMode": "All" if count is None else "ExactCount",
    }
    if count is not None:
        device["count"] = count
    device["adminAccess"] = True
    entry: dict[str, Any] = {"name": request}
    if api_version == "resource.k8s.io/v1beta1":
        entry.update(device)
    else:
        entry["exactly"] = device
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": {"devices": {"requests": [entry]}}},
    }
