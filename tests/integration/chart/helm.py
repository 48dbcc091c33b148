"""Rendering charts/nimctl with Helm itself (helm-python-sdk embeds Helm's Go SDK).

``render`` is ``helm template``: the chart's values merged with the overrides,
checked against values.schema.json, rendered for a release name, namespace,
Kubernetes version and the API versions the cluster serves (what
``.Capabilities.APIVersions`` sees), and split into objects in Helm's install
order. Tests that need Helm call ``require_helm()`` first: it skips with the
reason when the package is missing.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

CHART = Path(__file__).resolve().parents[3] / "charts" / "nimctl"
KUBE_VERSION = "v1.32.0"

# helm.sh/helm/v4 pkg/release/util InstallOrder (kinds not listed go last).
INSTALL_ORDER = [
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange",
    "PodSecurityPolicy", "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList",
    "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
    "CustomResourceDefinition", "ClusterRole", "ClusterRoleList", "ClusterRoleBinding",
    "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList", "Service",
    "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment",
    "HorizontalPodAutoscaler", "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress",
    "APIService", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
]


def require_helm() -> Any:
    """The helm_python module, or skip the test saying how to get it."""
    try:
        import helm_python
    except (ImportError, OSError) as exc:
        pytest.skip(
            f"Helm is not available ({exc}): `pip install helm-python-sdk` (it embeds Helm's Go "
            "SDK; .ci/run installs it)"
        )
    return helm_python


def _manifests(
    values: dict[str, Any] | None,
    *,
    name: str,
    namespace: str,
    api_versions: list[str] | None,
) -> dict[str, str]:
    """Helm's rendered templates by path (NOTES.txt included), after the schema check."""
    helm = require_helm()
    from helm_python import _native  # Chart.render does not take api_versions yet

    opts = {
        "name": name,
        "namespace": namespace,
        "is_install": True,
        "kube_version": KUBE_VERSION,
        "api_versions": list(api_versions or []),
    }
    with helm.Chart.load(str(CHART)) as chart:
        chart.validate_schema(values or {})
        raw = _native.call_string(
            "helm_render", chart._raw(), json.dumps(values or {}), json.dumps(opts)
        )
    manifests: dict[str, str] = json.loads(raw)
    return manifests


def notes(values: dict[str, Any] | None = None, *, namespace: str = "nimctl-system") -> str:
    """What ``helm install`` prints after installing (templates/NOTES.txt)."""
    manifests = _manifests(values, name="nimctl", namespace=namespace, api_versions=None)
    return next(text for path, text in manifests.items() if path.endswith("NOTES.txt"))


def render(
    values: dict[str, Any] | None = None,
    *,
    name: str = "nimctl",
    namespace: str = "nimctl-system",
    api_versions: list[str] | None = None,
) -> list[dict[str, Any]]:
    """The chart's objects (CRDs excluded, as ``helm template`` without --include-crds)."""
    manifests = _manifests(values, name=name, namespace=namespace, api_versions=api_versions)
    yaml = YAML(typ="safe", pure=True)
    objects: list[dict[str, Any]] = []
    for path in sorted(manifests):
        if not path.endswith((".yaml", ".yml")):
            continue
        for doc in yaml.load_all(manifests[path]):
            if doc:
                objects.append(doc)
    return sorted(objects, key=_install_rank)


def _install_rank(obj: dict[str, Any]) -> int:
    kind = obj.get("kind", "")
    return INSTALL_ORDER.index(kind) if kind in INSTALL_ORDER else len(INSTALL_ORDER)


def chart_crds() -> list[dict[str, Any]]:
    """The CRDs under charts/nimctl/crds, as ``helm install`` creates them first."""
    return copy.deepcopy(_parsed_crds())


@functools.cache
def _parsed_crds() -> list[dict[str, Any]]:
    yaml = YAML(typ="safe", pure=True)  # 1.7 MB of YAML: parse once per test run
    out = []
    for path in sorted((CHART / "crds").glob("*.yaml")):
        out.extend(d for d in yaml.load_all(path.read_text()) if d)
    return out


def lint(values: dict[str, Any] | None = None) -> dict[str, Any]:
    """``helm lint --strict`` for Kubernetes ``KUBE_VERSION``."""
    helm = require_helm()
    report: dict[str, Any] = helm.lint(str(CHART), values, strict=True, kube_version=KUBE_VERSION)
    return report


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    """The one object of *kind* (and *name*); fails naming what the chart rendered."""
    hits = [
        o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)
    ]
    if len(hits) != 1:
        rendered = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in objects)
        raise AssertionError(f"expected one {kind} {name or ''}, the chart rendered {rendered}")
    return hits[0]
