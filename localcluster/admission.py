"""Admission for localcluster: kube-apiserver's built-in defaulting plugins and the
dynamic admission webhooks (Mutating/ValidatingWebhookConfiguration).

``BuiltinAdmission`` plays the API server parts that assign values on write:
Service ``clusterIP`` (from 10.96.0.0/12) and ``nodePort`` (30000-32767)
allocation, kept across updates that omit them; the DefaultStorageClass
plugin for PVCs; a Job's labels copied from its pod template.

``WebhookAdmission`` calls webhooks as kube-apiserver does: it matches
``rules`` (operations, apiGroups, apiVersions, resources including
subresources, scope) under ``matchPolicy``, ``namespaceSelector`` and
``objectSelector``; sends an ``admission.k8s.io/v1`` AdmissionReview over HTTPS
to ``clientConfig.url`` or to a Service (resolved through its Endpoints /
EndpointSlices, or a loopback address registered in process) verifying the
``caBundle``; applies JSONPatch responses from mutating webhooks in order;
re-invokes ``reinvocationPolicy: IfNeeded`` webhooks once when a later one
changed the object; runs validating webhooks in parallel; returns ``warnings``; turns a denial into
the client's error (``admission webhook "<name>" denied the request: ...``);
and honours ``failurePolicy``, ``timeoutSeconds`` and ``sideEffects`` on dry
runs.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import copy
import ipaddress
import json
import ssl
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import jsonpatch
from aiohttp import web

from localcluster.codec import add_warnings, status_response
from localcluster.errors import StatusError
from localcluster.hooks import AdmissionAttributes, Handler, RequestInfo
from nimctl_runtime.labels import Selector
from nimctl_runtime.logsetup import get_logger
from nimctl_runtime.meta import Obj

CLUSTER_IP_NETWORK = ipaddress.ip_network("10.96.0.0/12")
KUBERNETES_SERVICE_IP = "10.96.0.1"
NODE_PORT_RANGE = range(30000, 32768)
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"

_REASONS = {400: "BadRequest", 403: "Forbidden", 404: "NotFound", 409: "Conflict", 422: "Invalid"}

# Webhook warnings of the request being served: kept so that a request that is
# finally refused still sends them (kube-apiserver does; kubectl prints them).
_REQUEST_WARNINGS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar(
    "localcluster_webhook_warnings", default=None
)


def _record_warnings(warnings: list[str]) -> None:
    collected = _REQUEST_WARNINGS.get()
    if collected is not None:
        collected.extend(warnings)


async def warnings_hook(
    request: web.Request, info: RequestInfo, handler: Handler
) -> web.StreamResponse:
    """Request hook: a refused request still carries the webhooks' ``Warning`` headers."""
    del info
    token = _REQUEST_WARNINGS.set([])
    try:
        return await handler(request)
    except StatusError as err:
        collected = _REQUEST_WARNINGS.get() or []
        if not collected:
            raise
        response = status_response(err)
        add_warnings(response, collected)
        return response
    finally:
        _REQUEST_WARNINGS.reset(token)


# --------------------------------------------------------------------------- built-ins


class BuiltinAdmission:
    """Allocation and defaulting the real API server does on write (no webhooks involved)."""

    # What it writes are declared fields of the right Go types (kube-apiserver's
    # plugins change typed objects): a mutated object needs no second decode
    # (type check and pruning), unlike a webhook's JSON patch.
    typed_mutations = True

    def __init__(self, storage: Any, *, pvc_protection: bool = True) -> None:
        self.storage = storage
        self.pvc_protection = pvc_protection
        self._allocations: ServiceAllocations | None = None

    async def mutate(
        self, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> tuple[Obj | None, list[str]]:
        if obj is None or attrs.subresource or attrs.group not in ("", "batch"):
            return None, []
        if attrs.resource == "services" and not attrs.group:
            return self._service(obj, old), []
        if attrs.resource == "persistentvolumeclaims" and attrs.operation == "CREATE":
            return self._pvc(obj), []
        if attrs.resource == "jobs" and attrs.group == "batch" and attrs.operation == "CREATE":
            return self._job(obj), []
        return None, []

    async def validate(
        self, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> list[str]:
        return []

    def _used(self) -> ServiceAllocations:
        """The cluster IPs and node ports the stored Services hold (kept current by events)."""
        if self._allocations is None:
            self._allocations = ServiceAllocations(self.storage)
        return self._allocations

    def _service(self, obj: Obj, old: Obj | None) -> Obj:
        # A new object, the input left as it was: only spec and its ports change, so
        # only they are copied (a deepcopy of the whole Service was most of this step).
        obj = dict(obj)
        spec = obj["spec"] = dict(obj.get("spec") or {})
        if isinstance(spec.get("ports"), list):
            spec["ports"] = [dict(p) if isinstance(p, dict) else p for p in spec["ports"]]
        old_spec = (old or {}).get("spec") or {}
        svc_type = spec.setdefault("type", "ClusterIP")
        if svc_type == "ExternalName":
            return obj
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
        allocations = self._used()
        used_ports = allocations.ports
        if not spec.get("clusterIP"):
            if old_spec.get("clusterIP"):
                spec["clusterIP"] = old_spec["clusterIP"]
            else:
                spec["clusterIP"] = allocations.free_ip()
        if spec["clusterIP"] != "None":
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        if svc_type in ("NodePort", "LoadBalancer"):
            spec.setdefault("externalTrafficPolicy", "Cluster")
            if svc_type == "LoadBalancer":
                spec.setdefault("allocateLoadBalancerNodePorts", True)
            old_ports = {
                (p.get("port"), p.get("protocol", "TCP")): p.get("nodePort")
                for p in old_spec.get("ports") or []
            }
            taken: set[int] = set()
            for port in spec.get("ports") or []:
                if port.get("nodePort"):
                    continue
                previous = old_ports.get((port.get("port"), port.get("protocol", "TCP")))
                if previous:
                    port["nodePort"] = previous
                    continue
                free = next(p for p in NODE_PORT_RANGE if p not in used_ports and p not in taken)
                taken.add(free)
                port["nodePort"] = free
        return obj

    def _pvc(self, obj: Obj) -> Obj | None:
        # StorageObjectInUseProtection: a claim is not deleted while a pod uses it.
        finalizers = (obj.get("metadata") or {}).get("finalizers") or []
        if self.pvc_protection and "kubernetes.io/pvc-protection" not in finalizers:
            obj = copy.deepcopy(obj)
            obj.setdefault("metadata", {})["finalizers"] = [
                *finalizers,
                "kubernetes.io/pvc-protection",
            ]
        spec = obj.get("spec") or {}
        if "storageClassName" in spec or spec.get("volumeName"):
            return obj
        for sc in sorted(
            self.storage.list("storage.k8s.io/v1", "StorageClass"),
            key=lambda s: str((s.get("metadata") or {}).get("name", "")),
        ):
            annotations = (sc.get("metadata") or {}).get("annotations") or {}
            if annotations.get(DEFAULT_CLASS_ANNOTATION) == "true":
                obj = copy.deepcopy(obj)
                obj.setdefault("spec", {})["storageClassName"] = sc["metadata"]["name"]
                return obj
        return obj

    def _job(self, obj: Obj) -> Obj | None:
        meta = obj.get("metadata") or {}
        template_labels = (
            ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {}
        ).get("labels")
        if meta.get("labels") or not template_labels:
            return None
        obj = copy.deepcopy(obj)
        obj["metadata"]["labels"] = dict(template_labels)
        return obj


_FIRST_IP_OFFSET = 10  # addresses are handed out from the 11th of the network (predictable)
_IP_BASE = int(CLUSTER_IP_NETWORK.network_address)
_IP_END = CLUSTER_IP_NETWORK.num_addresses - 1  # the broadcast address is never handed out


def _ip_text(offset: int) -> str:
    n = _IP_BASE + offset
    return f"{n >> 24}.{(n >> 16) & 255}.{(n >> 8) & 255}.{n & 255}"


def _ip_offset(ip: str) -> int | None:
    """The offset of a dotted IPv4 address in the Service network, None when outside it."""
    parts = ip.split(".")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return None
    n = (int(parts[0]) << 24) | (int(parts[1]) << 16) | (int(parts[2]) << 8) | int(parts[3])
    offset = n - _IP_BASE
    return offset if 0 <= offset < _IP_END else None


class ServiceAllocations:
    """The cluster IPs and node ports held by stored Services, as kube-apiserver's allocators
    keep them: read once from storage, then kept current from its committed changes, so
    admitting a Service costs O(1) in the number of Services instead of a list of them all.

    Both are multisets (a count per value): two Services may name the same address
    (localcluster does not refuse it), and the value stays used until both are gone.
    """

    def __init__(self, storage: Any) -> None:
        self.ips: dict[str, int] = {}
        self.ports: dict[int, int] = {}
        # every address of the network from its 11th up to this offset is held, so the
        # lowest free one is found from here (a released address moves it back)
        self._low = _FIRST_IP_OFFSET
        # addresses looked at by free_ip (a counting test reads it)
        self.probes = 0
        self._held: dict[tuple[str, str], tuple[tuple[str, ...], tuple[int, ...]]] = {}
        # services decoded to keep the allocations (a counting test reads it)
        self.decoded = 0
        storage.subscribe(self._on_event)
        for svc in storage.list("v1", "Service"):
            self._set(_key_of(svc), svc)

    def _on_event(self, event: Any) -> None:
        if event.resource != "services" or event.group:
            return
        key = (event.namespace, event.name)
        if event.type == "DELETED":
            self._set(key, None)
        else:
            self.decoded += 1
            self._set(key, event.object)

    def _set(self, key: tuple[str, str], svc: Obj | None) -> None:
        old_ips, old_ports = self._held.pop(key, ((), ()))
        for ip in old_ips:
            _count(self.ips, ip, -1)
            if ip not in self.ips:
                offset = _ip_offset(ip)
                if offset is not None and offset < self._low:
                    self._low = max(offset, _FIRST_IP_OFFSET)
        for port in old_ports:
            _count(self.ports, port, -1)
        if svc is None:
            return
        spec = svc.get("spec") or {}
        ips = tuple(str(ip) for ip in spec.get("clusterIPs") or [spec.get("clusterIP")] if ip)
        ports = tuple(
            int(port["nodePort"]) for port in spec.get("ports") or [] if port.get("nodePort")
        )
        for ip in ips:
            _count(self.ips, ip, 1)
        for port in ports:
            _count(self.ports, port, 1)
        if ips or ports:
            self._held[key] = (ips, ports)

    def free_ip(self) -> str:
        """The lowest free address of the Service network from its 11th, as before:
        predictable. Amortised O(1): the search starts above the addresses all held."""
        for offset in range(self._low, _IP_END):
            self.probes += 1
            candidate = _ip_text(offset)
            if candidate not in self.ips:
                # not held until the Service is stored: the next search starts here again
                self._low = offset
                return candidate
        raise StatusError(
            500,
            "InternalError",
            "Internal error occurred: failed to allocate a serviceIP: range is full",
        )


def _count(counts: dict[Any, int], value: Any, delta: int) -> None:
    n = counts.get(value, 0) + delta
    if n > 0:
        counts[value] = n
    else:
        counts.pop(value, None)


def _key_of(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace", "") or ""), str(meta.get("name", ""))


def kubernetes_service() -> Obj:
    """The ``default/kubernetes`` Service every cluster has."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"component": "apiserver", "provider": "kubernetes"},
        },
        "spec": {
            "type": "ClusterIP",
            "clusterIP": KUBERNETES_SERVICE_IP,
            "clusterIPs": [KUBERNETES_SERVICE_IP],
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "sessionAffinity": "None",
            "internalTrafficPolicy": "Cluster",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}],
        },
    }


# --------------------------------------------------------------------------- webhooks


@dataclass(frozen=True)
class WebhookCall:
    """One webhook invocation (kept for tests and debugging)."""

    configuration: str
    webhook: str
    operation: str
    resource: str
    namespace: str
    name: str
    outcome: str


class WebhookError(Exception):
    """A webhook could not be called or answered nonsense (subject to failurePolicy)."""


def _rule_matches(rule: Mapping[str, Any], attrs: AdmissionAttributes, *, exact: bool) -> bool:
    operations = rule.get("operations") or []
    if "*" not in operations and attrs.operation not in operations:
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.group not in groups:
        return False
    versions = rule.get("apiVersions") or []
    if exact and "*" not in versions and attrs.version not in versions:
        return False
    scope = rule.get("scope") or "*"
    if scope == "Cluster" and attrs.namespace and attrs.resource != "namespaces":
        return False
    if scope == "Namespaced" and (not attrs.namespace or attrs.resource == "namespaces"):
        return False
    for pattern in rule.get("resources") or []:
        res, _, sub = pattern.partition("/")
        if res not in ("*", attrs.resource):
            continue
        if not sub and not attrs.subresource:
            return True
        if sub == "*" or (sub and sub == attrs.subresource):
            return True
    return False


def webhook_matches_rules(webhook: Mapping[str, Any], attrs: AdmissionAttributes) -> bool:
    """Rules under matchPolicy (Equivalent, the default, also matches other versions)."""
    rules = webhook.get("rules") or []
    if any(_rule_matches(r, attrs, exact=True) for r in rules):
        return True
    if (webhook.get("matchPolicy") or "Equivalent") == "Equivalent":
        return any(_rule_matches(r, attrs, exact=False) for r in rules)
    return False


_WEBHOOK_RESOURCES = {
    "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
    "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
}


class WebhookAdmission:
    """Calls the cluster's admission webhooks for every write."""

    def __init__(self, storage: Any, *, default_timeout: float = 10.0) -> None:
        self.storage = storage
        self.default_timeout = default_timeout
        self.service_endpoints: dict[tuple[str, str], tuple[str, int]] = {}
        self.calls: list[WebhookCall] = []
        self._session: aiohttp.ClientSession | None = None
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._log = get_logger("localcluster.admission")

    def register_service(self, namespace: str, name: str, host: str, port: int) -> None:
        """Route webhook calls for Service *namespace/name* to *host:port* (a local process)."""
        self.service_endpoints[(namespace, name)] = (host, port)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # ------------------------------------------------------------------ plugin API

    async def mutate(
        self, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> tuple[Obj | None, list[str]]:
        if self._skip(attrs):
            return None, []
        warnings: list[str] = []
        current = obj
        version = 0  # bumped on every change; decides reinvocation
        seen_at: dict[tuple[str, str], int] = {}
        webhooks = self._webhooks("MutatingWebhookConfiguration")
        for round_ in range(2):
            for config, webhook in webhooks:
                key = (str(config["metadata"].get("name", "")), str(webhook.get("name", "")))
                if round_ == 1:
                    # reinvocationPolicy IfNeeded: called again once when a later webhook
                    # changed the object after it last ran.
                    if webhook.get("reinvocationPolicy") != "IfNeeded":
                        continue
                    if key not in seen_at or seen_at[key] >= version:
                        continue
                if not self._matches(webhook, attrs, current, old):
                    continue
                response = await self._invoke(config, webhook, attrs, current, old)
                seen_at[key] = version
                if response is None:
                    continue
                new_warnings = [str(w) for w in response.get("warnings") or []]
                warnings.extend(new_warnings)
                _record_warnings(new_warnings)
                self._check_denied(webhook, response)
                patched = self._apply_patch(webhook, response, current)
                if patched is not None and patched != current:
                    current = patched
                    version += 1
                    seen_at[key] = version
            if not version:
                break
        return (current if version else None), warnings

    def _apply_patch(self, webhook: Obj, response: Obj, current: Obj | None) -> Obj | None:
        patch = response.get("patch")
        if not patch or current is None:
            return None
        if response.get("patchType", "JSONPatch") != "JSONPatch":
            raise self._failure(webhook, f"unsupported patch type {response.get('patchType')!r}")
        try:
            operations = json.loads(base64.b64decode(patch))
            patched: Obj = jsonpatch.apply_patch(current, operations, in_place=False)
        except Exception as exc:
            raise StatusError(
                500,
                "InternalError",
                f'Internal error occurred: JSON patch from webhook "{webhook.get("name")}" '
                f"could not be applied: {exc}",
            ) from exc
        return patched

    async def validate(
        self, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> list[str]:
        if self._skip(attrs):
            return []
        selected = [
            (config, webhook)
            for config, webhook in self._webhooks("ValidatingWebhookConfiguration")
            if self._matches(webhook, attrs, obj, old)
        ]
        if not selected:
            return []
        responses = await asyncio.gather(
            *(self._invoke(c, w, attrs, obj, old) for c, w in selected), return_exceptions=True
        )
        warnings: list[str] = []
        denial: StatusError | None = None
        for (_, webhook), response in zip(selected, responses, strict=True):
            if isinstance(response, BaseException):
                if denial is None and isinstance(response, StatusError):
                    denial = response
                elif not isinstance(response, StatusError):
                    raise response
                continue
            if response is None:
                continue
            warnings.extend(str(w) for w in response.get("warnings") or [])
            _record_warnings([str(w) for w in response.get("warnings") or []])
            try:
                self._check_denied(webhook, response)
            except StatusError as err:
                denial = denial or err
        if denial is not None:
            raise denial
        return warnings

    # ------------------------------------------------------------------ matching

    @staticmethod
    def _skip(attrs: AdmissionAttributes) -> bool:
        # kube-apiserver never sends webhook configurations to webhooks (no deadlock).
        return attrs.group == "admissionregistration.k8s.io" or attrs.operation == "CONNECT"

    def _webhooks(self, kind: str) -> list[tuple[Obj, Obj]]:
        # Two lookups on every write: with no configuration of *kind* stored (the
        # common case) that is one dict look, not a list, decode and sort.
        objects = getattr(self.storage, "objects", None)
        if objects is not None and not objects.bucket(
            ("admissionregistration.k8s.io", _WEBHOOK_RESOURCES[kind])
        ):
            return []
        try:
            configs = self.storage.list("admissionregistration.k8s.io/v1", kind)
        except StatusError:
            return []
        out = []
        for config in sorted(configs, key=lambda c: str(c["metadata"].get("name", ""))):
            for webhook in config.get("webhooks") or []:
                out.append((config, webhook))
        return out

    def _namespace_labels(
        self, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> dict[str, str] | None:
        if attrs.resource == "namespaces" and not attrs.group:
            source = obj or old or {}
            return dict((source.get("metadata") or {}).get("labels") or {})
        if not attrs.namespace:
            return None
        try:
            ns = self.storage.get("v1", "Namespace", attrs.namespace)
        except StatusError:
            return {}
        return dict((ns.get("metadata") or {}).get("labels") or {})

    def _matches(
        self, webhook: Obj, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None
    ) -> bool:
        if not webhook_matches_rules(webhook, attrs):
            return False
        ns_selector = webhook.get("namespaceSelector")
        if ns_selector:
            labels = self._namespace_labels(attrs, obj, old)
            if labels is not None and not Selector.from_label_selector(ns_selector).matches(labels):
                return False
        obj_selector = webhook.get("objectSelector")
        if obj_selector:
            sel = Selector.from_label_selector(obj_selector)
            candidates = [o for o in (obj, old) if o is not None]
            if not any(
                sel.matches((o.get("metadata") or {}).get("labels") or {}) for o in candidates
            ):
                return False
        return True

    # ------------------------------------------------------------------ calling

    def _review(self, attrs: AdmissionAttributes, obj: Obj | None, old: Obj | None) -> Obj:
        option_kind = {
            "CREATE": "CreateOptions",
            "UPDATE": "UpdateOptions",
            "DELETE": "DeleteOptions",
        }
        options = dict(attrs.options) if attrs.options else {}
        if attrs.operation in option_kind:
            options.setdefault("apiVersion", "meta.k8s.io/v1")
            options.setdefault("kind", option_kind[attrs.operation])
        kind = {"group": attrs.group, "version": attrs.version, "kind": attrs.kind}
        resource = {"group": attrs.group, "version": attrs.version, "resource": attrs.resource}
        request: Obj = {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "name": attrs.name,
            "namespace": attrs.namespace,
            "operation": attrs.operation,
            "userInfo": {"username": attrs.user, "groups": list(attrs.groups)},
            "object": obj,
            "oldObject": old,
            "dryRun": attrs.dry_run,
            "options": options or None,
        }
        if attrs.subresource:
            request["subResource"] = attrs.subresource
            request["requestSubResource"] = attrs.subresource
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}

    def _ssl_context(self, ca_bundle: str | None) -> ssl.SSLContext:
        key = ca_bundle or ""
        ctx = self._contexts.get(key)
        if ctx is None:
            if ca_bundle:
                pem = base64.b64decode(ca_bundle).decode()
                ctx = ssl.create_default_context(cadata=pem)
            else:
                ctx = ssl.create_default_context()
            self._contexts[key] = ctx
        return ctx

    def _resolve(self, webhook: Obj, timeout: float) -> tuple[str, str | None, str]:
        """(URL to post to, TLS server name override, URL as the webhook config names it)."""
        client = webhook.get("clientConfig") or {}
        suffix = f"?timeout={int(timeout)}s"
        if client.get("url"):
            url = str(client["url"])
            sep = "&" if "?" in url else "?"
            return f"{url}{sep}timeout={int(timeout)}s", None, url
        service = client.get("service")
        if not service:
            raise WebhookError("the webhook's clientConfig has neither url nor service")
        namespace, name = str(service.get("namespace", "")), str(service.get("name", ""))
        port = int(service.get("port") or 443)
        path = str(service.get("path") or "/")
        server_name = f"{name}.{namespace}.svc"
        nominal = f"https://{server_name}:{port}{path}"
        registered = self.service_endpoints.get((namespace, name))
        if registered is not None:
            host, real_port = registered
            return f"https://{_host(host)}:{real_port}{path}{suffix}", server_name, nominal
        endpoint = self._endpoint(namespace, name, port)
        if endpoint is None:
            raise WebhookError(
                f'Post "{nominal}{suffix}": no endpoints available for service "{name}"'
            )
        host, real_port = endpoint
        return f"https://{_host(host)}:{real_port}{path}{suffix}", server_name, nominal

    def _endpoint(self, namespace: str, name: str, port: int) -> tuple[str, int] | None:
        try:
            svc = self.storage.get("v1", "Service", name, namespace)
        except StatusError:
            return None
        target: Any = port
        port_name = ""
        for p in (svc.get("spec") or {}).get("ports") or []:
            if int(p.get("port", 0)) == port:
                target = p.get("targetPort", port)
                port_name = str(p.get("name", ""))
        try:
            slices = self.storage.list(
                "discovery.k8s.io/v1",
                "EndpointSlice",
                namespace,
                label_selector=f"kubernetes.io/service-name={name}",
            )
        except StatusError:
            slices = []
        for es in slices:
            ports = es.get("ports") or []
            real = _pick_port(ports, port_name, target)
            for ep in es.get("endpoints") or []:
                if (ep.get("conditions") or {}).get("ready", True) and ep.get("addresses") and real:
                    return str(ep["addresses"][0]), real
        try:
            endpoints = self.storage.get("v1", "Endpoints", name, namespace)
        except StatusError:
            return None
        for subset in endpoints.get("subsets") or []:
            real = _pick_port(subset.get("ports") or [], port_name, target)
            for address in subset.get("addresses") or []:
                if address.get("ip") and real:
                    return str(address["ip"]), real
        return None

    async def _invoke(
        self,
        config: Obj,
        webhook: Obj,
        attrs: AdmissionAttributes,
        obj: Obj | None,
        old: Obj | None,
    ) -> Obj | None:
        """Call one webhook; its ``response`` dict, or ``None`` when ignored after a failure."""
        name = str(webhook.get("name", ""))
        config_name = str((config.get("metadata") or {}).get("name", ""))
        side_effects = webhook.get("sideEffects") or "Unknown"
        if attrs.dry_run and side_effects not in ("None", "NoneOnDryRun"):
            raise StatusError(
                400,
                "BadRequest",
                f'admission webhook "{name}" does not support dry run',
            )
        timeout = float(webhook.get("timeoutSeconds") or self.default_timeout)
        try:
            response = await self._post(webhook, attrs, obj, old, timeout)
        except WebhookError as exc:
            outcome = f"error: {exc}"
            self.calls.append(
                WebhookCall(
                    config_name,
                    name,
                    attrs.operation,
                    attrs.resource,
                    attrs.namespace,
                    attrs.name,
                    outcome,
                )
            )
            if (webhook.get("failurePolicy") or "Fail") == "Ignore":
                self._log.warning(
                    "webhook call failed; ignored by failurePolicy", webhook=name, error=str(exc)
                )
                return None
            raise self._failure(webhook, str(exc)) from exc
        allowed = bool(response.get("allowed"))
        self.calls.append(
            WebhookCall(
                config_name,
                name,
                attrs.operation,
                attrs.resource,
                attrs.namespace,
                attrs.name,
                "allowed" if allowed else "denied",
            )
        )
        return response

    async def _post(
        self,
        webhook: Obj,
        attrs: AdmissionAttributes,
        obj: Obj | None,
        old: Obj | None,
        seconds: float,
    ) -> Obj:
        url, server_name, nominal = self._resolve(webhook, seconds)
        client = webhook.get("clientConfig") or {}
        review = self._review(attrs, obj, old)
        if self._session is None:
            self._session = aiohttp.ClientSession()
        kwargs: dict[str, Any] = {"ssl": self._ssl_context(client.get("caBundle"))}
        if server_name:
            kwargs["server_hostname"] = server_name
        try:
            async with asyncio.timeout(seconds):
                async with self._session.post(url, json=review, **kwargs) as resp:
                    body = await resp.read()
                    if resp.status != 200:
                        raise WebhookError(
                            f'Post "{nominal}": server returned HTTP {resp.status}: {body[:200]!r}'
                        )
        except TimeoutError as exc:
            raise WebhookError(
                f'Post "{nominal}?timeout={int(seconds)}s": context deadline exceeded'
            ) from exc
        except aiohttp.ClientError as exc:
            raise WebhookError(f'Post "{nominal}?timeout={int(seconds)}s": {exc}') from exc
        try:
            answer = json.loads(body)
        except ValueError as exc:
            raise WebhookError(f"received invalid webhook response: {exc}") from exc
        response = answer.get("response") if isinstance(answer, dict) else None
        if not isinstance(response, dict):
            raise WebhookError("received invalid webhook response: response is missing")
        if response.get("uid") != review["request"]["uid"]:
            raise WebhookError(
                f'expected response.uid="{review["request"]["uid"]}", got "{response.get("uid")}"'
            )
        return response

    @staticmethod
    def _failure(webhook: Obj, message: str) -> StatusError:
        return StatusError(
            500,
            "InternalError",
            f'Internal error occurred: failed calling webhook "{webhook.get("name", "")}": '
            f"failed to call webhook: {message}",
        )

    @staticmethod
    def _check_denied(webhook: Obj, response: Obj) -> None:
        if response.get("allowed"):
            return
        result = response.get("status") or {}
        denied_by = f'admission webhook "{webhook.get("name", "")}" denied the request'
        if result.get("message"):
            message = f"{denied_by}: {result['message']}"
        elif result.get("reason"):
            message = f"{denied_by}: {result['reason']}"
        else:
            message = f"{denied_by} without explanation"
        code = int(result.get("code") or 400)
        reason = str(result.get("reason") or _REASONS.get(code, ""))
        details = result.get("details")
        raise StatusError(code, reason, message, details if isinstance(details, dict) else None)


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _pick_port(ports: list[Any], name: str, target: Any) -> int | None:
    if isinstance(target, int) and not ports:
        return target
    for p in ports:
        if name and p.get("name") == name:
            return int(p["port"])
    for p in ports:
        if isinstance(target, int) and int(p.get("port", 0)) == target:
            return target
    if ports:
        return int(ports[0]["port"])
    return target if isinstance(target, int) else None
