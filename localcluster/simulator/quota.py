"""kube-controller-manager's ResourceQuota controller for pods, as pure logic: a quota's
``status.hard`` (its ``spec.hard``) and ``status.used`` (what the namespace's pods
count against it, ``localcluster.quota.pod_usage``). Admission itself
(``localcluster.quota.ResourceQuotaAdmission``) counts the stored pods directly.
"""

from __future__ import annotations

from localcluster.quota import quota_status
from localcluster.simulator.objects import (
    Action,
    Context,
    UpdateStatus,
    namespace_of,
    status_changed,
    with_status,
)
from nimctl_runtime.meta import Obj

__all__ = ["reconcile_resourcequota"]


def reconcile_resourcequota(quota: Obj, ctx: Context) -> list[Action]:
    """Write the quota's hard and used amounts when they changed."""
    status = quota_status(quota, ctx.view.list("Pod", namespace_of(quota)))
    if status_changed(quota, status):
        return [UpdateStatus(with_status(quota, status))]
    return []
