"""NIMBuild's contract: which pod a build needs now, and what its state is.

A build goes through three phases, remembered in its own status conditions
(the engine build pod is deleted once done, as NVIDIA's controller does):

``build``     until ``NIM_BUILD_ENGINE_BUILD_POD_COMPLETED`` is True: render the
              engine build pod; its readiness gives ``InProgress`` (created,
              running), ``Failed`` (the pod failed) or "completed" (pod Ready:
              the NIM built the engine and serves it);
``manifest``  until ``NIM_BUILD_MODEL_MANIFEST_POD_COMPLETED`` is True: render
              the local manifest pod (the engine pod is pruned); once its logs
              list the built profile, the build is ``Ready`` with that profile
              as ``outputProfile`` (the controller adds it to the NIMCache);
``done``      nothing to run: ``Ready``.

A phase change asks for a prompt requeue: the NIMBuild's own status change
does not wake it (its watch passes spec changes only).

``Readiness.details`` carries the conditions to set (``conditions``: tuples
of type, status, reason, message) and ``inputProfile`` / ``outputProfile``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api.apps.v1alpha1 import nimbuild as api_nb
from api.apps.v1alpha1.nimbuild import NIMBuild
from api.apps.v1alpha1.nimcache import NIMCache
from nimctl_runtime.meta import ObjView, dig, is_true
from platforms.blockers import pod_blocker
from platforms.capabilities import GVK, Capabilities
from platforms.contract import Observed, Readiness
from platforms.standalone import nimbuild as objects

__all__ = [
    "API_VERSION",
    "KIND",
    "PHASE_BUILD",
    "PHASE_DONE",
    "PHASE_MANIFEST",
    "PHASE_REQUEUE",
    "NIMBuildContract",
    "NIMBuildFacts",
    "phase_of",
]

API_VERSION = "apps.nvidia.com/v1alpha1"
KIND = "NIMBuild"
PHASE_BUILD = "build"
PHASE_MANIFEST = "manifest"
PHASE_DONE = "done"
PHASE_REQUEUE = 0.5
"""Seconds before the pass that starts the next phase."""
MANIFEST_POLL = 2.0
"""Seconds between looks at a running manifest pod that has not printed the manifest yet."""

Condition = tuple[str, str, str, str]


def phase_of(build: ObjView) -> str:
    """The build's phase, from the status conditions of the stored NIMBuild."""
    conditions = dig(build, "status", "conditions", default=[]) or []
    if is_true(conditions, api_nb.CONDITION_MODEL_MANIFEST_POD_COMPLETED):
        return PHASE_DONE
    if is_true(conditions, api_nb.CONDITION_ENGINE_BUILD_POD_COMPLETED):
        return PHASE_MANIFEST
    return PHASE_BUILD


@dataclass(frozen=True)
class NIMBuildFacts:
    """What a NIMBuild's render and readiness need, read by the controller.

    ``nimcache`` is the (Ready) NIMCache's model; ``profile`` is the input profile (chosen in the
    build phase, else ``status.inputProfile``); ``profile_found`` the
    condition recording how it was chosen; ``manifest_logs`` what a running
    local manifest pod printed (None: not running yet).
    """

    nimcache: NIMCache
    phase: str
    profile: ObjView
    profile_found: Condition | None = None
    orchestrator: str = "Kubernetes"
    manifest_logs: str | None = None


def _pod_failed(pod: ObjView) -> bool:
    return bool(dig(pod, "status", "phase") == "Failed")


def _pod_ready(pod: ObjView) -> bool:
    return is_true(dig(pod, "status", "conditions", default=[]) or [], "Ready")


class NIMBuildContract:
    """What a NIMBuild runs in each phase, and its state."""

    api_version = API_VERSION
    kind = KIND

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]:
        return (("v1", "Pod"),)

    def render(self, cr: NIMBuild, facts: NIMBuildFacts) -> list[dict[str, Any]]:
        if facts.phase == PHASE_BUILD:
            # A profile the pod cannot be sized for raises RenderError (Failed).
            return [
                objects.engine_build_pod(
                    cr, facts.nimcache, facts.profile, orchestrator=facts.orchestrator
                )
            ]
        if facts.phase == PHASE_MANIFEST and _has_ngc_manifest(facts.nimcache):
            return [objects.local_manifest_pod(cr, facts.nimcache, orchestrator=facts.orchestrator)]
        return []

    def readiness(self, cr: NIMBuild, facts: NIMBuildFacts, observed: Observed) -> Readiness:
        conditions: list[Condition] = []
        if facts.profile_found is not None:
            conditions.append(facts.profile_found)
        details: dict[str, Any] = {"conditions": conditions, "inputProfile": dict(facts.profile)}
        name = cr.metadata.name or ""
        if facts.phase == PHASE_BUILD:
            return self._building(name, observed, conditions, details)
        if facts.phase == PHASE_MANIFEST and _has_ngc_manifest(facts.nimcache):
            return self._reading_manifest(cr, facts, conditions, details)
        if facts.phase == PHASE_MANIFEST:
            # Only NGC caches have a model manifest: nothing to add to the NIMCache.
            conditions.append(_manifest_completed())
            return Readiness(
                api_nb.STATE_READY,
                api_nb.REASON_POD_COMPLETED,
                "engine built; the NIMCache has no NGC model manifest to extend",
                ready=True,
                details=details,
            )
        return Readiness(
            api_nb.STATE_READY,
            api_nb.REASON_POD_COMPLETED,
            api_nb.MESSAGE_MANIFEST_POD_COMPLETED,
            ready=True,
            details=details,
        )

    @staticmethod
    def _building(
        name: str, observed: Observed, conditions: list[Condition], details: dict[str, Any]
    ) -> Readiness:
        pod = observed.get("v1", "Pod", objects.engine_build_pod_name(name))
        conditions.append(
            (
                api_nb.CONDITION_ENGINE_BUILD_POD_CREATED,
                "True",
                api_nb.REASON_ENGINE_BUILD_POD_CREATED,
                api_nb.MESSAGE_ENGINE_BUILD_POD_CREATED,
            )
        )
        if pod is not None and _pod_ready(pod):
            conditions.append(
                (
                    api_nb.CONDITION_ENGINE_BUILD_POD_COMPLETED,
                    "True",
                    api_nb.REASON_POD_READY,
                    api_nb.MESSAGE_ENGINE_BUILD_POD_COMPLETED,
                )
            )
            return Readiness(
                api_nb.STATE_IN_PROGRESS,
                api_nb.REASON_POD_READY,
                api_nb.MESSAGE_ENGINE_BUILD_POD_COMPLETED,
                details=details,
                requeue_after=PHASE_REQUEUE,
            )
        if pod is not None and _pod_failed(pod):
            conditions.append(
                (
                    api_nb.CONDITION_ENGINE_BUILD_POD_COMPLETED,
                    "False",
                    api_nb.REASON_POD_FAILED,
                    api_nb.MESSAGE_ENGINE_BUILD_POD_FAILED,
                )
            )
            return Readiness(
                api_nb.STATE_FAILED,
                api_nb.REASON_POD_FAILED,
                api_nb.MESSAGE_ENGINE_BUILD_POD_FAILED,
                failed=True,
                details=details,
            )
        blocker = pod_blocker(pod) if pod is not None else None
        if blocker is not None:
            # The build pod cannot start (a Secret, the image, no GPU): name it (issue 25).
            conditions.append(
                (
                    api_nb.CONDITION_ENGINE_BUILD_POD_PENDING,
                    "True",
                    blocker.reason,
                    blocker.message,
                )
            )
            return Readiness(
                api_nb.STATE_IN_PROGRESS,
                blocker.reason,
                blocker.message,
                details=details,
                blocker=blocker.key,
            )
        conditions.append(
            (
                api_nb.CONDITION_ENGINE_BUILD_POD_PENDING,
                "True",
                api_nb.REASON_POD_RUNNING,
                api_nb.MESSAGE_ENGINE_BUILD_POD_RUNNING,
            )
        )
        return Readiness(
            api_nb.STATE_IN_PROGRESS,
            api_nb.REASON_POD_RUNNING,
            api_nb.MESSAGE_ENGINE_BUILD_POD_RUNNING,
            details=details,
        )

    @staticmethod
    def _reading_manifest(
        cr: NIMBuild, facts: NIMBuildFacts, conditions: list[Condition], details: dict[str, Any]
    ) -> Readiness:
        manifest = objects.parse_local_manifest(facts.manifest_logs or "")
        if manifest is None:
            message = f"waiting for the local manifest pod to print {objects.LOCAL_MANIFEST_PATH}"
            return Readiness(
                api_nb.STATE_IN_PROGRESS,
                api_nb.REASON_MANIFEST_POD_PENDING,
                message,
                details=details,
                requeue_after=MANIFEST_POLL if facts.manifest_logs is not None else None,
            )
        built = objects.built_profile(manifest, cr, str(facts.profile.get("name", "")))
        conditions.append(_manifest_completed())
        if built is not None:
            details["outputProfile"] = built
        return Readiness(
            api_nb.STATE_READY,
            api_nb.REASON_POD_COMPLETED,
            api_nb.MESSAGE_MANIFEST_POD_COMPLETED,
            ready=True,
            details=details,
            requeue_after=PHASE_REQUEUE,
        )


def _has_ngc_manifest(nimcache: NIMCache) -> bool:
    """Whether the NIMCache caches from NGC (only those have a model manifest to extend)."""
    return nimcache.spec.source.ngc is not None


def _manifest_completed() -> Condition:
    return (
        api_nb.CONDITION_MODEL_MANIFEST_POD_COMPLETED,
        "True",
        api_nb.REASON_POD_COMPLETED,
        api_nb.MESSAGE_MANIFEST_POD_COMPLETED,
    )
