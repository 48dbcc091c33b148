"""Server-side printing: ``meta.k8s.io/v1 Table`` responses for ``kubectl get``.

kubectl asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` and
prints whatever columns the server returns. Custom resources use their CRD's
``additionalPrinterColumns`` (JSONPath evaluated here); built-ins use the
column sets kube-apiserver prints for the common kinds; anything else gets
NAME and AGE.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from nimctl_runtime.meta import ObjView

Column = tuple[str, str, str, int, Callable[[ObjView], Any]]  # name, type, format, priority, cell

_NAME_DESC = (
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically."
)
_AGE_DESC = (
    "CreationTimestamp is a timestamp representing the server time when this object was created."
)


def _parse_time(value: Any) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def human_duration(seconds: float) -> str:
    """kubectl's short age format (``5s``, ``3m12s``, ``4h``, ``2d3h``, ``1y``)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m{rem}s" if rem else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h{rem}m" if rem else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d{rem}h" if rem else f"{hours // 24}d"
    days = hours // 24
    if days < 365 * 2:
        return f"{days}d"
    if days < 365 * 8:
        rem = days % 365
        return f"{days // 365}y{rem}d" if rem else f"{days // 365}y"
    return f"{days // 365}y"


def age(value: Any) -> str:
    t = _parse_time(value)
    if t is None:
        return "<unknown>"
    return human_duration((datetime.datetime.now(datetime.UTC) - t).total_seconds())


_JSONPATH_TOKEN = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\[['\"]([^'\"]+)['\"]\]")


def jsonpath(obj: Any, path: str) -> Any:
    """Evaluate the simple JSONPath subset CRD printer columns use (``.a.b[0].c``)."""
    p = path.strip()
    if p.startswith("{") and p.endswith("}"):
        p = p[1:-1]
    if p.startswith("$"):
        p = p[1:]
    cur: Any = obj
    pos = 0
    while pos < len(p):
        m = _JSONPATH_TOKEN.match(p, pos)
        if m is None:
            return None
        pos = m.end()
        if m.group(2) is not None:
            idx = int(m.group(2))
            if not isinstance(cur, list) or idx >= len(cur):
                return None
            cur = cur[idx]
        else:
            key = m.group(1) if m.group(1) is not None else m.group(3)
            if not isinstance(cur, Mapping) or key not in cur:
                return None
            cur = cur[key]
    return cur


def _meta(obj: ObjView) -> Mapping[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, Mapping) else {}


def _name(obj: ObjView) -> str:
    return str(_meta(obj).get("name", ""))


def _age(obj: ObjView) -> str:
    return age(_meta(obj).get("creationTimestamp"))


def _get(path: str, default: Any = "<none>") -> Callable[[ObjView], Any]:
    def cell(obj: ObjView) -> Any:
        v = jsonpath(obj, path)
        return default if v is None else v

    return cell


def _pod_ready(obj: ObjView) -> str:
    containers = (obj.get("spec") or {}).get("containers") or []
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    return f"{ready}/{len(containers)}"


def _pod_status(obj: ObjView) -> str:
    if _meta(obj).get("deletionTimestamp"):
        return "Terminating"
    status = obj.get("status") or {}
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting and waiting.get("reason"):
            return str(waiting["reason"])
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated and terminated.get("reason"):
            return str(terminated["reason"])
    return str(status.get("reason") or status.get("phase") or "Unknown")


def _pod_restarts(obj: ObjView) -> int:
    statuses = (obj.get("status") or {}).get("containerStatuses") or []
    return sum(int(s.get("restartCount", 0)) for s in statuses)


def _ready_of(spec_path: str, ready_path: str) -> Callable[[ObjView], str]:
    def cell(obj: ObjView) -> str:
        want = jsonpath(obj, spec_path)
        have = jsonpath(obj, ready_path) or 0
        return f"{have}/{want if want is not None else 1}"

    return cell


def _node_status(obj: ObjView) -> str:
    conds = (obj.get("status") or {}).get("conditions") or []
    status = "Unknown"
    for c in conds:
        if c.get("type") == "Ready":
            status = "Ready" if c.get("status") == "True" else "NotReady"
    if (obj.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    return status


def _node_roles(obj: ObjView) -> str:
    prefix = "node-role.kubernetes.io/"
    labels = _meta(obj).get("labels") or {}
    roles = sorted(k[len(prefix) :] for k in labels if k.startswith(prefix) and k[len(prefix) :])
    return ",".join(roles) or "<none>"


def _containers(obj: ObjView, key: str) -> str:
    spec = obj.get("spec") or {}
    tmpl = ((spec.get("template") or {}).get("spec") or {}) if "template" in spec else spec
    return ",".join(str(c.get(key, "")) for c in tmpl.get("containers") or []) or "<none>"


def _selector(obj: ObjView) -> str:
    sel = (obj.get("spec") or {}).get("selector") or {}
    labels = sel.get("matchLabels") if "matchLabels" in sel else sel
    if not isinstance(labels, Mapping) or not labels:
        return "<none>"
    return ",".join(f"{k}={v}" for k, v in labels.items())


def _ports(obj: ObjView) -> str:
    ports = (obj.get("spec") or {}).get("ports") or []
    return ",".join(f"{p.get('port')}/{p.get('protocol', 'TCP')}" for p in ports) or "<none>"


def _data_count(obj: ObjView) -> int:
    return len(obj.get("data") or {}) + len(obj.get("binaryData") or {})


def _event_object(obj: ObjView) -> str:
    io = obj.get("involvedObject") or obj.get("regarding") or {}
    return f"{str(io.get('kind', '')).lower()}/{io.get('name', '')}"


def _event_last_seen(obj: ObjView) -> str:
    for key in ("lastTimestamp", "eventTime", "deprecatedLastTimestamp"):
        if obj.get(key):
            return age(obj.get(key))
    return _age(obj)


def _completions(obj: ObjView) -> str:
    want = (obj.get("spec") or {}).get("completions", 1)
    have = (obj.get("status") or {}).get("succeeded", 0)
    return f"{have}/{want}"


def _job_status(obj: ObjView) -> str:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("status") == "True" and c.get("type") in ("Complete", "Failed", "Suspended"):
            return str(c["type"])
    return "Running"


_ACCESS_MODES = {
    "ReadWriteOnce": "RWO",
    "ReadOnlyMany": "ROX",
    "ReadWriteMany": "RWX",
    "ReadWriteOncePod": "RWOP",
}


def _access_modes(path: str) -> Callable[[ObjView], str]:
    def cell(obj: ObjView) -> str:
        modes = jsonpath(obj, path) or []
        return ",".join(_ACCESS_MODES.get(str(m), str(m)) for m in modes)

    return cell


def _pv_claim(obj: ObjView) -> str:
    ref = (obj.get("spec") or {}).get("claimRef") or {}
    return f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref.get("name") else ""


def _ingress_hosts(obj: ObjView) -> str:
    hosts = [r.get("host") for r in (obj.get("spec") or {}).get("rules") or [] if r.get("host")]
    return ",".join(hosts) if hosts else "*"


def _ingress_address(obj: ObjView) -> str:
    ingress = (((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress")) or []
    return ",".join(str(i.get("ip") or i.get("hostname") or "") for i in ingress)


def _ingress_ports(obj: ObjView) -> str:
    return "80, 443" if (obj.get("spec") or {}).get("tls") else "80"


def _last_schedule(obj: ObjView) -> str:
    stamp = (obj.get("status") or {}).get("lastScheduleTime")
    return age(stamp) if stamp else "<none>"


_S, _I = "string", "integer"
_BUILTIN_COLUMNS: dict[tuple[str, str], list[Column]] = {
    ("", "persistentvolumeclaims"): [
        ("Status", _S, "", 0, _get(".status.phase", "")),
        ("Volume", _S, "", 0, _get(".spec.volumeName", "")),
        ("Capacity", _S, "", 0, _get(".status.capacity.storage", "")),
        ("Access Modes", _S, "", 0, _access_modes(".status.accessModes")),
        ("StorageClass", _S, "", 0, _get(".spec.storageClassName", "")),
        ("VolumeAttributesClass", _S, "", 0, _get(".spec.volumeAttributesClassName", "<unset>")),
        ("Age", _S, "", 0, _age),
        ("VolumeMode", _S, "", 1, _get(".spec.volumeMode", "")),
    ],
    ("", "persistentvolumes"): [
        ("Capacity", _S, "", 0, _get(".spec.capacity.storage", "")),
        ("Access Modes", _S, "", 0, _access_modes(".spec.accessModes")),
        ("Reclaim Policy", _S, "", 0, _get(".spec.persistentVolumeReclaimPolicy", "")),
        ("Status", _S, "", 0, _get(".status.phase", "")),
        ("Claim", _S, "", 0, _pv_claim),
        ("StorageClass", _S, "", 0, _get(".spec.storageClassName", "")),
        ("VolumeAttributesClass", _S, "", 0, _get(".spec.volumeAttributesClassName", "<unset>")),
        ("Reason", _S, "", 0, _get(".status.reason", "")),
        ("Age", _S, "", 0, _age),
        ("VolumeMode", _S, "", 1, _get(".spec.volumeMode", "")),
    ],
    ("networking.k8s.io", "ingresses"): [
        ("Class", _S, "", 0, _get(".spec.ingressClassName", "<none>")),
        ("Hosts", _S, "", 0, _ingress_hosts),
        ("Address", _S, "", 0, _ingress_address),
        ("Ports", _S, "", 0, _ingress_ports),
        ("Age", _S, "", 0, _age),
    ],
    ("batch", "cronjobs"): [
        ("Schedule", _S, "", 0, _get(".spec.schedule", "")),
        ("Timezone", _S, "", 0, _get(".spec.timeZone", "<none>")),
        ("Suspend", _S, "", 0, lambda o: str(bool((o.get("spec") or {}).get("suspend"))).title()),
        ("Active", _I, "", 0, lambda o: len((o.get("status") or {}).get("active") or [])),
        ("Last Schedule", _S, "", 0, _last_schedule),
        ("Age", _S, "", 0, _age),
    ],
    ("", "pods"): [
        ("Ready", _S, "", 0, _pod_ready),
        ("Status", _S, "", 0, _pod_status),
        ("Restarts", _I, "", 0, _pod_restarts),
        ("Age", _S, "", 0, _age),
        ("IP", _S, "", 1, _get(".status.podIP")),
        ("Node", _S, "", 1, _get(".spec.nodeName")),
    ],
    ("apps", "deployments"): [
        ("Ready", _S, "", 0, _ready_of(".spec.replicas", ".status.readyReplicas")),
        ("Up-to-date", _I, "", 0, _get(".status.updatedReplicas", 0)),
        ("Available", _I, "", 0, _get(".status.availableReplicas", 0)),
        ("Age", _S, "", 0, _age),
        ("Containers", _S, "", 1, lambda o: _containers(o, "name")),
        ("Images", _S, "", 1, lambda o: _containers(o, "image")),
        ("Selector", _S, "", 1, _selector),
    ],
    ("apps", "statefulsets"): [
        ("Ready", _S, "", 0, _ready_of(".spec.replicas", ".status.readyReplicas")),
        ("Age", _S, "", 0, _age),
        ("Containers", _S, "", 1, lambda o: _containers(o, "name")),
        ("Images", _S, "", 1, lambda o: _containers(o, "image")),
    ],
    ("apps", "replicasets"): [
        ("Desired", _I, "", 0, _get(".spec.replicas", 0)),
        ("Current", _I, "", 0, _get(".status.replicas", 0)),
        ("Ready", _I, "", 0, _get(".status.readyReplicas", 0)),
        ("Age", _S, "", 0, _age),
    ],
    ("apps", "daemonsets"): [
        ("Desired", _I, "", 0, _get(".status.desiredNumberScheduled", 0)),
        ("Current", _I, "", 0, _get(".status.currentNumberScheduled", 0)),
        ("Ready", _I, "", 0, _get(".status.numberReady", 0)),
        ("Up-to-date", _I, "", 0, _get(".status.updatedNumberScheduled", 0)),
        ("Available", _I, "", 0, _get(".status.numberAvailable", 0)),
        ("Age", _S, "", 0, _age),
    ],
    ("batch", "jobs"): [
        ("Status", _S, "", 0, _job_status),
        ("Completions", _S, "", 0, _completions),
        ("Age", _S, "", 0, _age),
    ],
    ("", "services"): [
        ("Type", _S, "", 0, _get(".spec.type", "ClusterIP")),
        ("Cluster-IP", _S, "", 0, _get(".spec.clusterIP")),
        ("External-IP", _S, "", 0, lambda o: "<none>"),
        ("Port(s)", _S, "", 0, _ports),
        ("Age", _S, "", 0, _age),
        ("Selector", _S, "", 1, _selector),
    ],
    ("", "nodes"): [
        ("Status", _S, "", 0, _node_status),
        ("Roles", _S, "", 0, _node_roles),
        ("Age", _S, "", 0, _age),
        ("Version", _S, "", 0, _get(".status.nodeInfo.kubeletVersion", "")),
    ],
    ("", "namespaces"): [
        ("Status", _S, "", 0, _get(".status.phase", "Active")),
        ("Age", _S, "", 0, _age),
    ],
    ("", "configmaps"): [("Data", _I, "", 0, _data_count), ("Age", _S, "", 0, _age)],
    ("", "secrets"): [
        ("Type", _S, "", 0, _get(".type", "Opaque")),
        ("Data", _I, "", 0, _data_count),
        ("Age", _S, "", 0, _age),
    ],
    ("", "events"): [
        ("Last Seen", _S, "", 0, _event_last_seen),
        ("Type", _S, "", 0, _get(".type", "")),
        ("Reason", _S, "", 0, _get(".reason", "")),
        ("Object", _S, "", 0, _event_object),
        ("Message", _S, "", 0, _get(".message", "")),
    ],
    ("coordination.k8s.io", "leases"): [
        ("Holder", _S, "", 0, _get(".spec.holderIdentity", "")),
        ("Age", _S, "", 0, _age),
    ],
    ("apiextensions.k8s.io", "customresourcedefinitions"): [
        ("Created At", "date", "", 0, lambda o: _meta(o).get("creationTimestamp", "")),
    ],
}


def _printer_column(col: Mapping[str, Any]) -> Column:
    typ = str(col.get("type", "string"))
    path = str(col.get("jsonPath", ""))

    def cell(obj: ObjView) -> Any:
        v = jsonpath(obj, path)
        if typ == "date":
            return age(v) if v is not None else "<unknown>"
        if v is None:
            return None
        if typ == "string" and not isinstance(v, str):
            return str(v)
        return v

    return (
        str(col.get("name", "")),
        "string" if typ == "date" else typ,
        str(col.get("format", "")),
        int(col.get("priority", 0)),
        cell,
    )


def columns_for(
    group: str, resource: str, printer_columns: Sequence[Mapping[str, Any]] | None, crd: bool
) -> list[Column]:
    """The columns after NAME for a resource."""
    if crd:
        if printer_columns:
            return [_printer_column(c) for c in printer_columns]
        return [("Age", _S, "", 0, _age)]
    return _BUILTIN_COLUMNS.get((group, resource), [("Age", _S, "", 0, _age)])


def _partial_metadata(obj: ObjView) -> dict[str, Any]:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": dict(_meta(obj)),
    }


def build_table(
    objs: Sequence[ObjView],
    columns: list[Column],
    *,
    include_object: str = "Metadata",
    resource_version: str = "",
    continue_token: str = "",
    remaining: int | None = None,
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table for *objs* (NAME first, then *columns*)."""
    defs = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "description": _NAME_DESC,
            "priority": 0,
        }
    ]
    for name, typ, fmt, priority, _ in columns:
        defs.append(
            {
                "name": name,
                "type": typ,
                "format": fmt,
                "description": _AGE_DESC if name == "Age" else name,
                "priority": priority,
            }
        )
    rows = []
    for obj in objs:
        cells: list[Any] = [_name(obj)]
        for _, _, _, _, fn in columns:
            try:
                cells.append(fn(obj))
            except (TypeError, ValueError, AttributeError):
                cells.append(None)
        row: dict[str, Any] = {"cells": cells}
        if include_object == "Object":
            row["object"] = dict(obj)
        elif include_object != "None":
            row["object"] = _partial_metadata(obj)
        rows.append(row)
    meta: dict[str, Any] = {"resourceVersion": resource_version}
    if continue_token:
        meta["continue"] = continue_token
    if remaining:
        meta["remainingItemCount"] = remaining
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": meta,
        "columnDefinitions": defs,
        "rows": rows,
    }
