"""``nimctl why KIND/NAME``: why a custom resource is not Ready, from the CR down to the GPU.

Reads the live objects through any kubeconfig (a real cluster or ``nimctl
local``), whichever operator runs there, and prints one line per hop of the
chain: the custom resource, the NIMCache it waits on, its workload
(Deployment, LeaderWorkerSet, InferenceService, caching Job), the newest pods,
the node a pod runs on or cannot get onto and its GPU state. The last lines
name the blocker (``platforms.blockers``: the same finder the operator's
readiness uses) and what to do about it.

Exit status: 0 when the resource is Ready, 1 when it is not (blocked or still
progressing), 2 when it cannot be read. Scripts can wait on it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from nimctl_runtime.client import Client
from nimctl_runtime.client.errors import ApiError, NotFound
from nimctl_runtime.meta import dig, find_condition
from platforms.blockers import (
    GPU_RESOURCE,
    UPGRADE_STATE_LABEL,
    Blocker,
    cache_job_blocker,
    find_blocker,
    gpu_blocker,
    newest_pods,
    pod_blocker,
)

__all__ = ["KINDS", "Report", "explain", "main", "parse_target"]

from nimctl_runtime.meta import Obj

API = "apps.nvidia.com/v1alpha1"
LWS = ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
ISVC = ("serving.kserve.io/v1beta1", "InferenceService")
LOCAL_KUBECONFIG = ".nimctl/kubeconfig"

KINDS: dict[str, str] = {
    k.lower(): k
    for k in (
        "NIMService",
        "NIMCache",
        "NIMPipeline",
        "NIMBuild",
        "NemoCustomizer",
        "NemoDatastore",
        "NemoEntitystore",
        "NemoEvaluator",
        "NemoGuardrail",
    )
}
"""Kinds ``why`` knows, by lowercase name (plural and short forms are accepted too)."""
SHORT = {"nimsvc": "NIMService", "nimsvcs": "NIMService"}
MAX_PODS_SHOWN = 3


@dataclass
class Report:
    """The chain, line by line, and how it ends."""

    lines: list[str] = field(default_factory=list)
    ready: bool = False
    blocker: Blocker | None = None
    waiting: str = ""
    """Not ready and no blocker found: what the resource itself says (progress)."""

    def hop(self, depth: int, text: str) -> None:
        self.lines.append(("  " * (depth - 1) + "└─ " if depth else "") + text)

    def ending(self) -> list[str]:
        if self.ready:
            return []
        if self.blocker is not None:
            out = [f"Blocked: {self.blocker.reason}: {self.blocker.message}"]
            if self.blocker.fix:
                out.append(f"Fix: {self.blocker.fix}")
            return out
        return [f"Not ready yet: {self.waiting or 'no blocker found; still progressing'}"]

    @property
    def exit_code(self) -> int:
        return 0 if self.ready else 1


def parse_target(target: str) -> tuple[str, str]:
    """``nimservice/llm`` (any case, plural or short) -> ``("NIMService", "llm")``."""
    kind, sep, name = target.partition("/")
    if not sep or not name:
        raise ValueError(f"expected KIND/NAME (e.g. nimservice/llm), got {target!r}")
    key = kind.lower()
    found = KINDS.get(key) or KINDS.get(key.removesuffix("s")) or SHORT.get(key)
    if found is None:
        known = ", ".join(sorted(KINDS.values()))
        raise ValueError(f"unknown kind {kind!r}; why knows {known}")
    return found, name


# -- reads --------------------------------------------------------------------------------


async def _get(
    client: Client, api_version: str, kind: str, name: str, ns: str | None
) -> Obj | None:
    try:
        obj: Obj = await client.get(api_version, kind, name, ns)
    except NotFound:
        return None
    except ApiError as exc:
        if exc.status in (403, 404):  # a kind the cluster does not serve, or may not read
            return None
        raise
    return obj


async def _list(
    client: Client,
    api_version: str,
    kind: str,
    ns: str | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    fields: str | None = None,
) -> list[Obj]:
    try:
        out = await client.list(
            api_version,
            kind,
            ns,
            label_selector=dict(labels) if labels else None,
            field_selector=fields,
        )
    except ApiError as exc:
        if exc.status in (403, 404):
            return []
        raise
    items: list[Obj] = out.get("items") or []
    for item in items:  # a LIST's items carry no kind
        item.setdefault("apiVersion", api_version)
        item.setdefault("kind", kind)
    return items


# -- words --------------------------------------------------------------------------------


def _state_words(obj: Mapping[str, Any]) -> str:
    state = dig(obj, "status", "state") or "no status yet"
    conds = dig(obj, "status", "conditions", default=[]) or []
    ready = find_condition(conds, "Ready")
    failed = find_condition(conds, "Failed")
    if failed is not None and failed.get("status") == "True":
        return f"{state} ({failed.get('reason')}: {failed.get('message')})"
    if ready is not None and ready.get("status") != "True" and ready.get("reason"):
        return f"{state} ({ready.get('reason')})"
    return str(state)


def _is_ready(obj: Mapping[str, Any]) -> bool:
    return bool(dig(obj, "status", "state") == "Ready")


def _condition_words(obj: Mapping[str, Any]) -> str:
    conds = dig(obj, "status", "conditions", default=[]) or []
    for kind in ("Failed", "Ready"):
        c = find_condition(conds, kind)
        if c is None:
            continue
        if (kind == "Failed") == (c.get("status") == "True") and c.get("message"):
            return f"{c.get('reason')}: {str(c.get('message')).strip()}"
    return str(dig(obj, "status", "state") or "no status yet")


def _workload_words(obj: Mapping[str, Any]) -> str:
    kind, name = obj.get("kind"), dig(obj, "metadata", "name")
    st = obj.get("status") or {}
    if kind in ("Deployment", "StatefulSet"):
        want = dig(obj, "spec", "replicas", default=1)
        return f"{kind} {name}: {int(st.get('availableReplicas') or 0)}/{want} available"
    if kind == "Job":
        return (
            f"Job {name}: {int(st.get('active') or 0)} active, "
            f"{int(st.get('succeeded') or 0)} succeeded, {int(st.get('failed') or 0)} failed"
        )
    for cond_type in ("Available", "PredictorReady", "Ready"):
        c = find_condition(st.get("conditions"), cond_type)
        if c is not None:
            return f"{kind} {name}: {cond_type}={c.get('status')}"
    return f"{kind} {name}: no status yet"


def _pod_words(pod: Mapping[str, Any]) -> str:
    name = dig(pod, "metadata", "name")
    phase = dig(pod, "status", "phase") or "Pending"
    reasons = [
        str(dig(s, "state", "waiting", "reason"))
        for field_name in ("initContainerStatuses", "containerStatuses")
        for s in dig(pod, "status", field_name, default=[]) or []
        if dig(s, "state", "waiting", "reason")
    ]
    node = dig(pod, "spec", "nodeName")
    where = f" on node {node}" if node else " (not scheduled)"
    ready = find_condition(dig(pod, "status", "conditions"), "Ready")
    ready_words = ", ready" if ready is not None and ready.get("status") == "True" else ""
    return f"Pod {name}: {phase}{f' ({reasons[0]})' if reasons else ''}{ready_words}{where}"


def _node_words(node: Mapping[str, Any]) -> str:
    name = dig(node, "metadata", "name")
    gpus = dig(node, "status", "allocatable", GPU_RESOURCE, default="0") or "0"
    labels = dig(node, "metadata", "labels", default={}) or {}
    parts = [f"{gpus} {GPU_RESOURCE} allocatable"]
    product = labels.get("nvidia.com/gpu.product")
    if product:
        parts.append(str(product))
    state = labels.get(UPGRADE_STATE_LABEL)
    if state:
        parts.append(f"driver upgrade state {state}")
    if dig(node, "spec", "unschedulable"):
        parts.append("cordoned")
    return f"Node {name}: {', '.join(parts)}"


# -- chains -------------------------------------------------------------------------------


async def _pods_chain(  # noqa: PLR0917 - the hop's place (report, depth, ns) and its objects
    client: Client,
    report: Report,
    depth: int,
    ns: str,
    workloads: Sequence[Obj],
    selectors: Sequence[Mapping[str, str]],
    *,
    job: Obj | None = None,
) -> Blocker | None:
    """Workload lines, the newest pods, their node; returns the blocker found."""
    pods: dict[str, Obj] = {}
    for selector in selectors:
        for pod in await _list(client, "v1", "Pod", ns, labels=selector):
            pods.setdefault(str(dig(pod, "metadata", "uid") or dig(pod, "metadata", "name")), pod)
    events = await _list(client, "v1", "Event", ns, fields="type=Warning")
    all_pods = list(pods.values())
    shown: list[Mapping[str, Any]] = []
    for workload in workloads:
        report.hop(depth, _workload_words(workload))
        shown = newest_pods(workload, all_pods)
        for shown_pod in shown[:MAX_PODS_SHOWN]:
            report.hop(depth + 1, _pod_words(shown_pod))
    if job is not None:
        found = cache_job_blocker(job, all_pods, events)
    else:
        found = find_blocker(workloads, all_pods, events)
    if found is not None and found.reason in ("InsufficientGPU", "Unschedulable"):
        found = gpu_blocker(found, await _list(client, "v1", "Node"))
    if found is not None and found.hop.startswith("node/"):
        node = await _get(client, "v1", "Node", found.hop.split("/", 1)[1], None)
        if node is not None:
            report.hop(depth + 2, _node_words(node))
    elif shown:
        node_name = dig(shown[0], "spec", "nodeName")
        node = await _get(client, "v1", "Node", str(node_name), None) if node_name else None
        if node is not None:
            report.hop(depth + 2, _node_words(node))
    return found


async def _nimcache(client: Client, report: Report, depth: int, name: str, ns: str) -> None:
    obj = await _get(client, API, "NIMCache", name, ns)
    if obj is None:
        report.hop(depth, f"NIMCache {ns}/{name}: not found")
        report.blocker = report.blocker or Blocker(
            "NIMCacheNotFound", f"NIMCache {name} not found", f"nimcache/{name}"
        )
        return
    report.hop(depth, f"NIMCache {ns}/{name}: {dig(obj, 'status', 'state') or 'no status yet'}")
    if _is_ready(obj):
        return
    selector = {"app": "k8s-nim-operator", "app.kubernetes.io/name": name}
    job = await _get(client, "batch/v1", "Job", f"{name}-job", ns)
    if job is not None:
        found = await _pods_chain(client, report, depth + 1, ns, [job], [selector], job=job)
    else:
        manifest = await _get(client, "v1", "Pod", f"{name}-pod", ns)
        found = None
        if manifest is not None:
            report.hop(depth + 1, _pod_words(manifest))
            events = await _list(client, "v1", "Event", ns, fields="type=Warning")
            found = pod_blocker(manifest, events)
    if found is not None:
        report.blocker = report.blocker or found
    elif not report.waiting:
        conds = dig(obj, "status", "conditions", default=[]) or []
        last = conds[-1] if conds else {}
        report.waiting = f"NIMCache {name}: {last.get('message') or 'caching has not started'}"


async def _nimservice(client: Client, report: Report, depth: int, name: str, ns: str) -> bool:
    obj = await _get(client, API, "NIMService", name, ns)
    if obj is None:
        report.hop(depth, f"NIMService {ns}/{name}: not found")
        return False
    report.hop(depth, f"NIMService {ns}/{name}: {_state_words(obj)}")
    if _is_ready(obj):
        return True
    cache = dig(obj, "spec", "storage", "nimCache", "name")
    if cache:
        await _nimcache(client, report, depth + 1, str(cache), ns)
        if report.blocker is not None:
            return False
    workloads: list[Obj] = []
    lws = await _get(client, *LWS, f"{name}-lws", ns)
    if lws is not None:
        workloads.append({**lws, "apiVersion": LWS[0], "kind": LWS[1]})
    else:
        deployment = await _get(client, "apps/v1", "Deployment", name, ns)
        if deployment is not None:
            workloads.append({**deployment, "apiVersion": "apps/v1", "kind": "Deployment"})
        else:
            isvc = await _get(client, *ISVC, name, ns)
            if isvc is not None:
                workloads.append({**isvc, "apiVersion": ISVC[0], "kind": ISVC[1]})
    selectors = [
        {"app": name},
        {"app": f"{name}-lws"},
        {"serving.kserve.io/inferenceservice": name},
    ]
    found = await _pods_chain(client, report, depth + 1, ns, workloads, selectors)
    if found is not None:
        report.blocker = report.blocker or found
    elif not report.waiting:
        report.waiting = f"NIMService {name}: {_condition_words(obj)}"
    return False


async def _nimpipeline(client: Client, report: Report, name: str, ns: str) -> bool:
    obj = await _get(client, API, "NIMPipeline", name, ns)
    if obj is None:
        report.hop(0, f"NIMPipeline {ns}/{name}: not found")
        return False
    report.hop(0, f"NIMPipeline {ns}/{name}: {_state_words(obj)}")
    ready = _is_ready(obj)
    for member in dig(obj, "spec", "services", default=[]) or []:
        if member.get("enabled") is False:
            continue
        member_name = str(member.get("name", ""))
        before = report.blocker
        await _nimservice(client, report, 1, member_name, ns)
        if before is None and report.blocker is not None:
            # the first member with a blocker is the answer; the others are listed
            b = report.blocker
            report.blocker = Blocker(
                b.reason, f"member {member_name}: {b.message}", b.hop, b.terminal
            )
    return ready


async def _generic(client: Client, report: Report, kind: str, name: str, ns: str) -> bool:
    obj = await _get(client, API, kind, name, ns)
    if obj is None:
        report.hop(0, f"{kind} {ns}/{name}: not found")
        return False
    report.hop(0, f"{kind} {ns}/{name}: {_state_words(obj)}")
    if _is_ready(obj):
        return True
    deployment = await _get(client, "apps/v1", "Deployment", name, ns)
    workloads = (
        [{**deployment, "apiVersion": "apps/v1", "kind": "Deployment"}] if deployment else []
    )
    selectors = [dict(dig(deployment, "spec", "selector", "matchLabels", default={}) or {})]
    found = (
        await _pods_chain(client, report, 1, ns, workloads, [s for s in selectors if s])
        if workloads
        else None
    )
    report.blocker = found
    if found is None:
        report.waiting = f"{kind} {name}: {_condition_words(obj)}"
    return False


async def explain(client: Client, kind: str, name: str, namespace: str) -> Report:
    """The chain for one custom resource (see the module docstring)."""
    report = Report()
    if kind == "NIMService":
        report.ready = await _nimservice(client, report, 0, name, namespace)
    elif kind == "NIMCache":
        await _nimcache(client, report, 0, name, namespace)
        obj = await _get(client, API, "NIMCache", name, namespace)
        report.ready = obj is not None and _is_ready(obj)
    elif kind == "NIMPipeline":
        report.ready = await _nimpipeline(client, report, name, namespace)
    else:
        report.ready = await _generic(client, report, kind, name, namespace)
    if report.ready:
        report.blocker = None
    return report


def _kubeconfig(flag: str | None) -> str | None:
    """``--kubeconfig``, else the usual places, else ``nimctl local``'s own file."""
    if flag:
        return flag
    if os.environ.get("KUBECONFIG") or Path("~/.kube/config").expanduser().is_file():
        return None
    if Path(LOCAL_KUBECONFIG).is_file():
        return LOCAL_KUBECONFIG
    return None


async def run(args: argparse.Namespace, out: TextIO) -> int:
    try:
        kind, name = parse_target(args.target)
    except ValueError as exc:
        print(f"nimctl why: {exc}", file=sys.stderr)
        return 2
    try:
        client = Client(_kubeconfig(args.kubeconfig))
    except Exception as exc:  # no configuration found: say so, do not trace
        print(f"nimctl why: {exc}", file=sys.stderr)
        return 2
    async with client:
        try:
            report = await explain(client, kind, name, args.namespace)
        except ApiError as exc:
            print(f"nimctl why: {exc}", file=sys.stderr)
            return 2
    for line in [*report.lines, *report.ending()]:
        print(line, file=out)
    return report.exit_code


def main(args: argparse.Namespace) -> int:
    return asyncio.run(run(args, sys.stdout))
