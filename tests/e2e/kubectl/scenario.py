"""The kubectl scenario: one list of steps run on localcluster and, where a container engine
exists, on k3s too (``tests/e2e/k3s/test_k3s_parity.py``).

Each step is a kubectl command line and what kube-apiserver makes kubectl print for
it, reduced to what does not depend on the server (node names, timings, progress
lines of ``rollout status``). The localcluster suite checks every step against its
``expect``; the parity test checks that localcluster and k3s print the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

NAMESPACE = "scenario"

Run = Callable[[tuple[str, ...], "str | None"], tuple[int, str, str]]

DEPLOYMENT = json.dumps(
    {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "llm", "namespace": NAMESPACE},
        "spec": {
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {
                "metadata": {"labels": {"app": "llm"}},
                "spec": {"containers": [{"name": "nim", "image": "nginx:1.27"}]},
            },
        },
    }
)


def _last_line(out: str) -> str:
    """``rollout status`` prints progress lines whose number depends on timing."""
    lines = [line for line in out.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _explain_header(out: str) -> str:
    """The header of ``kubectl explain`` (descriptions differ between versions)."""
    return "\n".join(
        line for line in out.splitlines() if re.match(r"^(GROUP|KIND|VERSION|FIELD):", line)
    )


def _refused(name: str, **pod_spec: object) -> str:
    """A Deployment whose pod template kube-apiserver refuses for one reason."""
    return json.dumps(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {
                "selector": {"matchLabels": {"app": name}},
                "template": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}], **pod_spec},
                },
            },
        }
    )


_AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "gpu", "operator": "In"}]}]
        }
    }
}
_SPREAD = [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]


def _jwt(out: str) -> str:
    """A token is random; what must match is that it is one (three base64url parts)."""
    token = out.strip()
    return "<jwt>" if re.fullmatch(r"[-\w]+\.[-\w]+\.[-\w]+", token) else token


def _drain(out: str) -> str:
    """The cordon/drain verdict lines, with the node's name replaced."""
    verdicts = [
        re.sub(r"^node/\S+", "node/NODE", line)
        for line in out.splitlines()
        if re.match(r"^node/\S+ (cordoned|drained)", line)
    ]
    return "\n".join(verdicts)


@dataclass(frozen=True)
class Step:
    """One kubectl call: its arguments, stdin, and what a real API server makes it print."""

    args: tuple[str, ...]
    expect: str
    code: int = 0
    stdin: str | None = None
    reduce: Callable[[str], str] = str.strip
    per_node: bool = False  # ``{node}`` in args is the first node's name

    @property
    def name(self) -> str:
        return " ".join(self.args[:3])


def _ns(*args: str) -> tuple[str, ...]:
    return ("-n", NAMESPACE, *args)


STEPS: tuple[Step, ...] = (
    Step(("create", "namespace", NAMESPACE), f"namespace/{NAMESPACE} created"),
    Step(
        _ns("create", "deployment", "web", "--image=nginx:1.27", "--replicas=2"),
        "deployment.apps/web created",
    ),
    Step(
        _ns("rollout", "status", "deployment/web", "--timeout=120s"),
        'deployment "web" successfully rolled out',
        reduce=_last_line,
    ),
    Step(
        _ns("expose", "deployment", "web", "--port=80", "--target-port=8080"), "service/web exposed"
    ),
    Step(
        _ns("set", "image", "deployment/web", "nginx=nginx:1.28"),
        "deployment.apps/web image updated",
    ),
    Step(
        _ns("rollout", "status", "deployment/web", "--timeout=120s"),
        'deployment "web" successfully rolled out',
        reduce=_last_line,
    ),
    Step(_ns("rollout", "undo", "deployment/web"), "deployment.apps/web rolled back"),
    Step(
        _ns("rollout", "status", "deployment/web", "--timeout=120s"),
        'deployment "web" successfully rolled out',
        reduce=_last_line,
    ),
    Step(
        _ns("create", "job", "hello", "--image=busybox", "--", "echo", "hi"),
        "job.batch/hello created",
    ),
    Step(
        _ns("create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *"),
        "cronjob.batch/nightly created",
    ),
    Step(_ns("create", "service", "clusterip", "api", "--tcp=80:8080"), "service/api created"),
    Step(
        _ns("create", "ingress", "api", "--rule=nim.example.com/v1*=api:80"),
        "ingress.networking.k8s.io/api created",
    ),
    Step(_ns("apply", "-f", "-"), "deployment.apps/llm created", stdin=DEPLOYMENT),
    Step(_ns("apply", "-f", "-"), "deployment.apps/llm unchanged", stdin=DEPLOYMENT),
    Step(
        ("explain", "deployment.spec"),
        "GROUP:      apps\nKIND:       Deployment\nVERSION:    v1\nFIELD: spec <DeploymentSpec>",
        reduce=_explain_header,
    ),
    Step(
        _ns("create", "cronjob", "c", "--image=busybox", "--schedule=* * *"),
        'error: failed to create cronjob: CronJob.batch "c" is invalid: spec.schedule: Invalid '
        'value: "* * *": expected exactly 5 fields, found 3: * * *',
        code=1,
    ),
    Step(
        _ns("create", "service", "nodeport", "s", "--tcp=80", "--node-port=80"),
        'error: failed to create NodePort service: Service "s" is invalid: spec.ports[0].nodePort: '
        "Invalid value: 80: provided port is not in the valid range. The range of valid ports "
        "is 30000-32767",
        code=1,
    ),
    Step(
        _ns("create", "token", "robot"),
        'error: failed to create token: serviceaccounts "robot" not found',
        code=1,
    ),
    Step(
        _ns("apply", "-f", "-"),
        'The Deployment "bad-affinity" is invalid: spec.template.spec.affinity.nodeAffinity.'
        "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0]."
        "values: Required value: must be specified when `operator` is 'In' or 'NotIn'",
        code=1,
        stdin=_refused("bad-affinity", affinity=_AFFINITY),
    ),
    Step(
        _ns("apply", "-f", "-"),
        'The Deployment "bad-spread" is invalid: spec.template.spec.topologySpreadConstraints[0].'
        "maxSkew: Invalid value: 0: must be greater than zero",
        code=1,
        stdin=_refused("bad-spread", topologySpreadConstraints=_SPREAD),
    ),
    Step(
        _ns("apply", "-f", "-"),
        'The Deployment "bad-user" is invalid: spec.template.spec.securityContext.runAsUser: '
        "Invalid value: -1: must be between 0 and 2147483647, inclusive",
        code=1,
        stdin=_refused("bad-user", securityContext={"runAsUser": -1}),
    ),
    Step(_ns("create", "token", "default"), "<jwt>", reduce=_jwt),
    Step(_ns("create", "serviceaccount", "robot"), "serviceaccount/robot created"),
    Step(
        _ns("create", "token", "robot", "--duration=5m"),
        'error: failed to create token: TokenRequest.authentication.k8s.io "" is invalid: '
        "spec.expirationSeconds: Invalid value: 300: may not specify a duration less than "
        "10 minutes",
        code=1,
    ),
    Step(
        (
            "drain",
            "{node}",
            "--dry-run=server",
            "--ignore-daemonsets",
            "--delete-emptydir-data",
            "--force",
        ),
        "node/NODE cordoned (server dry run)\nnode/NODE drained (server dry run)",
        reduce=_drain,
        per_node=True,
    ),
)


def run_step(step: Step, run: Run) -> tuple[int, str]:
    """Run one step: (exit code, what it printed, reduced) -- stdout, or stderr on failure."""
    args = step.args
    if step.per_node:
        code, node, err = run(("get", "nodes", "-o", "jsonpath={.items[0].metadata.name}"), None)
        assert code == 0, err
        args = tuple(a.replace("{node}", node.strip()) for a in args)
    code, out, err = run(args, step.stdin)
    return code, step.reduce(out if code == 0 else err)
