"""Conversion between ``events.k8s.io/v1`` Events and the stored ``core/v1`` Events.

As in kube-apiserver, both APIs serve the same objects: an Event written
through either one is read through both (``kubectl describe`` lists core/v1
Events; newer recorders write events.k8s.io/v1). Objects are stored in the
core/v1 shape; the events.k8s.io/v1 view is converted on the way in and out,
field selectors included.
"""

from __future__ import annotations

import copy
from typing import Any

from nimctl_runtime.meta import Obj

EVENTS_V1 = ("events.k8s.io", "events")
CORE_EVENTS = ("", "v1", "events")

# events.k8s.io/v1 field -> core/v1 field (top level, value copied as is)
_RENAMES = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "reportingInstance": "reportingInstance",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_SAME = ("metadata", "eventTime", "series", "action", "reason", "related", "type")


def is_converted(group: str, resource: str) -> bool:
    return (group, resource) == EVENTS_V1


def to_core(obj: Obj) -> Obj:
    """An events.k8s.io/v1 Event as a core/v1 Event."""
    out: Obj = {"apiVersion": "v1", "kind": "Event"}
    for key in _SAME:
        if key in obj:
            out[key] = copy.deepcopy(obj[key])
    for new, old in _RENAMES.items():
        if new in obj:
            out[old] = copy.deepcopy(obj[new])
    series = obj.get("series")
    if isinstance(series, dict):
        out["series"] = {
            "count": series.get("count"),
            "lastObservedTime": series.get("lastObservedTime"),
        }
        out.setdefault("count", series.get("count"))
    if "source" not in out and obj.get("reportingController"):
        out["source"] = {"component": obj["reportingController"]}
        if obj.get("reportingInstance"):
            out["source"]["host"] = obj["reportingInstance"]
    return out


def from_core(obj: Obj) -> Obj:
    """A stored core/v1 Event as an events.k8s.io/v1 Event."""
    out: Obj = {"apiVersion": "events.k8s.io/v1", "kind": "Event"}
    for key in _SAME:
        if key in obj:
            out[key] = copy.deepcopy(obj[key])
    for new, old in _RENAMES.items():
        if old in obj:
            out[new] = copy.deepcopy(obj[old])
    source = obj.get("source") or {}
    if "reportingController" not in out and source.get("component"):
        out["reportingController"] = source["component"]
    if "reportingInstance" not in out and source.get("host"):
        out["reportingInstance"] = source["host"]
    return out


_FIELD_RENAMES = {
    "reportingController": "reportingComponent",
    "note": "message",
}


def field_selector_to_core(text: str) -> str:
    """Rewrite an events.k8s.io/v1 field selector onto core/v1 field names."""
    if not text:
        return text
    parts = []
    for raw in text.split(","):
        term = raw
        if term.startswith("regarding."):
            term = "involvedObject." + term[len("regarding.") :]
        for new, old in _FIELD_RENAMES.items():
            if term.startswith((new + "=", new + "!=")):
                term = old + term[len(new) :]
        parts.append(term)
    return ",".join(parts)


def response_from_core(doc: Any) -> Any:
    """Convert a response body (object, list, Table or Status) to the events.k8s.io view."""
    if not isinstance(doc, dict):
        return doc
    kind = doc.get("kind")
    if kind == "Event":
        return from_core(doc)
    if kind == "EventList":
        doc["apiVersion"] = "events.k8s.io/v1"
        doc["items"] = [from_core(i) for i in doc.get("items") or []]
        return doc
    if kind == "Table":
        for row in doc.get("rows") or []:
            if isinstance(row.get("object"), dict) and row["object"].get("kind") == "Event":
                row["object"] = from_core(row["object"])
    return doc
