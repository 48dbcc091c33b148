"""Answers to the review resources kubectl asks about (never stored).

Without RBAC (``--authorization-mode AlwaysAllow``, the default) every
authenticated user may do everything, so ``kubectl auth can-i`` is always
answered "yes" (with RBAC, ``authz.py`` answers the access reviews) and
``kubectl auth whoami`` reports the user the request is served as: the
token's, or the impersonated one with its uid and extra. Request hooks can
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
        user_info: dict[str, Any] = {"username": info.user}
        if info.uid:
            user_info["uid"] = info.uid
        user_info["groups"] = list(info.groups)
        if info.extra:
            user_info["extra"] = {key: list(values) for key, values in info.extra}
        out["status"] = {"userInfo": user_info}
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
