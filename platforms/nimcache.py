"""NIMCache's contract: the caching objects for the step a NIMCache has reached, and its progress.

A NIMCache moves through steps (nim-operator.md §3.2): the shared
``nim-cache-sa``/``-role``/``-rolebinding``, the PVC (when ``create``), the
model-manifest pod until its manifest is known, the ``<name>-manifest``
ConfigMap that keeps it, and the caching Job. ``render`` returns the objects of
the step the facts show; an object no longer rendered (the manifest pod, once
the ConfigMap holds the manifest) is pruned by the skeleton. ``readiness``
hands the controller's state machine (``controllers.nimcache_status``) what it
needs: what this pass created, the Job, the profiles that were cached.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.apps.v1alpha1.nimcache import STATE_NOT_READY, STATE_READY, NIMCache
from manifests.hashing import LAST_APPLIED_HASH_ANNOTATION, stamped_copy
from nimctl_runtime.meta import ObjView, dig
from platforms import blockers
from platforms.capabilities import GVK, Capabilities
from platforms.contract import Observed, Readiness, ReconcileError
from platforms.parsing import parse
from platforms.standalone import nimcache as builders
from platforms.standalone import nimcache_profiles as profiles

__all__ = [
    "API_VERSION",
    "KIND",
    "MANIFEST_POD_REQUEUE",
    "OWNED",
    "NIMCacheContract",
    "NIMCacheFacts",
    "NIMCacheProgress",
    "is_optimized_ngc",
    "model_spec",
]

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMCache"
MANIFEST_POD_REQUEUE = 30.0

OWNED: tuple[GVK, ...] = (
    ("v1", "PersistentVolumeClaim"),
    ("v1", "Pod"),
    ("v1", "ConfigMap"),
    ("batch/v1", "Job"),
)



def is_optimized_ngc(nimcache: NIMCache) -> bool:
    """An NGC source without ``modelEndpoint``: profiles are selected from the manifest."""
    ngc = nimcache.spec.source.ngc
    return ngc is not None and not ngc.model_endpoint


def model_spec(nimcache: NIMCache) -> profiles.ModelSpec:
    ngc = nimcache.spec.source.ngc
    return profiles.ModelSpec.from_model(ngc.model if ngc is not None else None)


@dataclass(frozen=True)
class NIMCacheFacts:
    """What the controller read before rendering.

    - ``manifest``: the model manifest (from the ConfigMap, or just read from
      the manifest pod's log); None while unknown or when there is none.
    - ``manifest_pending``: the manifest is still to be read from the pod.
    - ``model_free``: the image has no manifest (status ``type: model-free``).
    - ``job``: the caching Job as cached (None: absent).
    - ``gpu_products``: the cluster's GPU products, for profile selection.
    - ``pods``, ``events``, ``nodes``: the NIMCache's pods, the Warning Events
      about them and (when one waits for a GPU) the nodes: what blocks caching.
    """

    orchestrator: str = "Kubernetes"
    manifest_pending: bool = False
    model_free: bool = False
    job: Mapping[str, Any] | None = None
    gpu_products: tuple[str, ...] = ()
    manifest: profiles.Manifest | None = field(default=None, compare=False)
    pods: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)
    """The manifest pod and the caching Job's pods, from the cache (for the blocker)."""
    events: tuple[Mapping[str, Any], ...] = field(default=(), compare=False)
    nodes: tuple[Mapping[str, Any], ...] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class NIMCacheProgress(Readiness):
    """Readiness plus what the state machine needs from this pass."""

    pvc_created: bool = False
    job_created: bool = False
    job: Mapping[str, Any] | None = None
    pvc_name: str = ""
    profiles: tuple[Mapping[str, Any], ...] = ()
    model_free: bool = False
    blocked_for_good: bool = False
    """The blocker (``reason``/``message``) is a failed Job, not a wait."""


def _state(cr: NIMCache) -> str:
    return (cr.status.state if cr.status is not None else None) or ""


class NIMCacheContract:
    """What a NIMCache becomes at each step of caching."""

    api_version = API_VERSION
    kind = KIND

    def parse(self, obj: NIMCache | ObjView) -> NIMCache:
        """The typed NIMCache; ``InvalidResource`` names the fields that do not fit.

        ``render``, ``readiness`` and ``selected_profiles`` take the model; a
        dict given to them (a test, an offline caller) is parsed on the way in.
        """
        return parse(NIMCache, obj)

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        return OWNED

    def selected_profiles(self, cr: NIMCache | ObjView, facts: NIMCacheFacts) -> list[str]:
        cr = self.parse(cr)
        if not is_optimized_ngc(cr):
            return []
        spec = model_spec(cr)
        gpus = list(facts.gpu_products) if not spec.gpus and not spec.profiles else []
        return profiles.select_profiles(facts.manifest, spec, gpus)

    def render(self, cr: NIMCache | ObjView, facts: NIMCacheFacts) -> list[dict[str, Any]]:
        cr = self.parse(cr)
        namespace = cr.metadata.namespace or ""
        try:
            out: list[dict[str, Any]] = [
                builders.service_account(namespace),
                builders.role(namespace, proxy=builders.given(cr.spec.proxy)),
                builders.role_binding(namespace),
            ]
            if cr.spec.storage.pvc.create:
                claim = builders.build_pvc(cr)
                if claim is not None:
                    out.append(claim)
            if facts.manifest_pending:
                out.append(builders.manifest_pod(cr, orchestrator=facts.orchestrator))
                return [_stamped(o) for o in out]
            if facts.manifest is not None:
                out.append(builders.manifest_config_map(cr, facts.manifest.minimal_yaml()))
            if facts.job is not None or _state(cr) != STATE_READY:
                selected = self.selected_profiles(cr, facts)
                if is_optimized_ngc(cr) and not selected:
                    raise ReconcileError(
                        "no profiles are selected for caching", reason="ReconcileFailed"
                    )
                out.append(_job(cr, selected, facts.orchestrator))
        except ValueError as exc:
            raise ReconcileError(str(exc), reason="ReconcileFailed") from exc
        return [_stamped(o) for o in out]

    def blocker(
        self, cr: NIMCache | ObjView, facts: NIMCacheFacts, job: Mapping[str, Any] | None
    ) -> blockers.Blocker | None:
        return _blocker(self.parse(cr), facts, job)

    def readiness(
        self, cr: NIMCache | ObjView, facts: NIMCacheFacts, observed: Observed
    ) -> NIMCacheProgress:
        cr = self.parse(cr)
        name = cr.metadata.name or ""
        created = {kind for _, kind, _ in observed.created}
        job = observed.get("batch/v1", "Job", builders.job_name(name))
        cached: Sequence[Mapping[str, Any]] = ()
        succeeded = int(dig(job, "status", "succeeded", default=0) or 0)
        if job is not None and succeeded > 0:
            cached = profiles.status_profiles(facts.manifest, self.selected_profiles(cr, facts))
        ready = _state(cr) == STATE_READY or succeeded > 0
        blocker = None if ready else self.blocker(cr, facts, job)
        return NIMCacheProgress(
            state=STATE_READY if ready else STATE_NOT_READY,
            reason=blocker.reason if blocker is not None else "",
            message=blocker.message if blocker is not None else "",
            blocker=blocker.key if blocker is not None else None,
            blocked_for_good=blocker is not None and blocker.terminal,
            ready=ready,
            requeue_after=MANIFEST_POD_REQUEUE if facts.manifest_pending else None,
            pvc_created="PersistentVolumeClaim" in created,
            job_created="Job" in created,
            job=job,
            pvc_name=builders.pvc_name(cr),
            profiles=tuple(cached),
            model_free=facts.model_free,
        )


def _blocker(
    cr: NIMCache, facts: NIMCacheFacts, job: Mapping[str, Any] | None
) -> blockers.Blocker | None:
    """What keeps caching from going on: the manifest pod while the manifest is read,
    then the caching Job (failed for good, or its pod waiting on something)."""
    if facts.manifest_pending:
        pod_name = builders.manifest_pod_name(cr.metadata.name or "")
        for pod in facts.pods:
            if dig(pod, "metadata", "name") == pod_name:
                found = blockers.pod_blocker(pod, facts.events)
                if found is not None and facts.nodes is not None:
                    return blockers.gpu_blocker(found, facts.nodes)
                return found
        return None
    return blockers.cache_job_blocker(job, facts.pods, facts.events, facts.nodes)


def _job(cr: NIMCache, selected: list[str], orchestrator: str) -> dict[str, Any]:
    job = builders.caching_job(cr, selected_profiles=selected, orchestrator=orchestrator)
    meta = job.setdefault("metadata", {})
    if not meta.get("labels"):
        labels = dig(job, "spec", "template", "metadata", "labels")
        if labels:
            meta["labels"] = dict(labels)
    return job


def _stamped(obj: dict[str, Any]) -> dict[str, Any]:
    """An unshared copy carrying the desired-object hash (builders may have stamped it)."""
    if dig(obj, "metadata", "annotations", LAST_APPLIED_HASH_ANNOTATION):
        return copy.deepcopy(obj)
    return stamped_copy(obj)
