"""Answers to the review resources kubectl asks about (never stored).

localcluster authenticates but does not authorize (every authenticated user may
do everything), so ``kubectl auth can-i`` is always answered "yes" and
``kubectl auth whoami`` reports the token's user and groups. Request hooks can
still refuse requests (fault injection, audit tests).
"""

from __future__ import annotations

import copy
from typing import Any

from .hooks import RequestInfo

REVIEW_RESOURCES = frozenset(
    {
        ("authorization.k8s.io", "selfsubjectaccessreviews"),
        ("authorization.k8s.io", "selfsubjectrulesreviews"),
        ("authorization.k8s.io", "subjectaccessreviews"),
        ("authentication.k8s.io", "selfsubjectreviews"),
    }
)


def answer(info: RequestInfo, resource: str, body: dict[str, Any]) -> dict[str, Any]:
    """The review object with its ``status`` filled in."""
    out = copy.deepcopy(body)
    out.setdefault("metadata", {})
    if resource == "selfsubjectreviews":
        out["status"] = {"userInfo": {"username": info.user, "groups": list(info.groups)}}
    elif resource == "selfsubjectrulesreviews":
        out["status"] = {
            "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            "incomplete": False,
        }
    else:
        out["status"] = {
            "allowed": True,
            "reason": "localcluster does not enforce authorization",
        }
    return out
