"""The simulated GPU node agents: validation gates, driver install, what the node advertises."""

from __future__ import annotations

from typing import Any

from localcluster.catalog import ImageCatalog
from localcluster.simulator.gpu_stack import (
    GATE_MARKER,
    GPUStack,
    driver_version,
)
from localcluster.simulator.kubelet import (
    READY_AFTER_ANNOTATION,
    SIMULATE_ANNOTATION,
)
from localcluster.simulator.objects import (
    Context,
    ObjectLookup,
    Update,
    UpdateStatus,
)

NS = "gpu-operator"


def node(**annotations: str) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {
            "name": "gpu-0",
            "labels": {"nvidia.com/mig.config": "all-disabled"},
            "annotations": {"localcluster.nimctl.io/gpus": "8", **annotations},
            "resourceVersion": "1",
        },
        "status": {"allocatable": {"cpu": "8"}, "capacity": {"cpu": "8"}},
    }


def pod(name: str, app: str, *, ready: bool = False, inits: tuple[str, ...] = ()) -> dict[str, Any]:
    labels = {"app": app}
    if app == "nvidia-driver-daemonset":
        labels["app.kubernetes.io/component"] = "nvidia-driver"
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": labels},
        "spec": {
            "nodeName": "gpu-0",
            "initContainers": [{"name": n, "image": "validator"} for n in inits],
            "containers": [
                {"name": "main", "image": "nvcr.io/nvidia/driver:595.91.07-ubuntu22.04"}
            ],
        },
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def stack(*objs: dict[str, Any]) -> GPUStack:
    view = ObjectLookup()
    s = GPUStack(view, ImageCatalog())
    for obj in objs:
        view.put(obj)
        s.observe(obj["kind"], "ADDED", obj)
    return s


def gated(p: dict[str, Any]) -> list[str]:
    return [c["name"] for c in p["spec"]["initContainers"] if GATE_MARKER in (c.get("args") or [])]


VALIDATOR_INITS = (
    "driver-validation",
    "toolkit-validation",
    "cuda-validation",
    "plugin-validation",
)


def test_gates_open_in_order() -> None:
    n = node()
    validator = pod("validator", "nvidia-operator-validator", inits=VALIDATOR_INITS)
    s = stack(n, validator)
    assert gated(s.pod_view(validator, n)) == list(VALIDATOR_INITS)

    s = stack(n, validator, pod("driver", "nvidia-driver-daemonset", ready=True))
    # No toolkit DaemonSet: a host toolkit, so toolkit-ready follows driver-ready.
    assert gated(s.pod_view(validator, n)) == ["plugin-validation"]

    toolkit_ds = {
        "kind": "DaemonSet",
        "metadata": {"name": "nvidia-container-toolkit-daemonset", "namespace": NS},
    }
    s = stack(n, validator, toolkit_ds, pod("driver", "nvidia-driver-daemonset", ready=True))
    assert gated(s.pod_view(validator, n)) == [
        "toolkit-validation",
        "cuda-validation",
        "plugin-validation",
    ]
    advertising = node()
    advertising["status"]["allocatable"]["nvidia.com/gpu"] = "8"
    s = stack(
        advertising,
        validator,
        toolkit_ds,
        pod("driver", "nvidia-driver-daemonset", ready=True),
        pod("toolkit", "nvidia-container-toolkit-daemonset", ready=True),
    )
    assert gated(s.pod_view(validator, advertising)) == []


def test_driver_installs_or_never_gets_ready() -> None:
    driver = pod("driver", "nvidia-driver-daemonset")
    installed = stack(node(), driver).pod_view(driver, node())
    assert installed["metadata"]["annotations"][READY_AFTER_ANNOTATION] == "2.0"
    failing = node(**{"localcluster.nimctl.io/driver-install": "fail"})
    broken = stack(failing, driver).pod_view(driver, failing)
    assert broken["metadata"]["annotations"][SIMULATE_ANNOTATION] == "never-ready"
    assert "annotations" not in driver["metadata"], "the stored pod is not changed"


def test_a_ready_device_plugin_advertises_gpus_and_gfd_labels_the_node() -> None:
    n = node(**{"localcluster.nimctl.io/gpu-product": "NVIDIA-L4"})
    s = stack(
        n,
        pod("plugin", "nvidia-device-plugin-daemonset", ready=True),
        pod("gfd", "gpu-feature-discovery", ready=True),
        pod("mig", "nvidia-mig-manager", ready=True),
        pod("driver", "nvidia-driver-daemonset", ready=True),
    )
    ctx = Context(view=s.view, now=0.0, stamp=lambda: "", sim_of=lambda _: 0.0)
    actions = s.sync("gpu-0", ctx)
    status = next(a for a in actions if isinstance(a, UpdateStatus)).obj["status"]
    assert status["allocatable"]["nvidia.com/gpu"] == "8"
    labels = next(a for a in actions if isinstance(a, Update)).obj["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-L4"
    assert labels["nvidia.com/cuda.driver.major"] == "595"
    assert labels["nvidia.com/mig.config.state"] == "success"


def test_without_a_device_plugin_nothing_is_advertised() -> None:
    s = stack(node())
    ctx = Context(view=s.view, now=0.0, stamp=lambda: "", sim_of=lambda _: 0.0)
    assert s.sync("gpu-0", ctx) == []


def test_driver_version_from_image_or_host() -> None:
    assert driver_version(pod("d", "nvidia-driver-daemonset"), node()) == "595.91.07"
    host = node(**{"localcluster.nimctl.io/host-driver-version": "550.127.05"})
    assert driver_version(None, host) == "550.127.05"
