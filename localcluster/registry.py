"""The resources localcluster serves: built-ins from a table, plus CRDs at run time.

Each served group/version/resource is a ``ResourceInfo``. The built-in table
below has one line per resource, so adding a Kubernetes type is one line.
Custom resources are added and removed by the CRD handling in ``crd.py``;
discovery, routing, tables and storage all read from the one ``Registry``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")


@dataclass(frozen=True)
class ScaleSpec:
    """Where a resource keeps the numbers its ``/scale`` subresource exposes."""

    spec_replicas_path: str = ".spec.replicas"
    status_replicas_path: str = ".status.replicas"
    label_selector_path: str | None = ".status.selector"


@dataclass(frozen=True)
class ResourceInfo:
    """One served resource at one group/version."""

    group: str
    version: str
    resource: str
    kind: str
    namespaced: bool
    singular: str
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: frozenset[str] = frozenset()
    verbs: tuple[str, ...] = ALL_VERBS
    field_labels: tuple[str, ...] = ()
    scale: ScaleSpec | None = None
    crd: bool = False
    storage_version: str = ""
    schema: Mapping[str, Any] | None = None
    printer_columns: tuple[Mapping[str, Any], ...] = ()
    preserve_unknown_fields: bool = False
    selectable_fields: tuple[str, ...] = field(default=())

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> tuple[str, str]:
        return (self.group, self.resource)

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def qualified(self) -> str:
        return f"{self.resource}.{self.group}" if self.group else self.resource


def split_api_version(api_version: str) -> tuple[str, str]:
    """``apps/v1`` -> ``("apps", "v1")``; ``v1`` -> ``("", "v1")``."""
    group, sep, version = api_version.rpartition("/")
    return (group, version) if sep else ("", api_version)


_POD_FIELDS = (
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
)
_EVENT_FIELDS = (
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
)
_EVENTS_V1_FIELDS = (
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
)
_DEFAULT_SCALE = ScaleSpec()


def _b(  # noqa: PLR0917 - one positional line per resource keeps the table readable
    gv: str,
    resource: str,
    kind: str,
    namespaced: bool,
    short: str = "",
    sub: str = "",
    cats: str = "",
    fields: tuple[str, ...] = (),
) -> ResourceInfo:
    group, version = split_api_version(gv)
    subs = frozenset(s for s in sub.split(",") if s)
    return ResourceInfo(
        group=group,
        version=version,
        resource=resource,
        kind=kind,
        namespaced=namespaced,
        singular=kind.lower(),
        short_names=tuple(s for s in short.split(",") if s),
        categories=tuple(c for c in cats.split(",") if c),
        subresources=subs,
        field_labels=fields,
        scale=_DEFAULT_SCALE if "scale" in subs else None,
        storage_version=version,
    )


def _review(gv: str, resource: str, kind: str) -> ResourceInfo:
    """A create-only, never-stored review resource (answered by ``reviews.py``)."""
    group, version = split_api_version(gv)
    return ResourceInfo(
        group=group,
        version=version,
        resource=resource,
        kind=kind,
        namespaced=False,
        singular=kind.lower(),
        verbs=("create",),
        storage_version=version,
    )


NS, CLUSTER = True, False
_POD_SUBRESOURCES = "status,log,eviction,proxy,exec,portforward,attach"
_AX = "api-extensions"
_ADM = "admissionregistration.k8s.io/v1"
_HPA = "HorizontalPodAutoscaler"

# One line per built-in resource: apiVersion, plural, kind, namespaced,
# short names, subresources, categories, extra selectable fields.
BUILTINS: tuple[ResourceInfo, ...] = (
    _b("v1", "namespaces", "Namespace", CLUSTER, "ns", "status", fields=("status.phase",)),
    _b("v1", "nodes", "Node", CLUSTER, "no", "status", fields=("spec.unschedulable",)),
    _b("v1", "pods", "Pod", NS, "po", _POD_SUBRESOURCES, "all", _POD_FIELDS),
    _b("v1", "services", "Service", NS, "svc", "status,proxy", "all"),
    _b("v1", "endpoints", "Endpoints", NS, "ep"),
    _b("v1", "configmaps", "ConfigMap", NS, "cm"),
    _b("v1", "secrets", "Secret", NS, fields=("type",)),
    _b("v1", "serviceaccounts", "ServiceAccount", NS, "sa", "token"),
    _b("v1", "persistentvolumeclaims", "PersistentVolumeClaim", NS, "pvc", "status"),
    _b("v1", "persistentvolumes", "PersistentVolume", CLUSTER, "pv", "status"),
    _b("v1", "events", "Event", NS, "ev", fields=_EVENT_FIELDS),
    _b("v1", "resourcequotas", "ResourceQuota", NS, "quota", "status"),
    _b("v1", "limitranges", "LimitRange", NS, "limits"),
    _b("events.k8s.io/v1", "events", "Event", NS, "ev", fields=_EVENTS_V1_FIELDS),
    _b("apps/v1", "deployments", "Deployment", NS, "deploy", "status,scale", "all"),
    _b("apps/v1", "replicasets", "ReplicaSet", NS, "rs", "status,scale", "all"),
    _b("apps/v1", "statefulsets", "StatefulSet", NS, "sts", "status,scale", "all"),
    _b("apps/v1", "daemonsets", "DaemonSet", NS, "ds", "status", "all"),
    _b("apps/v1", "controllerrevisions", "ControllerRevision", NS),
    _b("batch/v1", "jobs", "Job", NS, "", "status", "all", ("status.successful",)),
    _b("batch/v1", "cronjobs", "CronJob", NS, "cj", "status", "all"),
    _b("rbac.authorization.k8s.io/v1", "roles", "Role", NS),
    _b("rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", NS),
    _b("rbac.authorization.k8s.io/v1", "clusterroles", "ClusterRole", CLUSTER),
    _b("rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", CLUSTER),
    _b("networking.k8s.io/v1", "ingresses", "Ingress", NS, "ing", "status"),
    _b("networking.k8s.io/v1", "ingressclasses", "IngressClass", CLUSTER),
    _b("networking.k8s.io/v1", "networkpolicies", "NetworkPolicy", NS, "netpol"),
    _b("autoscaling/v2", "horizontalpodautoscalers", _HPA, NS, "hpa", "status", "all"),
    _b("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", NS, "pdb", "status"),
    _b("coordination.k8s.io/v1", "leases", "Lease", NS),
    _b("scheduling.k8s.io/v1", "priorityclasses", "PriorityClass", CLUSTER, "pc"),
    _b("node.k8s.io/v1", "runtimeclasses", "RuntimeClass", CLUSTER),
    _b("storage.k8s.io/v1", "storageclasses", "StorageClass", CLUSTER, "sc"),
    _b("discovery.k8s.io/v1", "endpointslices", "EndpointSlice", NS),
    _b("resource.k8s.io/v1", "deviceclasses", "DeviceClass", CLUSTER),
    _b("resource.k8s.io/v1", "resourceclaims", "ResourceClaim", NS, "", "status"),
    _b("resource.k8s.io/v1", "resourceclaimtemplates", "ResourceClaimTemplate", NS),
    _b("resource.k8s.io/v1", "resourceslices", "ResourceSlice", CLUSTER,
       fields=("spec.nodeName", "spec.driver")),
    _b("apiextensions.k8s.io/v1", "customresourcedefinitions", "CustomResourceDefinition",
       CLUSTER, "crd,crds", "status", _AX),
    _b(_ADM, "validatingwebhookconfigurations", "ValidatingWebhookConfiguration", CLUSTER,
       cats=_AX),
    _b(_ADM, "mutatingwebhookconfigurations", "MutatingWebhookConfiguration", CLUSTER, cats=_AX),
    _b(_ADM, "validatingadmissionpolicies", "ValidatingAdmissionPolicy", CLUSTER, "", "status",
       _AX),
    _b(_ADM, "validatingadmissionpolicybindings", "ValidatingAdmissionPolicyBinding", CLUSTER,
       cats=_AX),
    _b("apiregistration.k8s.io/v1", "apiservices", "APIService", CLUSTER, "", "status", _AX),
    _review("authorization.k8s.io/v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview"),
    _review("authorization.k8s.io/v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview"),
    _review("authorization.k8s.io/v1", "subjectaccessreviews", "SubjectAccessReview"),
    _review("authentication.k8s.io/v1", "selfsubjectreviews", "SelfSubjectReview"),
)  # fmt: skip

# Preferred order of groups in discovery (kube-apiserver lists legacy groups first).
_GROUP_ORDER = (
    "",
    "apiregistration.k8s.io",
    "apps",
    "events.k8s.io",
    "autoscaling",
    "batch",
    "networking.k8s.io",
    "policy",
    "rbac.authorization.k8s.io",
    "storage.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "coordination.k8s.io",
    "node.k8s.io",
    "discovery.k8s.io",
    "resource.k8s.io",
    "authentication.k8s.io",
    "authorization.k8s.io",
)


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes' version ordering: GA > beta > alpha, higher numbers first."""
    import re

    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0)
    major = int(m.group(1))
    stage = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor)


class Registry:
    """Known resources, looked up by group/version/resource or by kind."""

    def __init__(self, resources: Iterable[ResourceInfo] = BUILTINS) -> None:
        self._by_gvr: dict[tuple[str, str, str], ResourceInfo] = {}
        self._by_gvk: dict[tuple[str, str, str], ResourceInfo] = {}
        self._group_order: list[str] = list(_GROUP_ORDER)
        self.generation = 0
        for info in resources:
            self.add(info)

    def add(self, info: ResourceInfo) -> None:
        self._by_gvr[(info.group, info.version, info.resource)] = info
        self._by_gvk[(info.group, info.version, info.kind)] = info
        if info.group not in self._group_order:
            self._group_order.append(info.group)
        self.generation += 1

    def remove_group_resource(self, group: str, resource: str) -> list[ResourceInfo]:
        """Forget every version of *group*/*resource*; returns what was removed."""
        gone = [i for i in self._by_gvr.values() if i.group == group and i.resource == resource]
        for info in gone:
            self._by_gvr.pop((info.group, info.version, info.resource), None)
            if self._by_gvk.get((info.group, info.version, info.kind)) is info:
                self._by_gvk.pop((info.group, info.version, info.kind), None)
        if gone:
            self.generation += 1
        return gone

    def get(self, group: str, version: str, resource: str) -> ResourceInfo | None:
        return self._by_gvr.get((group, version, resource))

    def get_by_kind(self, api_version: str, kind: str) -> ResourceInfo | None:
        group, version = split_api_version(api_version)
        return self._by_gvk.get((group, version, kind))

    def versions_of(self, group: str, resource: str) -> list[ResourceInfo]:
        return [i for i in self._by_gvr.values() if i.group == group and i.resource == resource]

    def all(self) -> list[ResourceInfo]:
        return list(self._by_gvr.values())

    def groups(self) -> list[tuple[str, list[str]]]:
        """``[(group, [versions, preferred first]), ...]`` in discovery order."""
        versions: dict[str, set[str]] = {}
        for g, v, _ in self._by_gvr:
            versions.setdefault(g, set()).add(v)
        out: list[tuple[str, list[str]]] = []
        for g in self._group_order:
            if g in versions:
                out.append((g, sorted(versions[g], key=_version_priority)))
        return out

    def resources(self, group: str, version: str) -> list[ResourceInfo]:
        return sorted(
            (i for (g, v, _), i in self._by_gvr.items() if g == group and v == version),
            key=lambda i: i.resource,
        )

    def is_custom(self, group: str, resource: str) -> bool:
        return any(i.crd for i in self.versions_of(group, resource))
