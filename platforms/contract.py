"""The contract every kind follows: what a custom resource becomes, and when it is Ready.

One ``KindContract`` per kind (NIMService has one that dispatches per
``spec.inferencePlatform``) is the single place that knows:

``render(cr, facts) -> desired objects``
    pure: no I/O. ``facts`` is whatever the kind looked up beforehand (a
    NIMCache, the cluster's capabilities, ...). Raising ``Blocked`` says the
    CR cannot be rendered yet, with the state, reason and message to report.
``owned_kinds(capabilities) -> kinds it may create``
    the controller watches exactly these (an owned object's change wakes the
    owner) and prunes, among these, every object it controls that the latest
    render no longer contains. A kind left out here is a kind whose stale
    objects would never be deleted: so every kind ``render`` can emit is listed.
``readiness(cr, facts, observed) -> Readiness``
    pure: reads the live objects of the latest render (``Observed``, from the
    cache) and says state, reason and message.

``controllers.reconciler.KindReconciler`` runs a contract for the operator,
``platforms.cli`` (``nimctl render``) runs the same ``render`` offline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from nimctl_runtime.meta import name_of
from nimctl_runtime.reconcile import ReportedError
from platforms.capabilities import GVK, Capabilities

__all__ = [
    "Blocked",
    "KindContract",
    "Observed",
    "ObservedKey",
    "Readiness",
    "ReconcileError",
    "observed_key",
]

CR = TypeVar("CR")
Facts = TypeVar("Facts")
CR_contra = TypeVar("CR_contra", contravariant=True)
Facts_contra = TypeVar("Facts_contra", contravariant=True)

ObservedKey = tuple[str, str, str]
"""``(apiVersion, kind, name)`` of an object in the CR's namespace (or cluster-scoped)."""


def observed_key(obj: Mapping[str, Any]) -> ObservedKey:
    return (str(obj.get("apiVersion", "")), str(obj.get("kind", "")), name_of(obj))


@dataclass(frozen=True)
class Readiness:
    """What a kind's ``readiness`` says about one custom resource.

    ``state`` is the value of the kind's ``status.state`` (from ``api``'s
    vocabulary); ``reason`` and ``message`` go on its conditions. ``ready`` and
    ``failed`` are exclusive; neither means "progressing". ``requeue_after``
    asks to look again later (for things no watch reports, such as a NIM that
    """

    state: str
    reason: str
    message: str = ""
    ready: bool = False
    failed: bool = False
    requeue_after: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    """Kind-specific findings for ``Kind.status`` (e.g. NIMPipeline's per-service states)."""
    blocker: tuple[str, str] | None = None
    """What blocks the CR (``platforms.blockers.Blocker.key``), None when nothing does.

    A change of blocker, or its disappearance, is a change of meaning: the
    status is written at once, while progress text under the same blocker is
    throttled like any message-only change."""


class Blocked(Exception):
    """``render`` cannot produce objects yet; report ``readiness`` and stop this pass.

    Raised for a missing or unready prerequisite (a NIMCache, a CRD) and for a
    spec that cannot be rendered. Objects the CR already owns are left as they
    are (nothing is pruned while blocked). ``objects`` are the ones that do not
    depend on the prerequisite: they are applied already (created, or updated
    by hash), as NVIDIA's operator creates a NIMService's RBAC, Service and
    routes while its NIMCache is still getting ready.
    """

    def __init__(
        self, readiness: Readiness, objects: Iterable[Mapping[str, Any]] = ()
    ) -> None:
        super().__init__(readiness.message)
        self.readiness = readiness
        self.objects: list[dict[str, Any]] = [dict(o) for o in objects]


class ReconcileError(ReportedError):
    """The CR cannot reach its desired state until something changes.

    The skeleton reports ``Failed`` with ``reason`` and ``message``, records one
    Event, and retries with backoff. Renders raise it (through
    ``platforms.standalone.errors.RenderError``) for a spec they refuse; the
    controllers raise it when a write fails.
    """

    reason = "Failed"

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if reason is not None:
            self.reason = reason


@dataclass(frozen=True)
class Observed:
    """The live objects of the latest render, as the cache holds them.

    ``objects`` maps ``(apiVersion, kind, name)`` to the object; a desired
    object the API does not hold yet is absent. ``created`` holds the keys this
    pass created.
    """

    objects: Mapping[ObservedKey, Mapping[str, Any]] = field(default_factory=dict)
    created: frozenset[ObservedKey] = frozenset()

    def get(self, api_version: str, kind: str, name: str) -> Mapping[str, Any] | None:
        return self.objects.get((api_version, kind, name))

    def of_kind(self, kind: str) -> list[Mapping[str, Any]]:
        return [o for (_, k, _), o in self.objects.items() if k == kind]

    @classmethod
    def of(cls, objects: Iterable[Mapping[str, Any]]) -> Observed:
        return cls({observed_key(o): o for o in objects})


class KindContract(Protocol, Generic[CR_contra, Facts_contra]):
    """What one kind (or one platform of a kind) becomes; see the module docstring."""

    api_version: str
    kind: str

    def owned_kinds(self, capabilities: Capabilities) -> tuple[GVK, ...]: ...

    def render(self, cr: CR_contra, facts: Facts_contra) -> list[dict[str, Any]]: ...

    def readiness(
        self, cr: CR_contra, facts: Facts_contra, observed: Observed
    ) -> Readiness: ...
