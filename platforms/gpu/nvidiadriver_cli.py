"""``nimctl render`` for NVIDIADrivers: their driver DaemonSets on the ``--nodes`` cluster, offline.

The NVIDIADrivers of the file are rendered together, as the controller decides
over all of them: node ownership (``nvidia.com/gpu-operator.driver.owner``, a
matching non-default NVIDIADriver first, else the ``default: true`` one),
``ConflictingNodeSelector`` for overlapping selectors, one DaemonSet per node
pool, through the same ``NVIDIADriverContract.render`` the controller uses.
The ``--nodes`` file is read as for a ClusterPolicy (``platforms.gpu.cli``): Nodes
as ``kubectl get nodes -o yaml`` prints them (NFD-found GPU nodes are taken as
labelled ``gpu.present``), the driver's user ConfigMaps, and optionally the
cluster's ClusterPolicy; for OpenShift a ClusterVersion, the
``openshift/driver-toolkit`` ImageStream (the Driver Toolkit image of each RHCOS
release) and the ``cluster`` Proxy. A ClusterPolicy (there or in the file) without
``driver.useNvidiaDriverCRD`` leaves every NVIDIADriver ``disabled``: nothing
is rendered. What the controller would report instead of objects (disabled, a
conflict, no matching node) is a note on stderr.

A DaemonSet's name ends in a hash of the NVIDIADriver's ``metadata.uid``: give
the object as the cluster returns it (``kubectl get nvd NAME -o yaml``) to get
the names the cluster has; without a uid a note says the names will differ.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

from pydantic import ValidationError

from api.nvidia.v1.clusterpolicy import ClusterPolicy
from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver
from nimctl_runtime.meta import Obj
from platforms.contract import Observed, ReconcileError
from platforms.gpu.cli import DEFAULT_NAMESPACE, assume_labelled, facts_from
from platforms.gpu.errors import RenderError
from platforms.gpu.nvidiadriver import (
    DISABLED_MESSAGE,
    MULTIPLE_DEFAULTS_MESSAGE,
    NVIDIADriverContract,
)
from platforms.gpu.nvidiadriver_pools import DriverSelector, assign_owners, conflicts
from platforms.gpu.nvidiadriver_render import NVIDIADriverFacts, pools_of, shared_owner
from platforms.gpu.openshift_cluster import DTK_IMAGE_STREAM, DTK_NAMESPACE, PROXY_NAME, proxy_spec
from platforms.gpu.openshift_cluster import dtk_images as openshift_dtk_images

__all__ = ["cluster_policies", "cluster_proxy", "dtk_images", "render_drivers"]


def dtk_images(cluster: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """RHCOS release -> Driver Toolkit image, from the ImageStream ``openshift/driver-toolkit``
    (each tag names a release; ``latest`` is not one)."""
    for obj in cluster:
        meta = obj.get("metadata") or {}
        if obj.get("kind") != "ImageStream" or meta.get("name") != DTK_IMAGE_STREAM:
            continue
        if meta.get("namespace", DTK_NAMESPACE) == DTK_NAMESPACE:
            return openshift_dtk_images(obj)
    return {}


def cluster_proxy(cluster: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The spec of the OpenShift Proxy ``cluster``, if the file holds it."""
    for obj in cluster:
        if obj.get("kind") == "Proxy" and (obj.get("metadata") or {}).get("name") == PROXY_NAME:
            return proxy_spec(obj)
    return None


def cluster_policies(cluster: Iterable[Mapping[str, Any]]) -> list[ClusterPolicy]:
    """The ClusterPolicies of the ``--nodes`` file (RenderError names an invalid one)."""
    out: list[ClusterPolicy] = []
    for obj in cluster:
        if obj.get("kind") != "ClusterPolicy":
            continue
        try:
            out.append(ClusterPolicy.model_validate(obj))
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            name = (obj.get("metadata") or {}).get("name", "<unnamed>")
            raise RenderError(f"ClusterPolicy {name}: {where}: {first['msg']}") from None
    return out


def _active(policies: Sequence[ClusterPolicy]) -> ClusterPolicy | None:
    """The oldest ClusterPolicy (lowest name on a tie), as the operator picks it."""
    if not policies:
        return None
    return min(
        policies,
        key=lambda p: (str(p.metadata.creation_timestamp or ""), p.metadata.name or ""),
    )


def render_drivers(
    drivers: Sequence[NVIDIADriver],
    cluster: list[Obj],
    policies: Sequence[ClusterPolicy] = (),
    *,
    err: TextIO | None = None,
    namespace: str = DEFAULT_NAMESPACE,
) -> list[Obj]:
    """The objects the NVIDIADriver controller would create for ``drivers`` on ``cluster``
    (the ``--nodes`` file's objects); notes and one line per NVIDIADriver on ``err``."""
    err = err or sys.stderr
    policy = _active([*policies, *cluster_policies(cluster)])
    if policy is not None and not policy.spec.driver.use_nvidia_driver_crd:
        for driver in drivers:
            print(
                f"note: NVIDIADriver {driver.metadata.name}: disabled: {DISABLED_MESSAGE} "
                f"{policy.metadata.name}; nothing rendered",
                file=err,
            )
        return []
    facts = facts_from(cluster, namespace=namespace, environ=os.environ, err=err)
    quiet = io.StringIO()  # facts_from has said which nodes are taken as labelled
    nodes = tuple(assume_labelled(o, quiet) for o in cluster if o.get("kind") == "Node")
    selectors = [
        DriverSelector(d.metadata.name or "", dict(d.spec.node_selector or {}), d.spec.default)
        for d in drivers
    ]
    defaults = sorted(s.name for s in selectors if s.default)
    found = conflicts(selectors, nodes)
    owners = assign_owners(selectors, nodes)
    blocked = [*found, *(defaults if len(defaults) > 1 else [])]
    nvd_facts = NVIDIADriverFacts(
        cluster=facts,
        nodes=nodes,
        owners=owners,
        shared_owner=shared_owner(owners, blocked),
        host_paths=policy.spec.host_paths if policy is not None else None,
        dtk_images=dtk_images(cluster),
        proxy=cluster_proxy(cluster),
    )
    contract = NVIDIADriverContract()
    out: list[Obj] = []
    for driver in drivers:
        name = driver.metadata.name or "<unnamed>"
        if driver.spec.default and len(defaults) > 1:
            listed = " ".join(defaults)
            print(f"note: NVIDIADriver {name}: {MULTIPLE_DEFAULTS_MESSAGE}: [{listed}]; "
                  "nothing rendered", file=err)  # fmt: skip
            continue
        if name in found:
            print(f"note: NVIDIADriver {name}: ConflictingNodeSelector: {found[name]}; "
                  "nothing rendered", file=err)  # fmt: skip
            continue
        try:
            objects = contract.render(driver, nvd_facts)
        except ReconcileError as error:
            raise RenderError(f"NVIDIADriver {name}: {error}") from None
        if not objects:
            why = contract.readiness(driver, nvd_facts, Observed()).message
            print(f"note: NVIDIADriver {name}: {why}; nothing rendered", file=err)
            continue
        pools, _ = pools_of(driver, nvd_facts)
        listed = ", ".join(f"{p.name} ({len(p.nodes)} nodes)" for p in pools)
        print(f"# NVIDIADriver {name}: {len(objects)} objects; pools: {listed}", file=err)
        if not driver.metadata.uid:
            print(
                f"note: NVIDIADriver {name} has no metadata.uid: its DaemonSet names end in "
                "another hash than on the cluster (render `kubectl get nvd -o yaml` to match)",
                file=err,
            )
        out.extend(objects)
    return out
