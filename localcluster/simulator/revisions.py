"""ControllerRevisions for StatefulSets and DaemonSets.

Each distinct pod template gets a ``ControllerRevision`` named
``<owner>-<hash>`` holding the template (``data.spec.template`` with
``$patch: replace``, as the Kubernetes controllers store it) and an increasing
``revision``; pods carry the hash in the ``controller-revision-hash`` label.
"""

from __future__ import annotations

import copy

from localcluster.simulator.objects import (
    Action,
    Context,
    Create,
    Delete,
    Update,
    labels_of,
    name_of,
    namespace_of,
    owner_reference,
    owner_template_hash,
)
from nimctl_runtime.meta import Obj

REVISION_HASH = "controller-revision-hash"


def revision_hash(owner: Obj) -> str:
    """The hash that names the revision of *owner*'s current pod template."""
    collision = int((owner.get("status") or {}).get("collisionCount") or 0)
    return owner_template_hash(owner, collision)


def revision_name(owner: Obj) -> str:
    return f"{name_of(owner)}-{revision_hash(owner)}"


def sync_revisions(owner: Obj, ctx: Context) -> tuple[list[Action], str, str]:
    """Make sure the current revision exists; return (actions, update revision name, hash).

    Revisions beyond ``revisionHistoryLimit`` (default 10) that no pod uses are deleted.
    """
    actions: list[Action] = []
    revisions = sorted(
        ctx.view.owned(owner, "ControllerRevision"), key=lambda r: r.get("revision", 0)
    )
    h = revision_hash(owner)
    name = f"{name_of(owner)}-{h}"
    top = max([int(r.get("revision", 0)) for r in revisions] or [0])
    current = next((r for r in revisions if name_of(r) == name), None)
    if current is None:
        template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
        template["$patch"] = "replace"
        labels = dict(((owner.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
        labels[REVISION_HASH] = h
        actions.append(
            Create(
                {
                    "apiVersion": "apps/v1",
                    "kind": "ControllerRevision",
                    "metadata": {
                        "name": name,
                        "namespace": namespace_of(owner),
                        "labels": labels,
                        "ownerReferences": [owner_reference(owner)],
                    },
                    "data": {"spec": {"template": template}},
                    "revision": top + 1,
                }
            )
        )
    elif int(current.get("revision", 0)) < top:
        bumped = copy.deepcopy(current)
        bumped["revision"] = top + 1
        actions.append(Update(bumped))
    limit = int((owner.get("spec") or {}).get("revisionHistoryLimit", 10))
    in_use = {labels_of(p).get(REVISION_HASH) for p in ctx.view.owned(owner, "Pod")}
    old = [
        r
        for r in revisions
        if name_of(r) != name
        and labels_of(r).get(REVISION_HASH) not in in_use
        and name_of(r) not in in_use
    ]
    for r in old[: max(0, len(old) - limit)]:
        actions.append(Delete("apps/v1", "ControllerRevision", namespace_of(r), name_of(r)))
    return actions, name, h
