"""The ResourceQuota admission plugin, for pods: kube-apiserver's ``ResourceQuota`` step.

A pod created in a namespace with ResourceQuotas is counted against every quota
whose scopes match it, as Kubernetes' pod evaluator counts:

- ``pods`` (pods not yet Succeeded or Failed) and ``count/pods`` (all pods);
- ``cpu``/``requests.cpu``, ``memory``/``requests.memory``,
  ``ephemeral-storage``/``requests.ephemeral-storage`` and ``limits.*`` of
  those, from the pod's effective requests and limits (the sum of its
  containers, or its largest init container, plus overhead; a container's
  limits stand in for requests it does not give, as API defaulting does);
- extended resources only as ``requests.<name>`` (``requests.nvidia.com/gpu``).

A create that would take a quota past ``spec.hard`` is refused with
Kubernetes' words: ``pods "llm-7f9c4-" is forbidden: exceeded quota: gpu,
requested: requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1,
limited: requests.nvidia.com/gpu=1``. A quota on cpu or memory makes every
container state it: ``failed quota: <name>: must specify limits.cpu for: nim``.
The ReplicaSet, Job and DaemonSet controllers of the simulator turn the refusal
into a ``FailedCreate`` Warning Event (and the ReplicaSet's ``ReplicaFailure``
condition) and retry, so raising the quota lets them go on by themselves.

Usage is counted from the pods stored at admission time (the quota
controller's ``status.used`` in a real cluster, which it keeps current); scopes
``Terminating``, ``NotTerminating``, ``BestEffort``, ``NotBestEffort`` and the
``PriorityClass`` scope selector are honoured. Other kinds are not counted.

``quota_status`` is kube-controller-manager's quota controller for pods: the
``status.hard`` and ``status.used`` the simulator writes, so ``kubectl
describe quota`` shows the usage.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from localcluster import errors
from localcluster.hooks import AdmissionAttributes
from nimctl_runtime.meta import Obj
from nimctl_runtime.quantity import QuantityError, parse_quantity

__all__ = ["ResourceQuotaAdmission", "pod_usage", "quota_refusal", "quota_status"]

Usage = dict[str, Fraction]

_STANDARD = ("cpu", "memory", "ephemeral-storage")
_NATIVE_PREFIXES = ("hugepages-",)
# Kubernetes requires an explicit value per container for these (a historical rule).
_MUST_SPECIFY = frozenset(
    {"cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory"}
)


def _q(value: Any) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError:
        return Fraction(0)


def _container(container: Mapping[str, Any], key: str) -> Usage:
    resources = container.get("resources") or {}
    out: Usage = {}
    if key == "requests":  # API defaulting: limits stand in for absent requests
        out.update({k: _q(v) for k, v in (resources.get("limits") or {}).items()})
    out.update({k: _q(v) for k, v in (resources.get(key) or {}).items()})
    return out


def _pod_total(pod: Mapping[str, Any], key: str) -> Usage:
    spec = pod.get("spec") or {}
    total: Usage = {}
    for container in spec.get("containers") or []:
        for name, qty in _container(container, key).items():
            total[name] = total.get(name, Fraction(0)) + qty
    for container in spec.get("initContainers") or []:
        for name, qty in _container(container, key).items():
            total[name] = max(total.get(name, Fraction(0)), qty)
    for name, value in (spec.get("overhead") or {}).items():
        if name in total:
            total[name] += _q(value)
    return total


def _terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def _extended(name: str) -> bool:
    """Kubernetes' extended resource names: domain-qualified, not ``kubernetes.io/``."""
    return "/" in name and not name.split("/", 1)[0].endswith("kubernetes.io")


def pod_usage(pod: Mapping[str, Any]) -> Usage:
    """What one pod counts against a quota (Kubernetes' pod evaluator)."""
    usage: Usage = {"count/pods": Fraction(1)}
    if _terminal(pod):
        return usage
    usage["pods"] = Fraction(1)
    requests, limits = _pod_total(pod, "requests"), _pod_total(pod, "limits")
    for name in _STANDARD:
        if name in requests:
            usage[name] = usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, qty in requests.items():
        if name.startswith(_NATIVE_PREFIXES):
            usage[name] = usage[f"requests.{name}"] = qty
        elif _extended(name):
            usage[f"requests.{name}"] = qty
    return usage


def _best_effort(pod: Mapping[str, Any]) -> bool:
    """Kubernetes' QoS class BestEffort: no container asks for (or is limited to) a
    non-zero cpu or memory amount (an explicit ``0`` counts as none)."""
    spec = pod.get("spec") or {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        resources = container.get("resources") or {}
        for key in ("requests", "limits"):
            given = resources.get(key) or {}
            if any(_q(given[r]) > 0 for r in ("cpu", "memory") if r in given):
                return False
    return True


def _scope_matches(scope: str, pod: Mapping[str, Any], selector: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    if scope == "Terminating":
        return spec.get("activeDeadlineSeconds") is not None
    if scope == "NotTerminating":
        return spec.get("activeDeadlineSeconds") is None
    if scope == "BestEffort":
        return _best_effort(pod)
    if scope == "NotBestEffort":
        return not _best_effort(pod)
    if scope == "PriorityClass":
        value = str(spec.get("priorityClassName") or "")
        op, values = selector.get("operator"), [str(v) for v in selector.get("values") or []]
        if op == "In":
            return value in values
        if op == "NotIn":
            return value not in values
        if op == "Exists":
            return bool(value)
        if op == "DoesNotExist":
            return not value
    return False  # a scope this plugin does not know does not select the pod


def _applies(quota: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    spec = quota.get("spec") or {}
    for scope in spec.get("scopes") or []:
        if not _scope_matches(str(scope), pod, {}):
            return False
    for expr in (spec.get("scopeSelector") or {}).get("matchExpressions") or []:
        if not _scope_matches(str(expr.get("scopeName", "")), pod, expr):
            return False
    return True


def _format(value: Fraction) -> str:
    """A quantity as Kubernetes prints it: ``1``, ``500m``, ``8Gi``."""
    if value.denominator != 1:
        milli = value * 1000
        return (
            f"{milli.numerator // milli.denominator}m"
            if milli.denominator == 1
            else str(float(value))
        )
    n = value.numerator
    for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if n and n % size == 0 and n >= size:
            return f"{n // size}{suffix}"
    return str(n)


def _pretty(usage: Mapping[str, Fraction], names: Iterable[str]) -> str:
    return ",".join(f"{name}={_format(usage.get(name, Fraction(0)))}" for name in sorted(names))


def _missing_values(pod: Mapping[str, Any], hard: Iterable[str]) -> str:
    """``limits.cpu for: nim; requests.memory for: nim`` (containers that must state them)."""
    required = _MUST_SPECIFY.intersection(hard)
    spec = pod.get("spec") or {}
    missing: dict[str, set[str]] = {}
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        requests, limits = _container(container, "requests"), _container(container, "limits")
        for name in required:
            base = name.split(".", 1)[-1]
            given = limits if name.startswith("limits.") else requests
            if base not in given:
                missing.setdefault(name, set()).add(str(container.get("name", "")))
    return "; ".join(f"{r} for: {','.join(sorted(missing[r]))}" for r in sorted(missing))


def _used(
    quota: Mapping[str, Any], hard: Mapping[str, Fraction], pods: Iterable[Mapping[str, Any]]
) -> Usage:
    used: Usage = dict.fromkeys(hard, Fraction(0))
    for pod in pods:
        if not _applies(quota, pod):
            continue
        for k, v in pod_usage(pod).items():
            if k in hard:
                used[k] += v
    return used


def quota_status(quota: Mapping[str, Any], pods: Iterable[Mapping[str, Any]]) -> Obj:
    """The quota controller's status: ``hard`` as given, ``used`` by the namespace's pods
    (resources other than pods' count zero here)."""
    given = (quota.get("spec") or {}).get("hard") or {}
    hard = {k: _q(v) for k, v in given.items()}
    used = _used(quota, hard, pods)
    return {"hard": dict(given), "used": {k: _format(v) for k, v in used.items()}}


def quota_refusal(
    pod: Mapping[str, Any], quotas: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]]
) -> str:
    """Why the quotas refuse ``pod`` ("" when they admit it); ``pods`` are the namespace's."""
    quotas = [q for q in quotas if (q.get("spec") or {}).get("hard")]
    if not quotas:
        return ""
    wanted = pod_usage(pod)
    pods = list(pods)
    for quota in sorted(quotas, key=lambda q: str((q.get("metadata") or {}).get("name", ""))):
        if not _applies(quota, pod):
            continue
        name = str((quota.get("metadata") or {}).get("name", ""))
        hard = {k: _q(v) for k, v in ((quota.get("spec") or {}).get("hard") or {}).items()}
        missing = _missing_values(pod, hard)
        if missing:
            return f"failed quota: {name}: must specify {missing}"
        requested = {k: v for k, v in wanted.items() if k in hard}
        if not requested:
            continue
        used = _used(quota, hard, pods)
        exceeded = [k for k, v in requested.items() if used.get(k, Fraction(0)) + v > hard[k]]
        if exceeded:
            return (
                f"exceeded quota: {name}, requested: {_pretty(requested, exceeded)}, "
                f"used: {_pretty(used, exceeded)}, limited: {_pretty(hard, exceeded)}"
            )
    return ""


class ResourceQuotaAdmission:
    """Refuse pod creates that a ResourceQuota of their namespace does not allow."""

    def __init__(self, storage: Any) -> None:
        self.storage = storage

    async def mutate(
        self, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> tuple[Obj | None, list[str]]:
        return None, []

    async def validate(
        self, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> list[str]:
        if (
            obj is None
            or attrs.operation != "CREATE"
            or attrs.group
            or attrs.resource != "pods"
            or attrs.subresource
        ):
            return []
        quotas = self.storage.list("v1", "ResourceQuota", attrs.namespace)
        if not quotas:
            return []
        pods = self.storage.list("v1", "Pod", attrs.namespace)
        why = quota_refusal(obj, quotas, pods)
        if why:
            meta = obj.get("metadata") or {}
            name = attrs.name or str(meta.get("generateName") or "") or "Unknown"
            raise errors.forbidden(f'pods "{name}" is forbidden: {why}', "", "pods", name)
        return []
