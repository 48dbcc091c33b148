"""What every controller's setup uses: discovery, cache filters, options, owned-kind watches.

Kind modules (``controllers.nimservice``, ``controllers.nemo``, ...) write
their ``setup_<kind>(manager, client, options)`` against this module;
``controllers.setup`` lists them in ``CONTROLLERS``. Keeping these helpers
here, below both, is what lets a kind module and the registry import each
other's side without an import circle.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from manifests.labels import MANAGED_BY_LABEL, MANAGED_BY_VALUE
from nimctl_runtime.builder import Builder
from nimctl_runtime.cache.cache import ByObject
from nimctl_runtime.client.client import Client
from nimctl_runtime.client.errors import ApiError
from nimctl_runtime.expectations import CreateExpectations
from nimctl_runtime.handler import UpdateEvent
from nimctl_runtime.manager import Manager
from nimctl_runtime.meta import OWNER_UID_INDEX, dig, owner_uid_index
from nimctl_runtime.predicate import Funcs
from platforms.capabilities import DISCOVERED_GVKS, GVK, Capabilities

__all__ = [
    "ALSO_FILTERED",
    "ALWAYS_FILTERED",
    "CRD",
    "FILTERED_IF_PRESENT",
    "SECRET",
    "ControllerEntry",
    "SetupFn",
    "SetupOptions",
    "crd_without_schemas",
    "discover_capabilities",
    "filtered_cache_options",
    "own_kinds",
    "secret_without_values",
    "spec_change_predicate",
    "spec_changed",
]


SECRET: GVK = ("v1", "Secret")


def secret_without_values(obj: dict[str, Any]) -> dict[str, Any]:
    """Cache transform for Secrets: keep metadata and key names, drop every value."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    keys = {**(obj.get("data") or {}), **(obj.get("stringData") or {})}
    obj.pop("stringData", None)
    obj["data"] = dict.fromkeys(keys, "")
    return obj


CRD: GVK = ("apiextensions.k8s.io/v1", "CustomResourceDefinition")
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
_CRD_VERSION_FIELDS = ("name", "served", "storage", "deprecated")


def crd_without_schemas(obj: dict[str, Any]) -> dict[str, Any]:
    """Cache transform for CRDs: keep what says which kinds are served, drop the schemas.

    The operator reads a CRD's group, kind, versions (name, served) and its
    ``Established`` condition to notice an optional API come or go; the
    OpenAPI schemas (10-500 KB per CRD, a cluster may have hundreds) and
    kubectl's last-applied copy of them are never read.
    """
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
        annotations = meta.get("annotations")
        if isinstance(annotations, dict):
            annotations.pop(LAST_APPLIED, None)
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("versions"), list):
        spec["versions"] = [
            {k: v[k] for k in _CRD_VERSION_FIELDS if k in v}
            for v in spec["versions"]
            if isinstance(v, dict)
        ]
    return obj


def spec_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """NVIDIA's update filter: spec changed, or deletion started."""
    if old.get("spec") != new.get("spec"):
        return True
    return bool(dig(new, "metadata", "deletionTimestamp")) and not bool(
        dig(old, "metadata", "deletionTimestamp")
    )


ALWAYS_FILTERED: tuple[GVK, ...] = (
    ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"),
    ("v1", "Service"),
    ("autoscaling/v2", "HorizontalPodAutoscaler"),
    ("batch/v1", "Job"),
    ("v1", "Pod"),
)
#: Kinds NVIDIA caches whole (every ServiceAccount, Role and RoleBinding of the
#: cluster) that nimctl filters too: it only ever reads the ones it made, which
#: carry the label (an unlabelled one of the same name is read through the API
#: when the create answers AlreadyExists, then labelled by the update).
ALSO_FILTERED: tuple[GVK, ...] = (
    ("v1", "ServiceAccount"),
    ("rbac.authorization.k8s.io/v1", "Role"),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
)
FILTERED_IF_PRESENT: tuple[GVK, ...] = (
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
    ("gateway.networking.k8s.io/v1", "GRPCRoute"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    ("serving.kserve.io/v1beta1", "InferenceService"),
)


async def discover_capabilities(
    client: Client, gvks: Iterable[GVK] = DISCOVERED_GVKS
) -> Capabilities:
    """Which optional (and OpenShift) kinds the API server serves (discovery; a miss is
    not an error)."""
    present: set[GVK] = set()
    for api_version, kind in gvks:
        try:
            await client.mapper.rest_mapping(api_version, kind)
        except ApiError:
            continue
        present.add((api_version, kind))
    return Capabilities.from_gvks(present)


def filtered_cache_options(capabilities: Capabilities) -> dict[GVK, ByObject]:
    """``ByObject`` label filters for the kinds the operator creates (NVIDIA's filtered cache),
    and the transforms and index choices that keep the rest of the cache small."""
    selector = {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
    kinds = [*ALWAYS_FILTERED, *ALSO_FILTERED]
    kinds += [g for g in FILTERED_IF_PRESENT if capabilities.has(g)]
    out = {gvk: ByObject(label_selector=selector) for gvk in kinds}
    # Nodes are read whole (orchestrator, GPU products), never by label selector.
    out[("v1", "Node")] = ByObject(index_labels=False, keep_labels=False)
    out[CRD] = ByObject(transform=crd_without_schemas, index_labels=False, keep_labels=False)
    return out


def spec_change_predicate() -> Funcs:
    """Updates of the primary kind pass only when spec changed or deletion started."""

    def update(event: UpdateEvent) -> bool:
        return spec_changed(event.object_old, event.object_new)

    return Funcs(update=update)


def own_kinds(
    builder: Builder,
    manager: Manager,
    kinds: Iterable[GVK],
    expectations: CreateExpectations | None = None,
    *,
    read_by_gather: Iterable[GVK] = (),
) -> Builder:
    """``owns`` every kind, with the owner-UID index the skeleton's prune reads.

    With the reconciler's ``expectations``, the ADDED echo of a create the
    reconciler made (and saw the answer of) queues nothing
    (``nimctl_runtime.expectations``). Only for a kind whose readiness reads the
    created object from the pass (``Observed``): a kind the binding's ``gather``
    reads from the cache (``read_by_gather``: the pass computed its status with
    the object still absent) keeps waking its owner when it appears.
    """
    echo = (expectations.predicate(),) if expectations is not None else ()
    gathered = set(read_by_gather)
    for api_version, kind in kinds:
        with contextlib.suppress(ValueError):  # another controller owning this kind added it
            manager.cache.add_index(api_version, kind, OWNER_UID_INDEX, owner_uid_index)
        predicates = () if (api_version, kind) in gathered else echo
        builder.owns(api_version, kind, predicates=predicates)
    return builder


@dataclass(frozen=True)
class SetupOptions:
    """What the composition root hands every controller's setup."""

    capabilities: Capabilities
    operator_version: str = ""
    max_concurrent_reconciles: int = 4
    model_query: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


SetupFn = Callable[[Manager, Client, SetupOptions], None]


@dataclass(frozen=True)
class ControllerEntry:
    """One controller: its name, its group (``nim``, ``nemo``, ``gpu``) and its setup."""

    name: str
    group: str
    setup: SetupFn
