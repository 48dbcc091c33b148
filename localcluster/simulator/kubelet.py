"""The kubelet's view of a bound pod, as a pure function of simulated time.

Given when the pod was bound, the image catalog's behaviour of each container
and the current time, :func:`pod_status` computes the pod's ``status`` exactly
as kubelet would report it (phase, conditions, container states, restart
counts, crash-loop back-off) and :func:`next_change` says when it will next
change, so the engine can sleep until then. Nothing is stored between calls:
the same inputs always give the same status.

A pod (or its template) can be told how to misbehave with the annotation
``localcluster.nimctl.io/simulate``: ``fail`` (containers exit 1 at once),
``crash-loop`` (they exit 1 after running briefly, so restartable pods back off),
``never-ready`` (they run but never pass readiness) or ``image-pull-error``
(``ImagePullBackOff``, the pod stays Pending).
``localcluster.nimctl.io/ready-after`` overrides the readiness delay (seconds).

What the engine found before a container may start comes in as a
:class:`ContainerGate` per container: an image pull that fails (``ErrImagePull``,
then ``ImagePullBackOff`` with the kubelet's back-off of 10s doubling to 300s,
retried until the cause is gone) or a missing Secret/ConfigMap or key referenced
by env (``CreateContainerConfigError``, re-checked every sync).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from localcluster.catalog import (
    ContainerBehavior,
    ImageCatalog,
    render_logs,
)
from nimctl_runtime.meta import Obj
from nimctl_runtime.quantity import parse_quantity

SIMULATE_ANNOTATION = "localcluster.nimctl.io/simulate"
READY_AFTER_ANNOTATION = "localcluster.nimctl.io/ready-after"
FAILURE_MODES = ("fail", "crash-loop", "never-ready", "image-pull-error")
MAX_BACKOFF = 300.0
BASE_BACKOFF = 10.0
PULL_SECONDS = 0.5
PRE_STOP_SECONDS = 0.5  # a preStop hook runs this long before SIGTERM
CONFIG_RESYNC = 10.0


WallAt = Callable[[float], str]


@dataclass(frozen=True)
class KubeletTiming:
    """Delays in simulated seconds."""

    start_delay: float = 0.1
    ready_delay: float = 0.2
    crash_run_seconds: float = 0.5
    stop_seconds: float = 0.5  # containers exit this long after SIGTERM


@dataclass(frozen=True)
class ContainerGate:
    """What stands between one container and its start, as the engine last found it.

    ``pull_error`` is containerd's error for a failing pull, ``config_error`` the
    CreateContainerConfigError message, ``mount_error`` a volume that cannot be
    mounted (the pod stays ContainerCreating); ``since`` is when that failure was
    first seen (the pull back-off runs from there); ``not_before`` is the earliest
    start once a failure has cleared.
    """

    pull_error: str = ""
    config_error: str = ""
    mount_error: str = ""
    since: float = 0.0
    not_before: float = 0.0


OPEN_GATE = ContainerGate()


def pull_backoff(first: float, now: float) -> tuple[str, float]:
    """(``ErrImagePull`` or ``ImagePullBackOff``, when it next changes) for a failing pull."""
    attempt, tries = first, 0
    while tries < 10_000:
        failed_at = attempt + PULL_SECONDS
        if now < failed_at:
            return "ErrImagePull", failed_at
        retry = failed_at + min(BASE_BACKOFF * 2**tries, MAX_BACKOFF)
        if now < retry:
            return "ImagePullBackOff", retry
        attempt, tries = retry, tries + 1
    return "ImagePullBackOff", now + MAX_BACKOFF


@dataclass(frozen=True)
class PodPlan:
    """Everything that fixes a pod's timeline."""

    bound_at: float
    pod_ip: str
    host_ip: str
    timing: KubeletTiming


def _mode(pod: Mapping[str, Any]) -> str:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get(SIMULATE_ANNOTATION, ""))


def container_behavior(
    pod: Mapping[str, Any], container: Mapping[str, Any], catalog: ImageCatalog, *, init: bool
) -> ContainerBehavior:
    """The catalog's behaviour, overridden by the pod's ``simulate`` annotation."""
    mode = _mode(pod)
    behavior = catalog.resolve(
        str(container.get("image", "")), container.get("command") or (), container.get("args") or ()
    )
    if init and behavior.exit_code is None:
        # Init containers the catalog has no ending for finish at once: otherwise no
        # pod with such an init container (a NIM image running a setup command, say)
        # could ever start.
        behavior = ContainerBehavior(exit_code=0)
    if mode == "fail":
        return ContainerBehavior(logs=behavior.logs, exit_code=1, run_seconds=0.0)
    if mode == "crash-loop":
        return ContainerBehavior(logs=behavior.logs, exit_code=1, run_seconds=0.5)
    if mode == "image-pull-error":
        return ContainerBehavior(pull_error=True)
    if mode == "never-ready":
        return ContainerBehavior(
            logs=behavior.logs,
            exit_code=behavior.exit_code,
            run_seconds=behavior.run_seconds,
            ready=False,
        )
    return behavior


@dataclass
class _Run:
    """One container's computed state at time t."""

    state: Obj
    last_state: Obj
    restarts: int
    started_at: float | None
    running: bool
    terminated_code: int | None
    waiting: bool
    next_event: float | None


def _simulate_container(
    behavior: ContainerBehavior,
    start: float,
    restart_policy: str,
    *,
    now: float,
    wall_at: WallAt,
    container: str,
    pod: str,
    image: str = "",
    gate: ContainerGate = OPEN_GATE,
) -> _Run:
    start = max(start, gate.not_before)
    if now < start:
        return _Run(
            {"waiting": {"reason": "ContainerCreating"}}, {}, 0, None, False, None, True, start
        )
    if gate.mount_error:
        waiting = {"reason": "ContainerCreating"}
        return _Run({"waiting": waiting}, {}, 0, None, False, None, True, now + CONFIG_RESYNC)
    if behavior.pull_error and not gate.pull_error:
        gate = ContainerGate(pull_error=not_found_error(image), since=start)
    if gate.pull_error:
        reason, change = pull_backoff(max(start, gate.since), now)
        message = gate.pull_error
        if reason == "ImagePullBackOff":
            message = f'Back-off pulling image "{image}": ErrImagePull: {gate.pull_error}'
        waiting = {"reason": reason, "message": message}
        return _Run({"waiting": waiting}, {}, 0, None, False, None, True, change)
    if gate.config_error:
        waiting = {"reason": "CreateContainerConfigError", "message": gate.config_error}
        return _Run({"waiting": waiting}, {}, 0, None, False, None, True, now + CONFIG_RESYNC)
    restarts = 0
    current = start
    last_state: Obj = {}
    for _ in range(10_000):
        if behavior.exit_code is None:
            return _Run(
                {"running": {"startedAt": wall_at(current)}},
                last_state,
                restarts,
                current,
                True,
                None,
                False,
                None,
            )
        end = current + behavior.run_seconds
        if now < end:
            return _Run(
                {"running": {"startedAt": wall_at(current)}},
                last_state,
                restarts,
                current,
                True,
                None,
                False,
                end,
            )
        code = behavior.exit_code
        terminated: Obj = {
            "exitCode": code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": wall_at(current),
            "finishedAt": wall_at(end),
            "containerID": container_id(pod, container, restarts),
        }
        restart = restart_policy == "Always" or (restart_policy == "OnFailure" and code != 0)
        if not restart:
            return _Run(
                {"terminated": terminated}, last_state, restarts, current, False, code, False, None
            )
        backoff = min(BASE_BACKOFF * 2**restarts, MAX_BACKOFF)
        if now < end + backoff:
            message = f"back-off {int(backoff)}s restarting failed container={container} pod={pod}"
            return _Run(
                {"waiting": {"reason": "CrashLoopBackOff", "message": message}},
                {"terminated": terminated},
                restarts + 1,
                current,
                False,
                None,
                True,
                end + backoff,
            )
        last_state = {"terminated": terminated}
        restarts += 1
        current = end + backoff
    return _Run(
        {"waiting": {"reason": "CrashLoopBackOff"}},
        last_state,
        restarts,
        current,
        False,
        None,
        True,
        None,
    )


def not_found_error(image: str) -> str:
    """containerd's error for an image the registry does not have."""
    from localcluster.registries import parse_reference

    ref = parse_reference(image).canonical
    return (
        f'rpc error: code = NotFound desc = failed to pull and unpack image "{ref}": failed to '
        f'resolve reference "{ref}": {ref}: not found'
    )


def _qos_class(pod: Mapping[str, Any]) -> str:
    containers = [
        *((pod.get("spec") or {}).get("containers") or []),
        *((pod.get("spec") or {}).get("initContainers") or []),
    ]
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        requests, limits = res.get("requests") or {}, res.get("limits") or {}
        if requests or limits:
            any_set = True
        for name in ("cpu", "memory"):
            limit = limits.get(name)
            request = requests.get(name, limit)
            if limit is None or parse_quantity(str(request)) != parse_quantity(str(limit)):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _condition(
    type_: str, ok: bool, since: float, wall_at: WallAt, *, reason: str = "", message: str = ""
) -> Obj:
    cond: Obj = {
        "type": type_,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": wall_at(since),
    }
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def _container_status(
    container: Mapping[str, Any],
    run: _Run,
    ready: bool,
    behavior: ContainerBehavior,
    pod_name: str = "",
) -> Obj:
    status: Obj = {
        "name": container.get("name", ""),
        "image": container.get("image", ""),
        "imageID": f"{container.get('image', '')}@sha256:{'0' * 64}",
        "ready": ready,
        "restartCount": run.restarts,
        "started": run.running,
        "state": run.state,
        "lastState": run.last_state,
    }
    if run.started_at is not None:
        status["containerID"] = container_id(pod_name, str(container.get("name", "")), run.restarts)
    del behavior
    return status


def container_id(pod: str, container: str, restarts: int) -> str:
    """A stable containerd-style ID for one run of a container."""
    digest = hashlib.sha256(f"{pod}/{container}/{restarts}".encode()).hexdigest()
    return f"containerd://{digest}"


def pod_status(
    pod: Mapping[str, Any],
    plan: PodPlan,
    catalog: ImageCatalog,
    now: float,
    wall_at: WallAt,
    *,
    gates: Mapping[str, ContainerGate] | None = None,
) -> tuple[Obj, float | None]:
    """The pod's status at *now* and the next simulated time it changes (``None``: never).

    *gates* holds, per container name, what the engine found blocking its start.
    """
    gates = gates or {}
    spec = pod.get("spec") or {}
    name = (pod.get("metadata") or {}).get("name", "")
    restart_policy = spec.get("restartPolicy") or "Always"
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    timing = plan.timing
    ready_delay = timing.ready_delay
    if READY_AFTER_ANNOTATION in annotations:
        try:
            ready_delay = float(annotations[READY_AFTER_ANNOTATION])
        except ValueError:
            ready_delay = timing.ready_delay
    wake: list[float] = []

    # Init containers run one after the other; a restarting init container holds the rest.
    t = plan.bound_at + timing.start_delay
    init_statuses: list[Obj] = []
    initialized_at: float | None = t
    init_blocked_by: list[str] = []
    init_failed = False
    for container in spec.get("initContainers") or []:
        behavior = container_behavior(pod, container, catalog, init=True)
        if initialized_at is None:
            init_statuses.append(
                _container_status(
                    container,
                    _Run(
                        {"waiting": {"reason": "PodInitializing"}},
                        {},
                        0,
                        None,
                        False,
                        None,
                        True,
                        None,
                    ),
                    False,
                    behavior,
                )
            )
            init_blocked_by.append(container.get("name", ""))
            continue
        init_policy = "OnFailure" if restart_policy == "Always" else restart_policy
        run = _simulate_container(
            behavior,
            t,
            init_policy,
            now=now,
            wall_at=wall_at,
            container=container.get("name", ""),
            pod=name,
            image=str(container.get("image", "")),
            gate=gates.get(str(container.get("name", "")), OPEN_GATE),
        )
        if run.next_event is not None:
            wake.append(run.next_event)
        init_statuses.append(_container_status(container, run, False, behavior, name))
        if run.terminated_code == 0:
            t = t + behavior.run_seconds
            initialized_at = t
        else:
            if run.terminated_code is not None:
                init_failed = True
            initialized_at = None
            init_blocked_by.append(container.get("name", ""))

    statuses: list[Obj] = []
    running_any = False
    all_terminated = True
    failed_any = init_failed
    ready_all = True
    ready_since = plan.bound_at
    not_ready: list[str] = []
    for container in spec.get("containers") or []:
        behavior = container_behavior(pod, container, catalog, init=False)
        cname = container.get("name", "")
        if initialized_at is None:
            run = _Run(
                {"waiting": {"reason": "PodInitializing"}}, {}, 0, None, False, None, True, None
            )
        else:
            run = _simulate_container(
                behavior,
                initialized_at,
                restart_policy,
                now=now,
                wall_at=wall_at,
                container=cname,
                pod=name,
                image=str(container.get("image", "")),
                gate=gates.get(str(cname), OPEN_GATE),
            )
        if run.next_event is not None:
            wake.append(run.next_event)
        ready = False
        if run.running and behavior.ready and run.started_at is not None:
            ready_at = run.started_at + ready_delay
            if now >= ready_at:
                ready = True
                ready_since = max(ready_since, ready_at)
            else:
                wake.append(ready_at)
        if not ready:
            ready_all = False
            not_ready.append(cname)
        running_any = running_any or run.running or (run.waiting and run.restarts > 0)
        if run.terminated_code is None:
            all_terminated = False
        elif run.terminated_code != 0:
            failed_any = True
        statuses.append(_container_status(container, run, ready, behavior, name))

    if init_failed:
        phase = "Failed"
    elif initialized_at is None or not statuses:
        phase = "Pending"
    elif all_terminated:
        phase = "Failed" if failed_any else "Succeeded"
    elif running_any:
        phase = "Running"
    else:
        phase = "Pending"

    bound = plan.bound_at
    init_ok = initialized_at is not None
    conditions = [
        _condition(
            "PodReadyToStartContainers",
            now >= bound + timing.start_delay,
            bound + timing.start_delay if now >= bound + timing.start_delay else bound,
            wall_at,
        ),
        _condition(
            "Initialized",
            init_ok,
            initialized_at if initialized_at is not None else bound,
            wall_at,
            reason="" if init_ok else "ContainersNotInitialized",
            message=""
            if init_ok
            else f"containers with incomplete status: [{' '.join(init_blocked_by)}]",
        ),
    ]
    if phase in ("Succeeded", "Failed"):
        conditions += [
            _condition("Ready", False, bound, wall_at, reason="PodCompleted"),
            _condition("ContainersReady", False, bound, wall_at, reason="PodCompleted"),
        ]
    elif ready_all:
        conditions += [
            _condition("Ready", True, ready_since, wall_at),
            _condition("ContainersReady", True, ready_since, wall_at),
        ]
    else:
        message = f"containers with unready status: [{' '.join(not_ready)}]"
        conditions += [
            _condition(
                "Ready", False, bound, wall_at, reason="ContainersNotReady", message=message
            ),
            _condition(
                "ContainersReady",
                False,
                bound,
                wall_at,
                reason="ContainersNotReady",
                message=message,
            ),
        ]
    conditions.append(_condition("PodScheduled", True, bound, wall_at))
    status: Obj = {
        "phase": phase,
        "conditions": conditions,
        "hostIP": plan.host_ip,
        "hostIPs": [{"ip": plan.host_ip}],
        "podIP": plan.pod_ip,
        "podIPs": [{"ip": plan.pod_ip}],
        "startTime": wall_at(bound),
        "qosClass": _qos_class(pod),
        "containerStatuses": statuses,
    }
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    future = [w for w in wake if w > now]
    return status, (min(future) if future else None)


def container_logs(
    pod: Mapping[str, Any], container: str, catalog: ImageCatalog, started: bool
) -> str:
    """What *container* of *pod* has printed (nothing until it has started)."""
    if not started:
        return ""
    spec = pod.get("spec") or {}
    for init, key in ((False, "containers"), (True, "initContainers")):
        for c in spec.get(key) or []:
            if c.get("name") == container:
                image = str(c.get("image", ""))
                logs = container_behavior(pod, c, catalog, init=init).logs
                return render_logs(logs, image, served_model_of(c))
    return ""


def served_model_of(container: Mapping[str, Any]) -> str:
    """The model a NIM container serves: NIM_SERVED_MODEL_NAME or NIM_MODEL_NAME when set
    (the multi-LLM NIM), else the one its image names; "" for other containers."""
    from localcluster.registries import served_model

    for env in container.get("env") or []:
        if env.get("name") in ("NIM_SERVED_MODEL_NAME", "NIM_MODEL_NAME") and env.get("value"):
            return str(env["value"])
    return served_model(str(container.get("image", "")))


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's Ready condition is True."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return bool(cond.get("status") == "True")
    return False


def ready_since(pod: Mapping[str, Any]) -> str | None:
    """The Ready condition's lastTransitionTime when the pod is ready."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            value = cond.get("lastTransitionTime")
            return str(value) if value else None
    return None
