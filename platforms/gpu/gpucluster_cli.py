"""``nimctl render`` for a GPUCluster: its four states' objects, offline.

The render does not depend on the nodes (the DaemonSets select them by deploy
label); the ``--nodes`` file is read as for a ClusterPolicy
(``platforms.gpu.cli``) for what does matter: a ServiceMonitor CRD there adds
the exporter's ServiceMonitor, and a ClusterPolicy there (or in the same file)
means the GPUCluster would deploy nothing (``PrerequisiteNotMet``): a note says
so and nothing is printed. The cluster is taken to serve ``resource.k8s.io/v1``
(Kubernetes 1.34 and later). Images the GPUCluster does not name come from the
operator's image variables (``VALIDATOR_IMAGE``, ``DCGM_EXPORTER_IMAGE``...), as
for a ClusterPolicy; ``DRA_DRIVER_IMAGE`` has no default.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from api.nvidia.v1alpha1.gpucluster import GPUCluster
from platforms.gpu.cli import facts_from
from platforms.gpu.facts import SERVICE_MONITOR
from platforms.gpu.gpucluster import prerequisite_readiness, render_states
from platforms.gpu.gpucluster_common import GPUClusterFacts

__all__ = ["render_gpucluster"]


def render_gpucluster(
    cr: GPUCluster,
    cluster: Sequence[Mapping[str, Any]],
    policies: Sequence[str] = (),
    *,
    err: TextIO | None = None,
) -> list[dict[str, Any]]:
    """The objects of the GPUCluster's enabled states, in apply order; one line per state
    on ``err``. ``policies`` are the names of ClusterPolicies given beside it."""
    err = err or sys.stderr
    names = sorted({*policies, *(str((o.get("metadata") or {}).get("name", "")) for o in cluster
                                 if o.get("kind") == "ClusterPolicy")})  # fmt: skip
    if names:
        print(f"note: GPUCluster {cr.metadata.name}: {prerequisite_readiness(names[0]).message}; "
              "nothing is deployed", file=err)  # fmt: skip
        return []
    base = facts_from(cluster, environ=os.environ, err=err)
    facts = GPUClusterFacts(
        operator_namespace=base.operator_namespace,
        operator_env=base.operator_env,
        service_monitor=base.serves(SERVICE_MONITOR),
    )
    out: list[dict[str, Any]] = []
    for state, objs in render_states(cr, facts):
        print(f"# {state}: {len(objs)} objects" if objs else f"# {state}: disabled", file=err)
        out.extend(objs)
    return out
