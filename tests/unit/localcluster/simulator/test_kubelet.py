from typing import Any

from localcluster.catalog import ImageCatalog
from localcluster.simulator.kubelet import (
    ContainerGate,
    KubeletTiming,
    PodPlan,
    pod_status,
)


def wall(t: float) -> str:
    return f"T+{t:.2f}"


PLAN = PodPlan(
    bound_at=0.0,
    pod_ip="10.244.0.5",
    host_ip="10.0.0.2",
    timing=KubeletTiming(start_delay=1.0, ready_delay=2.0),
)


def pod(
    image: str = "unknown:1",
    restart: str = "Always",
    annotations: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "main", "image": image}
    if command:
        c["command"] = command
    return {
        "metadata": {"name": "p", "annotations": annotations or {}},
        "spec": {"restartPolicy": restart, "containers": [c]},
    }


def ready(status: dict[str, Any]) -> str:
    return next(c["status"] for c in status["conditions"] if c["type"] == "Ready")


def test_unknown_image_runs_forever_and_becomes_ready_after_delays() -> None:
    cat = ImageCatalog()
    s, wake = pod_status(pod(), PLAN, cat, 0.5, wall)
    assert s["phase"] == "Pending" and wake == 1.0
    s, wake = pod_status(pod(), PLAN, cat, 1.5, wall)
    assert s["phase"] == "Running" and ready(s) == "False" and wake == 3.0
    s, wake = pod_status(pod(), PLAN, cat, 3.0, wall)
    assert ready(s) == "True" and wake is None


def test_catalogued_job_image_succeeds_and_failure_modes() -> None:
    cat = ImageCatalog()
    cat.set("busybox:*", logs="hi\n", exit_code=0, run_seconds=2)
    s, _ = pod_status(pod("busybox:1.36", restart="Never"), PLAN, cat, 3.5, wall)
    assert s["phase"] == "Succeeded"
    assert s["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    failing = pod(
        "busybox:1.36", restart="Never", annotations={"localcluster.nimctl.io/simulate": "fail"}
    )
    s, _ = pod_status(failing, PLAN, cat, 1.5, wall)
    assert s["phase"] == "Failed"


def test_crash_loop_backs_off_and_counts_restarts() -> None:
    p = pod(annotations={"localcluster.nimctl.io/simulate": "crash-loop"})
    s, _ = pod_status(p, PLAN, ImageCatalog(), 5.0, wall)
    st = s["containerStatuses"][0]
    assert st["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert st["restartCount"] == 1
    s, _ = pod_status(p, PLAN, ImageCatalog(), 40.0, wall)
    assert s["containerStatuses"][0]["restartCount"] >= 2
    assert s["phase"] == "Running" and ready(s) == "False"


def test_never_ready_and_manifest_probe() -> None:
    s, _ = pod_status(
        pod(annotations={"localcluster.nimctl.io/simulate": "never-ready"}),
        PLAN,
        ImageCatalog(),
        100.0,
        wall,
    )
    assert s["phase"] == "Running" and ready(s) == "False"
    probe = pod(
        "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
        command=["sh", "-c", "cat /opt/nim/etc/default/model_manifest.yaml; sleep infinity"],
    )
    cat = ImageCatalog()
    from localcluster.simulator.kubelet import container_logs

    assert "llm_engine" in container_logs(probe, "main", cat, started=True)


def test_image_that_cannot_be_pulled_keeps_the_pod_pending() -> None:
    cat = ImageCatalog()
    cat.set("registry.example.com/missing:*", pull_error=True)
    image = "registry.example.com/missing:1"
    error = (
        'rpc error: code = NotFound desc = failed to pull and unpack image "'
        f'{image}": failed to resolve reference "{image}": {image}: not found'
    )
    # started at 1.0: the pull fails at 1.5, then backs off 10s, 20s, 40s ...
    s, wake = pod_status(pod(image), PLAN, cat, 1.2, wall)
    assert s["containerStatuses"][0]["state"]["waiting"] == {
        "reason": "ErrImagePull",
        "message": error,
    }
    assert wake == 1.5
    s, wake = pod_status(pod(image), PLAN, cat, 10.0, wall)
    st = s["containerStatuses"][0]
    assert s["phase"] == "Pending" and ready(s) == "False" and wake == 11.5
    assert st["state"]["waiting"] == {
        "reason": "ImagePullBackOff",
        "message": f'Back-off pulling image "{image}": ErrImagePull: {error}',
    }
    s, wake = pod_status(pod(image), PLAN, cat, 11.7, wall)  # retried, failed again
    assert s["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImagePull"
    s, wake = pod_status(pod(image), PLAN, cat, 13.0, wall)
    assert wake == 32.0  # the second back-off is 20s
    by_annotation = pod(annotations={"localcluster.nimctl.io/simulate": "image-pull-error"})
    s, _ = pod_status(by_annotation, PLAN, cat, 10.0, wall)
    assert s["containerStatuses"][0]["state"]["waiting"]["reason"] == "ImagePullBackOff"


def test_gates_from_the_engine_hold_the_container() -> None:
    cat = ImageCatalog()
    missing = ContainerGate(config_error='secret "ngc-api" not found', since=1.0)
    s, wake = pod_status(pod(), PLAN, cat, 5.0, wall, gates={"main": missing})
    assert s["phase"] == "Pending"
    assert s["containerStatuses"][0]["state"]["waiting"] == {
        "reason": "CreateContainerConfigError",
        "message": 'secret "ngc-api" not found',
    }
    assert wake == 15.0  # re-checked at the next sync
    cleared = ContainerGate(not_before=20.0)
    s, wake = pod_status(pod(), PLAN, cat, 20.5, wall, gates={"main": cleared})
    st = s["containerStatuses"][0]
    assert st["state"] == {"running": {"startedAt": "T+20.00"}}
    assert ready(s) == "False" and wake == 22.0  # ready_delay after the late start
    unauthorized = ContainerGate(pull_error="401 Unauthorized", since=3.0)
    s, wake = pod_status(pod(), PLAN, cat, 3.2, wall, gates={"main": unauthorized})
    assert s["containerStatuses"][0]["state"]["waiting"]["reason"] == "ErrImagePull"
    assert wake == 3.5
