"""Benchmark: a driver upgrade of N simulated GPU nodes, driven by the pure upgrade plan.

Run: ``.venv/bin/python -m tests.bench.upgrade_bench [--nodes 100] [--parallel 10]
[--max-unavailable 25%] [--driver-seconds 60]``

The cluster is a discrete-event model on a simulated clock, so 100 nodes take
seconds of wall time: every node runs a driver pod and a validator pod, two
GPU pods with an ``emptyDir`` (so ``podDeletion`` refuses them and the node is
drained, as in NVIDIA's flow) and two CPU pods, all four behind one
PodDisruptionBudget (``--pdb-percent`` of them may be down, default 10; an evicted pod is gone 5 s
later and its replacement Ready 10 s after that).
A deleted driver pod is recreated 1 s later and is Ready ``--driver-seconds``
after. The controller runs a pass whenever something it watches changed (a
node label, a pod's readiness), when the plan asks to be requeued, and at
least every 2 minutes, as the real controller does.

Printed figures: the total simulated time of the rollout, the plan passes,
API writes per node (node merge patches, pod deletions, evictions, refused
evictions), the peak number of cordoned nodes and of nodes in progress, and
wall time per pass.
"""

from __future__ import annotations

import argparse
import heapq
import itertools
import time
from collections import Counter
from dataclasses import dataclass, field

from controllers.gpu.upgrade import consts as c
from controllers.gpu.upgrade.plan import Plan, plan
from controllers.gpu.upgrade.policy import UpgradePolicy
from nimctl_runtime.meta import Obj

NS = "gpu-operator"
DS_UID = "driver-ds"


def _pod(name: str, node: str, ns: str, labels: dict[str, str], *, owner: str = "ReplicaSet",
         gpu: bool = False, ready: bool = True) -> Obj:  # fmt: skip
    container: Obj = {"name": "main"}
    spec: Obj = {"nodeName": node, "containers": [container]}
    if gpu:
        container["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        spec["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "uid": f"{ns}/{name}",
                     "ownerReferences": [{"kind": owner, "name": owner.lower(),
                                          "uid": DS_UID if owner == "DaemonSet" else "rs",
                                          "controller": True}]},
        "spec": spec,
        "status": {"phase": "Running",
                   "containerStatuses": [{"name": "main", "ready": ready, "restartCount": 0}],
                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }  # fmt: skip


@dataclass
class World:
    """The simulated cluster (see the module docstring)."""

    nodes: dict[str, Obj]
    pods: dict[str, Obj]
    revision: str = "r1"
    now: float = 0.0
    timers: list[tuple[float, int, str, str]] = field(default_factory=list)
    seq: itertools.count[int] = field(default_factory=itertools.count)
    driver_seconds: float = 60.0
    pdb_allowed: int = 0
    changed: bool = False

    def at(self, delay: float, what: str, key: str) -> None:
        heapq.heappush(self.timers, (self.now + delay, next(self.seq), what, key))

    def daemonset(self) -> Obj:
        return {"apiVersion": "apps/v1", "kind": "DaemonSet",
                "metadata": {"name": "nvidia-driver-daemonset", "namespace": NS, "uid": DS_UID},
                "spec": {"template": {"spec": {"containers": [{"name": "nvidia-driver-ctr"}]}}}}  # fmt: skip

    def revisions(self) -> list[Obj]:
        return [{"apiVersion": "apps/v1", "kind": "ControllerRevision", "revision": i,
                 "metadata": {"name": f"nvidia-driver-daemonset-{r}", "namespace": NS,
                              "ownerReferences": [{"uid": DS_UID, "controller": True}]}}
                for i, r in enumerate(sorted({"r1", self.revision}), start=1)]  # fmt: skip

    def driver(self, node: str, revision: str, ready: bool) -> None:
        pod = _pod(f"driver-{node}", node, NS, {"app": "nvidia-driver-daemonset",
                   c.REVISION_HASH_LABEL: revision}, owner="DaemonSet", ready=ready)  # fmt: skip
        self.pods[f"{NS}/driver-{node}"] = pod

    def pdb(self) -> Obj:
        return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"selector": {"matchLabels": {"pdb": "work"}}},
                "status": {"disruptionsAllowed": self.pdb_allowed}}  # fmt: skip


def build(n: int, driver_seconds: float, pdb_percent: int) -> World:
    world = World(nodes={}, pods={}, driver_seconds=driver_seconds)
    for i in range(n):
        name = f"gpu-node-{i:03d}"
        world.nodes[name] = {"apiVersion": "v1", "kind": "Node",
                             "metadata": {"name": name, "labels": {c.STATE_LABEL: c.DONE},
                                          "annotations": {}},
                             "spec": {}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}  # fmt: skip
        world.driver(name, "r1", True)
        world.pods[f"{NS}/validator-{name}"] = _pod(
            f"validator-{name}", name, NS, {"app": "nvidia-operator-validator"}, owner="DaemonSet"
        )
        for k in range(2):
            world.pods[f"default/train-{i}-{k}"] = _pod(f"train-{i}-{k}", name, "default",
                                                        {"pdb": "work"}, gpu=True)  # fmt: skip
            world.pods[f"default/web-{i}-{k}"] = _pod(
                f"web-{i}-{k}", name, "default", {"pdb": "work"}
            )
    world.pdb_allowed = max(1, (4 * n * pdb_percent) // 100)
    return world


def apply(world: World, decided: Plan, writes: Counter[str]) -> None:
    for node, patch in decided.patches.items():
        meta = world.nodes[node]["metadata"]
        for key, value in patch.labels.items():
            if value is None:
                meta["labels"].pop(key, None)
            else:
                meta["labels"][key] = value
        for key, value in patch.annotations.items():
            if value is None:
                meta["annotations"].pop(key, None)
            else:
                meta["annotations"][key] = value
        if patch.unschedulable is not None:
            world.nodes[node]["spec"]["unschedulable"] = patch.unschedulable
        writes[node] += 1
        writes["patch"] += 1
        world.changed = True
    for action in decided.pod_actions:
        key = f"{action.namespace}/{action.name}"
        pod = world.pods.get(key)
        writes[action.node] += 1
        writes[action.verb] += 1
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            continue
        if action.verb == "evict":
            if world.pdb_allowed <= 0:
                writes["refused"] += 1
                continue
            world.pdb_allowed -= 1
        pod["metadata"]["deletionTimestamp"] = "now"
        world.at(5.0 if action.namespace != NS else 0.5, "gone", key)


def fire(world: World, what: str, key: str) -> None:
    world.changed = True
    if what == "gone":
        pod = world.pods.pop(key)
        node = pod["spec"]["nodeName"]
        if key.startswith(f"{NS}/driver-"):
            world.at(1.0, "driver", node)
        elif pod["metadata"]["labels"].get("pdb") == "work":
            world.at(10.0, "web-ready", key)
    elif what == "driver":
        world.driver(key, world.revision, False)
        world.at(world.driver_seconds, "driver-ready", key)
    elif what == "driver-ready":
        world.driver(key, world.revision, True)
    elif what == "web-ready":
        world.pdb_allowed += 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--parallel", type=int, default=10)
    parser.add_argument("--max-unavailable", default="25%")
    parser.add_argument("--driver-seconds", type=float, default=60.0)
    parser.add_argument("--pdb-percent", type=int, default=10,
                        help="share of the workload pods that may be down at once")  # fmt: skip
    args = parser.parse_args()
    world = build(args.nodes, args.driver_seconds, args.pdb_percent)
    policy = UpgradePolicy(max_parallel_upgrades=args.parallel,
                           max_unavailable=args.max_unavailable,
                           drain_enabled=True, drain_timeout=0,
                           drain_delete_empty_dir=True)  # fmt: skip
    world.revision = "r2"
    writes: Counter[str] = Counter()
    passes = peak_cordoned = peak_in_progress = 0
    wall = 0.0
    next_tick = world.now
    while True:
        started = time.perf_counter()
        decided = plan(world.nodes.values(), world.pods.values(), [world.daemonset()], policy,
                       world.now, revisions=world.revisions(), pdbs=[world.pdb()])  # fmt: skip
        wall += time.perf_counter() - started
        passes += 1
        world.changed = False
        apply(world, decided, writes)
        cordoned = sum(1 for n in world.nodes.values() if n["spec"].get("unschedulable"))
        peak_cordoned = max(peak_cordoned, cordoned)
        peak_in_progress = max(peak_in_progress, decided.counts.in_progress)
        states = [n["metadata"]["labels"].get(c.STATE_LABEL) for n in world.nodes.values()]
        if all(s == c.DONE for s in states) and not world.timers and passes > 1:
            break
        if world.changed:
            world.now += 0.05  # the watch event of our own write
            continue
        next_tick = world.now + min(c.REQUEUE_SECONDS, decided.requeue_after or c.REQUEUE_SECONDS)
        if world.timers and world.timers[0][0] <= next_tick:
            moment = world.timers[0][0]
            while world.timers and world.timers[0][0] <= moment:
                _, _, what, key = heapq.heappop(world.timers)
                world.now = moment
                fire(world, what, key)
        else:
            world.now = next_tick
    per_node = [writes[n] for n in world.nodes]
    print(f"nodes {args.nodes}, maxParallelUpgrades {args.parallel}, "
          f"maxUnavailable {args.max_unavailable}, driver reload {args.driver_seconds:.0f} s, "
          f"PDB {args.pdb_percent}%")  # fmt: skip
    print(f"  total simulated time   {world.now:8.0f} s ({world.now / 60:.1f} min)")
    print(f"  plan passes            {passes:8d} ({wall / passes * 1000:.2f} ms wall each)")
    print(f"  writes per node        {sum(per_node) / len(per_node):8.1f} "
          f"(min {min(per_node)}, max {max(per_node)})")  # fmt: skip
    n = len(per_node)
    print(f"    node patches {writes['patch'] / n:.1f}, pod deletions {writes['delete'] / n:.1f}, "
          f"evictions {writes['evict'] / n:.1f} (refused by the PDB: {writes['refused']})")  # fmt: skip
    print(f"  peak cordoned nodes    {peak_cordoned:8d}")
    print(f"  peak nodes in progress {peak_in_progress:8d}")


if __name__ == "__main__":
    main()
