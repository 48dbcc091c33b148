"""Predicates: which watch events reach a controller's event handler.

controller-runtime's ``pkg/predicate`` on plain dicts. A predicate filters
*events*, not the cache: the cache still holds every object it watches.
``GenerationChangedPredicate`` drops status-only and metadata-only updates (and
resyncs), so a controller using it will not self-correct status someone else
wipes (runtime.md §1.7). Combine predicates with ``and_``, ``or_``, ``not_``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from nimctl_runtime.handler import CreateEvent, DeleteEvent, GenericEvent, UpdateEvent
from nimctl_runtime.labels import Selector

__all__ = [
    "AnnotationChangedPredicate",
    "Funcs",
    "GenerationChangedPredicate",
    "LabelChangedPredicate",
    "LabelSelectorPredicate",
    "Predicate",
    "ResourceVersionChangedPredicate",
    "and_",
    "new_predicate_funcs",
    "not_",
    "or_",
]

from nimctl_runtime.meta import Obj


class Predicate(Protocol):
    """Decides per event kind whether the event is handled."""

    def create(self, event: CreateEvent) -> bool: ...

    def update(self, event: UpdateEvent) -> bool: ...

    def delete(self, event: DeleteEvent) -> bool: ...

    def generic(self, event: GenericEvent) -> bool: ...


def _meta(obj: Obj | None) -> Mapping[str, Any]:
    if not obj:
        return {}
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


class Funcs:
    """A predicate from optional per-event functions; a missing function passes the event."""

    def __init__(
        self,
        *,
        create: Callable[[CreateEvent], bool] | None = None,
        update: Callable[[UpdateEvent], bool] | None = None,
        delete: Callable[[DeleteEvent], bool] | None = None,
        generic: Callable[[GenericEvent], bool] | None = None,
    ) -> None:
        self._create = create
        self._update = update
        self._delete = delete
        self._generic = generic

    def create(self, event: CreateEvent) -> bool:
        return self._create(event) if self._create else True

    def update(self, event: UpdateEvent) -> bool:
        return self._update(event) if self._update else True

    def delete(self, event: DeleteEvent) -> bool:
        return self._delete(event) if self._delete else True

    def generic(self, event: GenericEvent) -> bool:
        return self._generic(event) if self._generic else True


def new_predicate_funcs(filter_fn: Callable[[Obj], bool]) -> Funcs:
    """One object filter for every event kind (on update it sees the new object)."""
    return Funcs(
        create=lambda e: filter_fn(e.object),
        update=lambda e: filter_fn(e.object_new),
        delete=lambda e: filter_fn(e.object),
        generic=lambda e: filter_fn(e.object),
    )


class _UpdateOnly:
    """Base for predicates that only judge updates."""

    def create(self, event: CreateEvent) -> bool:
        return True

    def update(self, event: UpdateEvent) -> bool:
        return True

    def delete(self, event: DeleteEvent) -> bool:
        return True

    def generic(self, event: GenericEvent) -> bool:
        return True


class GenerationChangedPredicate(_UpdateOnly):
    """Pass updates only when ``metadata.generation`` changed (a spec change)."""

    def update(self, event: UpdateEvent) -> bool:
        if not event.object_old or not event.object_new:
            return False
        return _meta(event.object_new).get("generation") != _meta(event.object_old).get(
            "generation"
        )


class ResourceVersionChangedPredicate(_UpdateOnly):
    """Pass updates only when ``metadata.resourceVersion`` changed (drops resyncs)."""

    def update(self, event: UpdateEvent) -> bool:
        if not event.object_old or not event.object_new:
            return False
        return _meta(event.object_new).get("resourceVersion") != _meta(event.object_old).get(
            "resourceVersion"
        )


class LabelChangedPredicate(_UpdateOnly):
    """Pass updates only when the labels changed."""

    def update(self, event: UpdateEvent) -> bool:
        if not event.object_old or not event.object_new:
            return False
        old = _meta(event.object_old).get("labels") or {}
        new = _meta(event.object_new).get("labels") or {}
        return bool(old != new)


class AnnotationChangedPredicate(_UpdateOnly):
    """Pass updates only when the annotations changed."""

    def update(self, event: UpdateEvent) -> bool:
        if not event.object_old or not event.object_new:
            return False
        old = _meta(event.object_old).get("annotations") or {}
        new = _meta(event.object_new).get("annotations") or {}
        return bool(old != new)


class LabelSelectorPredicate:
    """Pass events whose object's labels match a selector.

    ``selector`` is a ``labels.Selector``, a selector string (``"a=b,c in (d)"``)
    or a ``metav1.LabelSelector`` dict (``matchLabels``/``matchExpressions``).
    """

    def __init__(self, selector: Selector | str | Mapping[str, Any]) -> None:
        if isinstance(selector, Selector):
            self.selector = selector
        elif isinstance(selector, str):
            self.selector = Selector.parse(selector)
        else:
            self.selector = Selector.from_label_selector(selector)

    def _matches(self, obj: Obj) -> bool:
        labels = _meta(obj).get("labels") or {}
        return self.selector.matches(labels)

    def create(self, event: CreateEvent) -> bool:
        return self._matches(event.object)

    def update(self, event: UpdateEvent) -> bool:
        return self._matches(event.object_new)

    def delete(self, event: DeleteEvent) -> bool:
        return self._matches(event.object)

    def generic(self, event: GenericEvent) -> bool:
        return self._matches(event.object)


class _And:
    def __init__(self, predicates: tuple[Predicate, ...]) -> None:
        self.predicates = predicates

    def create(self, event: CreateEvent) -> bool:
        return all(p.create(event) for p in self.predicates)

    def update(self, event: UpdateEvent) -> bool:
        return all(p.update(event) for p in self.predicates)

    def delete(self, event: DeleteEvent) -> bool:
        return all(p.delete(event) for p in self.predicates)

    def generic(self, event: GenericEvent) -> bool:
        return all(p.generic(event) for p in self.predicates)


class _Or:
    def __init__(self, predicates: tuple[Predicate, ...]) -> None:
        self.predicates = predicates

    def create(self, event: CreateEvent) -> bool:
        return any(p.create(event) for p in self.predicates)

    def update(self, event: UpdateEvent) -> bool:
        return any(p.update(event) for p in self.predicates)

    def delete(self, event: DeleteEvent) -> bool:
        return any(p.delete(event) for p in self.predicates)

    def generic(self, event: GenericEvent) -> bool:
        return any(p.generic(event) for p in self.predicates)


class _Not:
    def __init__(self, predicate: Predicate) -> None:
        self.predicate = predicate

    def create(self, event: CreateEvent) -> bool:
        return not self.predicate.create(event)

    def update(self, event: UpdateEvent) -> bool:
        return not self.predicate.update(event)

    def delete(self, event: DeleteEvent) -> bool:
        return not self.predicate.delete(event)

    def generic(self, event: GenericEvent) -> bool:
        return not self.predicate.generic(event)


def and_(*predicates: Predicate) -> Predicate:
    """Passes an event only when every predicate passes it (``and_()`` passes all)."""
    return _And(predicates)


def or_(*predicates: Predicate) -> Predicate:
    """Passes an event when any predicate passes it (``or_()`` passes none)."""
    return _Or(predicates)


def not_(predicate: Predicate) -> Predicate:
    """Inverts a predicate."""
    return _Not(predicate)
