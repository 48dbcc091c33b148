"""``nimctl why`` as a user runs it against ``nimctl local``: three causes, then Ready.

The output is one line per hop (CR, workload, pod, node), then the blocker and
the fix; the exit code is 1 while blocked and 0 once Ready.
"""

from __future__ import annotations

import subprocess

import pytest

from tests.e2e.journeys.harness import Kubectl, nimctl_argv, subprocess_env, wait_for

pytestmark = pytest.mark.kubectl

SERVICE = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: NAME, namespace: NS}
spec:
  image: {repository: nvcr.io/nim/meta/llama-3.2-1b-instruct, tag: "TAG", pullSecrets: [ngc-secret]}
  authSecret: AUTH
  replicas: 1
  resources: {limits: {nvidia.com/gpu: 1}}
  storage: {emptyDir: {}}
  expose: {service: {port: 8000}}
"""


def _service(ns: str, name: str, *, tag: str = "1.12.0", auth: str = "ngc-api-secret") -> str:
    return SERVICE.replace("NS", ns).replace("NAME", name).replace("TAG", tag).replace("AUTH", auth)


def _why(kubectl: Kubectl, target: str, ns: str) -> subprocess.CompletedProcess[str]:
    home = kubectl.kubeconfig.parent / "why-home"
    home.mkdir(exist_ok=True)
    return subprocess.run(
        nimctl_argv("why", target, "-n", ns, "--kubeconfig", str(kubectl.kubeconfig)),
        capture_output=True,
        text=True,
        env=subprocess_env(home),
        timeout=60,
        check=False,
    )


def _blocked_with(kubectl: Kubectl, target: str, ns: str, reason: str) -> str:
    def probe() -> str | None:
        res = _why(kubectl, target, ns)
        return res.stdout if res.returncode == 1 and f"Blocked: {reason}: " in res.stdout else None

    return wait_for(probe, 60, f"nimctl why {target} to say {reason}")


def test_why_names_three_causes_and_exits_zero_once_ready(kubectl: Kubectl) -> None:
    ns = "why-journey"
    kubectl.ngc_namespace(ns)
    kubectl.run("apply", "-f", "-", input=_service(ns, "no-key", auth="missing-key"))
    kubectl.run("apply", "-f", "-", input=_service(ns, "bad-tag", tag="9.99.99"))
    kubectl.run("apply", "-f", "-", input=_service(ns, "ok"))

    out = _blocked_with(kubectl, "nimservice/no-key", ns, "SecretNotFound")
    lines = out.splitlines()
    assert lines[0].startswith(f"NIMService {ns}/no-key: NotReady (SecretNotFound)")
    assert lines[1] == "└─ Deployment no-key: 0/1 available"
    assert lines[2].startswith("  └─ Pod no-key-") and "(CreateContainerConfigError)" in lines[2]
    assert lines[3].startswith("    └─ Node ") and "nvidia.com/gpu allocatable" in lines[3]
    assert lines[-2].endswith('cannot start: secret "missing-key" not found')
    assert lines[-1].startswith("Fix: create the Secret")

    out = _blocked_with(kubectl, "nimsvc/bad-tag", ns, "ImagePullFailed")
    assert 'cannot pull image "nvcr.io/nim/meta/llama-3.2-1b-instruct:9.99.99": not found' in out

    # Ready: exit 0, no blocker line.
    def ready() -> str | None:
        res = _why(kubectl, "nimservice/ok", ns)
        return res.stdout if res.returncode == 0 else None

    out = wait_for(ready, 90, "nimctl why nimservice/ok to exit 0")
    assert out.splitlines()[0] == f"NIMService {ns}/ok: Ready"
    assert "Blocked" not in out

    # Third cause: no GPU big enough anywhere (the scheduler's words, then the fix).
    kubectl.run(
        "apply",
        "-f",
        "-",
        input=_service(ns, "too-big").replace("nvidia.com/gpu: 1", "nvidia.com/gpu: 64"),
    )
    out = _blocked_with(kubectl, "nimservice/too-big", ns, "InsufficientGPU")
    assert "(not scheduled)" in out
    assert "Insufficient nvidia.com/gpu" in out and "Fix: free GPUs" in out

    # Fixing the first cause: the same command now exits 0.
    kubectl.apply_generated(
        "secret", "generic", "missing-key", "--from-literal=NGC_API_KEY=x", "-n", ns
    )

    def fixed() -> bool:
        return _why(kubectl, "nimservice/no-key", ns).returncode == 0

    wait_for(fixed, 90, "nimctl why nimservice/no-key to exit 0 once the Secret exists")


def test_why_refuses_an_unknown_kind(kubectl: Kubectl) -> None:
    res = _why(kubectl, "widget/x", "default")
    assert res.returncode == 2
    assert "unknown kind 'widget'" in res.stderr
