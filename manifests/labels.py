"""Standard labels and annotations carried by every object nimctl creates.

The names and values match NVIDIA's NIM Operator so that dashboards, label
selectors and the operator's own filtered cache (``managed-by``) keep working
when a cluster moves between the two operators.
"""

from __future__ import annotations

from collections.abc import Mapping

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
OPERATOR_VERSION_LABEL = "app.kubernetes.io/operator-version"
PART_OF_LABEL = "app.kubernetes.io/part-of"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "k8s-nim-operator"
APP_LABEL = "app"
APP_LABEL_OPERATOR_VALUE = "k8s-nim-operator"

PART_OF_NIM_SERVICE = "nim-service"
PART_OF_NIM_CACHE = "nim-cache"

REQUIRED_SCC_ANNOTATION = "openshift.io/required-scc"
SCC_ANNOTATION = "openshift.io/scc"
ISTIO_INJECT_ANNOTATION = "sidecar.istio.io/inject"


def standard_labels(name: str, part_of: str, operator_version: str = "") -> dict[str, str]:
    """The ``app.kubernetes.io/*`` labels of an object owned by the CR ``name``."""
    return {
        NAME_LABEL: name,
        INSTANCE_LABEL: name,
        OPERATOR_VERSION_LABEL: operator_version,
        PART_OF_LABEL: part_of,
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
    }


def merge_maps(
    primary: Mapping[str, str] | None, *others: Mapping[str, str] | None
) -> dict[str, str]:
    """Union of string maps where earlier maps win on a key clash.

    This is the precedence NVIDIA applies everywhere: standard labels and
    annotations win over the user's ``labels``/``annotations``.
    """
    out: dict[str, str] = {}
    for m in reversed((primary, *others)):
        if m:
            out.update(m)
    return out


def selector_labels(name: str) -> dict[str, str]:
    """Pod selector of a single-node NIMService's Deployment and Service."""
    return {APP_LABEL: name}


def managed_by() -> dict[str, str]:
    """The one label the operator's filtered cache selects on."""
    return {MANAGED_BY_LABEL: MANAGED_BY_VALUE}
