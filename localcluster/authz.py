"""Role-based access control for localcluster, as kube-apiserver's RBAC authorizer.

Off by default (every authenticated user may do everything, which the tests of
other parts rely on); ``LocalCluster(authorization_mode="RBAC")`` (``nimctl
localcluster --authorization-mode RBAC``) or ``enable_rbac(cluster)`` on a
running cluster turns it on. It also decides the ``impersonate`` checks of
``impersonation.py``. From then on every request of a user outside ``system:masters`` (the
``admin`` user stays all-powerful) is checked against the stored Roles,
ClusterRoles, RoleBindings and ClusterRoleBindings:

* rules match on verbs, apiGroups, resources (``pods/log``, ``*/scale``, ``*``),
  resourceNames and, from ClusterRoleBindings only, nonResourceURLs
  (``/healthz``, ``/apis/*``); a RoleBinding grants only in its namespace;
* ClusterRoles with an ``aggregationRule`` hold the rules of every ClusterRole
  their selectors match (what kube-controller-manager's aggregation fills in);
* subjects are Users, Groups and ServiceAccounts
  (``system:serviceaccount:<namespace>:<name>``);
* the bootstrap policy every cluster has is built in: authenticated users may
  read discovery, ``/version`` and the health paths and create the self-review
  kinds (``kubectl auth can-i``, ``kubectl auth whoami``);
* a refused request gets 403 with kube-apiserver's message, e.g.
  ``pods is forbidden: User "u" cannot list resource "pods" in API group "" in
  the namespace "ns"``;
* SubjectAccessReview, SelfSubjectAccessReview and SelfSubjectRulesReview are
  answered from the same rules, so ``kubectl auth can-i`` tells the truth, and
  TokenReview from the cluster's tokens (what a metrics endpoint's
  authentication filter asks);
* privilege escalation is prevented as in Kubernetes: writing a Role or
  ClusterRole needs every permission it grants (or ``escalate``), writing a
  binding needs every permission of the role it references (or ``bind``).

The authorizer is a request hook (innermost, so the audit log records the 403)
plus an admission plugin (the escalation check sees the object as it will be
stored, after patches are applied).
"""

from __future__ import annotations

import dataclasses
import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from nimctl_runtime.labels import Selector, SelectorParseError
from nimctl_runtime.meta import Obj

from . import errors
from .codec import APPLY_PATCH, decode_body, json_response
from .errors import StatusError
from .hooks import AdmissionAttributes, Handler, RequestInfo

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API = f"{RBAC_GROUP}/v1"
MASTERS_GROUP = "system:masters"
AUTHENTICATED_GROUP = "system:authenticated"
UNAUTHENTICATED_GROUP = "system:unauthenticated"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
REVIEW_GROUP = "authorization.k8s.io"

# Kubernetes' bootstrap ClusterRoles system:discovery, system:basic-user and
# system:public-info-viewer, bound to every authenticated user.
PUBLIC_INFO_URLS = ("/healthz", "/livez", "/readyz", "/version", "/version/")
DISCOVERY_URLS = (*PUBLIC_INFO_URLS, "/api", "/api/*", "/apis", "/apis/*", "/openapi", "/openapi/*")
BOOTSTRAP_AUTHENTICATED_RULES: tuple[Obj, ...] = (
    {"verbs": ["get"], "nonResourceURLs": list(DISCOVERY_URLS)},
    {
        "verbs": ["create"],
        "apiGroups": [REVIEW_GROUP],
        "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
    },
    {
        "verbs": ["create"],
        "apiGroups": ["authentication.k8s.io"],
        "resources": ["selfsubjectreviews"],
    },
)
BOOTSTRAP_UNAUTHENTICATED_RULES: tuple[Obj, ...] = (
    {"verbs": ["get"], "nonResourceURLs": list(PUBLIC_INFO_URLS)},
)


def service_account_user(namespace: str, name: str) -> str:
    """The user name a ServiceAccount's token authenticates as."""
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def service_account_groups(user: str) -> tuple[str, ...]:
    """The groups kube-apiserver gives a ServiceAccount user (none for other users)."""
    if not user.startswith(SERVICE_ACCOUNT_PREFIX):
        return ()
    namespace = user[len(SERVICE_ACCOUNT_PREFIX) :].split(":", 1)[0]
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")


@dataclass(frozen=True)
class Attributes:
    """What the authorizer decides on (k8s.io/apiserver authorizer.Attributes)."""

    user: str
    groups: tuple[str, ...]
    verb: str
    api_group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""
    resource_request: bool = True

    @classmethod
    def from_request(cls, info: RequestInfo) -> Attributes:
        return cls(
            user=info.user,
            groups=tuple(info.groups),
            verb=info.verb,
            api_group=info.api_group,
            resource=info.resource,
            subresource=info.subresource,
            namespace=info.namespace,
            name=info.name,
            path=info.path,
            resource_request=info.is_resource_request,
        )


# -- rule matching (k8s.io/kubernetes/pkg/apis/rbac/v1/evaluation_helpers.go) -------------


def _matches(values: Iterable[str], requested: str) -> bool:
    return any(v in ("*", requested) for v in values)


def _resource_matches(rule: Mapping[str, Any], resource: str, subresource: str) -> bool:
    combined = f"{resource}/{subresource}" if subresource else resource
    for allowed in rule.get("resources") or ():
        if allowed in ("*", combined):
            return True
        if subresource and allowed == f"*/{subresource}":
            return True
    return False


def _url_matches(rule: Mapping[str, Any], path: str) -> bool:
    for allowed in rule.get("nonResourceURLs") or ():
        if allowed in ("*", path):
            return True
        if allowed.endswith("*") and path.startswith(allowed[:-1]):
            return True
    return False


def rule_allows(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    """Whether one PolicyRule grants the request."""
    if not _matches(rule.get("verbs") or (), attrs.verb):
        return False
    if not attrs.resource_request:
        return _url_matches(rule, attrs.path)
    if not _matches(rule.get("apiGroups") or (), attrs.api_group):
        return False
    if not _resource_matches(rule, attrs.resource, attrs.subresource):
        return False
    names = rule.get("resourceNames") or ()
    return not names or attrs.name in names


def _subject_matches(subject: Mapping[str, Any], user: str, groups: Sequence[str], ns: str) -> bool:
    kind = subject.get("kind")
    name = str(subject.get("name", ""))
    if kind == "User":
        return name == user
    if kind == "Group":
        return name in groups
    if kind == "ServiceAccount":
        sa_ns = str(subject.get("namespace") or ns)
        return user == service_account_user(sa_ns, name)
    return False


# -- the policy: the stored RBAC objects, read once per change -----------------------------


class Policy:
    """A snapshot of the cluster's RBAC objects with the lookups the authorizer needs."""

    def __init__(
        self,
        roles: Iterable[Obj],
        cluster_roles: Iterable[Obj],
        role_bindings: Iterable[Obj],
        cluster_role_bindings: Iterable[Obj],
    ) -> None:
        self.roles = {(_ns(r), _name(r)): r for r in roles}
        self.cluster_roles = {_name(r): r for r in cluster_roles}
        self.role_bindings = list(role_bindings)
        self.cluster_role_bindings = list(cluster_role_bindings)

    def cluster_role_rules(self, name: str) -> list[Obj] | None:
        """A ClusterRole's rules, aggregated ones included; ``None`` when it does not exist."""
        role = self.cluster_roles.get(name)
        if role is None:
            return None
        rules = list(role.get("rules") or [])
        aggregation = role.get("aggregationRule") or {}
        for term in aggregation.get("clusterRoleSelectors") or []:
            selector = _label_selector(term)
            if selector is None:
                continue
            for other_name, other in sorted(self.cluster_roles.items()):
                labels = (other.get("metadata") or {}).get("labels") or {}
                if other_name != name and selector.matches(labels):
                    rules.extend(other.get("rules") or [])
        return rules

    def role_ref_rules(self, role_ref: Mapping[str, Any], namespace: str) -> list[Obj] | None:
        """The rules a binding's roleRef names; ``None`` when that role does not exist."""
        kind = role_ref.get("kind")
        name = str(role_ref.get("name", ""))
        if kind == "ClusterRole":
            return self.cluster_role_rules(name)
        if kind == "Role" and namespace:
            role = self.roles.get((namespace, name))
            return list(role.get("rules") or []) if role is not None else None
        return None

    def rules_for(self, user: str, groups: Sequence[str], namespace: str) -> list[Obj]:
        """Every rule bound to the user: cluster-wide, plus *namespace*'s RoleBindings."""
        rules: list[Obj] = []
        if AUTHENTICATED_GROUP in groups:
            rules.extend(BOOTSTRAP_AUTHENTICATED_RULES)
        if UNAUTHENTICATED_GROUP in groups:
            rules.extend(BOOTSTRAP_UNAUTHENTICATED_RULES)
        for binding in self.cluster_role_bindings:
            if self._binds(binding, user, groups, ""):
                rules.extend(self.role_ref_rules(binding.get("roleRef") or {}, "") or [])
        if namespace:
            for binding in self.role_bindings:
                if _ns(binding) == namespace and self._binds(binding, user, groups, namespace):
                    refs = self.role_ref_rules(binding.get("roleRef") or {}, namespace) or []
                    # RoleBindings never grant non-resource URLs.
                    rules.extend(r for r in refs if not r.get("nonResourceURLs"))
        return rules

    @staticmethod
    def _binds(binding: Obj, user: str, groups: Sequence[str], namespace: str) -> bool:
        return any(
            _subject_matches(s, user, groups, namespace) for s in binding.get("subjects") or []
        )

    def allows(self, attrs: Attributes) -> bool:
        if MASTERS_GROUP in attrs.groups:
            return True
        namespace = attrs.namespace if attrs.resource_request else ""
        return any(
            rule_allows(rule, attrs) for rule in self.rules_for(attrs.user, attrs.groups, namespace)
        )


def _ns(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace", "") or "")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", "") or "")


def _label_selector(term: Mapping[str, Any]) -> Selector | None:
    parts = [f"{k}={v}" for k, v in sorted((term.get("matchLabels") or {}).items())]
    for expr in term.get("matchExpressions") or []:
        key, op = expr.get("key", ""), str(expr.get("operator", ""))
        values = ",".join(expr.get("values") or [])
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    try:
        return Selector.parse(",".join(parts))
    except SelectorParseError:
        return None


# -- messages ------------------------------------------------------------------------------


def forbidden_message(attrs: Attributes) -> str:
    """kube-apiserver's ``forbiddenMessage`` (endpoints/handlers/responsewriters)."""
    if not attrs.resource_request:
        return f'User "{attrs.user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    where = (
        f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    )
    return (
        f'User "{attrs.user}" cannot {attrs.verb} resource "{resource}" '
        f'in API group "{attrs.api_group}" {where}'
    )


def forbidden_error(attrs: Attributes) -> StatusError:
    """The 403 ``Status`` (apierrors.NewForbidden) for a refused request."""
    reason = forbidden_message(attrs)
    if not attrs.resource_request or not attrs.resource:
        return errors.forbidden(f"forbidden: {reason}")
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
    return errors.forbidden(
        f"{subject} is forbidden: {reason}", attrs.api_group, attrs.resource, attrs.name
    )


def _rule_text(rule: Mapping[str, Any]) -> str:
    """A PolicyRule as ``rbac.CompactString`` prints it in escalation errors."""
    parts = []
    for key, label in (
        ("apiGroups", "APIGroups"),
        ("resources", "Resources"),
        ("resourceNames", "ResourceNames"),
        ("nonResourceURLs", "NonResourceURLs"),
        ("verbs", "Verbs"),
    ):
        values = rule.get(key) or []
        resource_rule = not rule.get("nonResourceURLs")
        if values or (key in ("apiGroups", "resources", "verbs") and resource_rule):
            parts.append(f"{label}:[" + " ".join(json.dumps(v) for v in values) + "]")
    return "{" + ", ".join(parts) + "}"


# -- the authorizer ------------------------------------------------------------------------


class RBACAuthorizer:
    """Authorizes localcluster's requests against the stored RBAC objects."""

    def __init__(
        self,
        storage: Any,
        max_decisions: int = 200_000,
        user_for_token: Callable[[str], tuple[str, tuple[str, ...]] | None] | None = None,
    ) -> None:
        self.storage = storage
        self.user_for_token = user_for_token
        self._policy: Policy | None = None
        # Every decision about a user outside system:masters, in order: the audit
        # log's requests plus the checks no request shows (escalation checks).
        self._decisions: deque[tuple[Attributes, bool]] = deque(maxlen=max_decisions)
        self._unsubscribe = storage.subscribe(self._on_change)

    def close(self) -> None:
        self._unsubscribe()

    def _on_change(self, event: Any) -> None:
        if event.group == RBAC_GROUP:
            self._policy = None

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            self._policy = Policy(
                self.storage.list(RBAC_API, "Role"),
                self.storage.list(RBAC_API, "ClusterRole"),
                self.storage.list(RBAC_API, "RoleBinding"),
                self.storage.list(RBAC_API, "ClusterRoleBinding"),
            )
        return self._policy

    def authorize(self, attrs: Attributes) -> bool:
        allowed = self.policy.allows(attrs)
        if MASTERS_GROUP not in attrs.groups:
            self._decisions.append((attrs, allowed))
        return allowed

    def decisions(self, user: str | None = None) -> list[tuple[Attributes, bool]]:
        """The decisions made so far (for *user* only when given), oldest first."""
        return [d for d in self._decisions if user is None or d[0].user == user]

    def clear_decisions(self) -> None:
        self._decisions.clear()

    # ---------------------------------------------------------------- the request hook

    def _apply_creates(self, request: web.Request, info: RequestInfo) -> bool:
        if info.verb != "patch" or info.subresource or not info.is_resource_request:
            return False
        if request.headers.get("Content-Type", "").split(";", 1)[0].strip() != APPLY_PATCH:
            return False
        resource = self.storage.info_for(info.api_group, info.resource)
        if resource is None:
            return False
        return self.storage.get_entry(resource, info.namespace, info.name) is None

    async def hook(
        self, request: web.Request, info: RequestInfo, handler: Handler
    ) -> web.StreamResponse:
        """Refuse what the user may not do; answer the access reviews from the policy."""
        if request.path.startswith("/debug/"):
            return await handler(request)
        attrs = Attributes.from_request(info)
        if not self.authorize(attrs):
            raise forbidden_error(attrs)
        if self._apply_creates(request, info):
            # A server-side apply that creates the object is also authorized as create
            # (with its name), as kube-apiserver does.
            create = dataclasses.replace(attrs, verb="create")
            if not self.authorize(create):
                raise forbidden_error(create)
        if (
            info.is_resource_request
            and info.verb == "create"
            and info.api_group == REVIEW_GROUP
            and info.resource
            in ("selfsubjectaccessreviews", "subjectaccessreviews", "selfsubjectrulesreviews")
        ):
            body = decode_body(await request.read(), request.headers.get("Content-Type", ""))
            if not isinstance(body, dict):
                raise errors.bad_request(f"the body must be a {info.resource} object")
            return json_response(self.review(info, body), 201)
        if (
            info.is_resource_request
            and info.verb == "create"
            and info.api_group == "authentication.k8s.io"
            and info.resource == "tokenreviews"
            and self.user_for_token is not None
        ):
            body = decode_body(await request.read(), request.headers.get("Content-Type", ""))
            if not isinstance(body, dict):
                raise errors.bad_request("the body must be a TokenReview object")
            return json_response(self.token_review(body), 201)
        return await handler(request)

    def token_review(self, body: Obj) -> Obj:
        """A TokenReview answered from the tokens the cluster issued."""
        assert self.user_for_token is not None
        token = str((body.get("spec") or {}).get("token", ""))
        out = {**body, "apiVersion": "authentication.k8s.io/v1", "metadata": {}}
        found = self.user_for_token(token) if token else None
        if found is None:
            out["status"] = {"authenticated": False, "error": "invalid bearer token"}
        else:
            user, groups = found
            out["status"] = {
                "authenticated": True,
                "user": {"username": user, "groups": list(groups)},
            }
        return out

    # ---------------------------------------------------------------- access reviews

    def review(self, info: RequestInfo, body: Obj) -> Obj:
        """A SubjectAccessReview, SelfSubjectAccessReview or SelfSubjectRulesReview, answered."""
        out = dict(body)
        out.setdefault("apiVersion", f"{REVIEW_GROUP}/v1")
        out.setdefault("metadata", {})
        spec = body.get("spec") or {}
        if info.resource == "selfsubjectrulesreviews":
            namespace = str(spec.get("namespace", ""))
            out["status"] = self.rules_review(info.user, info.groups, namespace)
            return out
        if info.resource == "subjectaccessreviews":
            user = str(spec.get("user", ""))
            groups = tuple(spec.get("groups") or ())
            if not user and not groups:
                raise errors.invalid(
                    REVIEW_GROUP,
                    "SubjectAccessReview",
                    "",
                    [
                        {
                            "type": "FieldValueRequired",
                            "field": "spec.user",
                            "message": "at least one of user or group must be specified",
                        }
                    ],
                )
        else:
            user, groups = info.user, tuple(info.groups)
        resource_attrs = spec.get("resourceAttributes")
        non_resource = spec.get("nonResourceAttributes")
        if resource_attrs:
            attrs = Attributes(
                user=user,
                groups=groups,
                verb=str(resource_attrs.get("verb", "")),
                api_group=str(resource_attrs.get("group", "")),
                resource=str(resource_attrs.get("resource", "")),
                subresource=str(resource_attrs.get("subresource", "")),
                namespace=str(resource_attrs.get("namespace", "")),
                name=str(resource_attrs.get("name", "")),
            )
        elif non_resource:
            attrs = Attributes(
                user=user,
                groups=groups,
                verb=str(non_resource.get("verb", "")),
                path=str(non_resource.get("path", "")),
                resource_request=False,
            )
        else:
            raise errors.bad_request(
                "spec.resourceAttributes or spec.nonResourceAttributes must be set"
            )
        allowed = self.policy.allows(attrs)  # a question, not a decision to record
        # RBAC gives no reason for a denial (kubectl prints a bare "no").
        out["status"] = {"allowed": False}
        if allowed:
            out["status"] = {"allowed": True, "reason": "RBAC: allowed"}
        return out

    def rules_review(self, user: str, groups: Sequence[str], namespace: str) -> Obj:
        if MASTERS_GROUP in groups:
            return {
                "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                "incomplete": False,
            }
        resource_rules: list[Obj] = []
        non_resource_rules: list[Obj] = []
        for rule in self.policy.rules_for(user, groups, namespace):
            if rule.get("nonResourceURLs"):
                non_resource_rules.append(
                    {"verbs": list(rule["verbs"]), "nonResourceURLs": list(rule["nonResourceURLs"])}
                )
            else:
                kept = {
                    k: list(rule[k])
                    for k in ("verbs", "apiGroups", "resources", "resourceNames")
                    if rule.get(k)
                }
                resource_rules.append(kept)
        return {
            "resourceRules": resource_rules,
            "nonResourceRules": non_resource_rules,
            "incomplete": False,
        }

    # ---------------------------------------------------------------- escalation check

    async def mutate(
        self, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> tuple[Obj | None, list[str]]:
        return None, []

    async def validate(
        self, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> list[str]:
        """Refuse a Role/ClusterRole/binding that grants more than its writer holds."""
        if (
            attrs.group != RBAC_GROUP
            or obj is None
            or attrs.operation not in ("CREATE", "UPDATE")
            or MASTERS_GROUP in attrs.groups
        ):
            return []
        policy = self.policy
        namespace = attrs.namespace if attrs.resource in ("roles", "rolebindings") else ""
        if attrs.resource in ("roles", "clusterroles"):
            if self._may(attrs, "escalate", attrs.resource, namespace, ""):
                return []
            rules = list(obj.get("rules") or [])
        elif attrs.resource in ("rolebindings", "clusterrolebindings"):
            ref = obj.get("roleRef") or {}
            ref_resource = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            if self._may(attrs, "bind", ref_resource, namespace, str(ref.get("name", ""))):
                return []
            found = policy.role_ref_rules(ref, namespace)
            if found is None:
                ref_name = str(ref.get("name", ""))
                raise errors.not_found(RBAC_GROUP, ref_resource, ref_name)
            rules = found
        else:
            return []
        missing = [r for r in rules if not self._covered(attrs, r, namespace)]
        if not missing:
            return []
        groups = " ".join(json.dumps(g) for g in attrs.groups)
        detail = "\n".join(_rule_text(r) for r in missing)
        raise errors.forbidden(
            f'{attrs.resource}.{RBAC_GROUP} "{attrs.name}" is forbidden: user "{attrs.user}" '
            f"(groups=[{groups}]) is attempting to grant RBAC permissions not currently held:\n"
            f"{detail}",
            RBAC_GROUP,
            attrs.resource,
            attrs.name,
        )

    def _may(
        self, attrs: AdmissionAttributes, verb: str, resource: str, namespace: str, name: str
    ) -> bool:
        """The escalate/bind shortcut; a refusal is no denial (the rules are checked next)."""
        check = Attributes(
            user=attrs.user,
            groups=tuple(attrs.groups),
            verb=verb,
            api_group=RBAC_GROUP,
            resource=resource,
            namespace=namespace,
            name=name,
        )
        if not self.policy.allows(check):
            return False
        return self.authorize(check)

    def _covered(self, attrs: AdmissionAttributes, rule: Obj, namespace: str) -> bool:
        """Whether the writer holds every permission of *rule* (rbac validation.Covers)."""
        user, groups = attrs.user, tuple(attrs.groups)
        for verb in rule.get("verbs") or ():
            for url in rule.get("nonResourceURLs") or ():
                if not self.authorize(
                    Attributes(user, groups, verb, path=url, resource_request=False)
                ):
                    return False
            for group in rule.get("apiGroups") or ():
                for resource in rule.get("resources") or ():
                    base, _, sub = resource.partition("/")
                    for name in rule.get("resourceNames") or ("",):
                        check = Attributes(
                            user, groups, verb, group, base, sub, namespace, name
                        )
                        if not self.authorize(check):
                            return False
        return True


def enable_rbac(cluster: Any) -> RBACAuthorizer:
    """Enforce RBAC on a started LocalCluster (idempotent); returns its authorizer."""
    existing = getattr(cluster, "authorizer", None)
    if isinstance(existing, RBACAuthorizer):
        return existing
    authorizer = RBACAuthorizer(cluster.storage, user_for_token=cluster.user_for_token)
    cluster.request_hooks.append(authorizer.hook)
    cluster.admission_plugins.append(authorizer)
    cluster.authorizer = authorizer
    return authorizer
