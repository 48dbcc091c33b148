"""The five NeMo kinds' binding to the reconciler skeleton: facts, status words, wiring.

One ``NemoKind`` serves every NeMo kind through its ``platforms.nemo``
contract; ``setup_nemo`` adds one controller per kind (recorder
``nemo-<x>-service-controller``; no finalizer: NVIDIA's, which cleans nothing up, is
removed where found).

Facts come from the cache, checked against ``requirements(cr)``: the DB
password Secret and its key, PVCs the spec names without ``create: true``,
and ConfigMaps it reads. A missing one is reported as ``Failed`` with reason
``SecretNotFound``, ``PVCNotFound`` or ``ConfigMapNotFound`` and a Warning
Event (NVIDIA's operator returns an error and leaves status alone); the CR
recovers by itself when the object appears, because Secrets, PVCs and
ConfigMaps are watched and mapped by name to the CRs that reference them.

Secrets and the password: the cache keeps Secrets without their values
(``secret_without_values``: key names only), so the operator does not hold
every Secret of the cluster in memory. When a render needs the password
(Customizer ``dsn``, Evaluator and Guardrail ``uri``) it is read once per
Secret resourceVersion through the uncached reader and kept only for the
Secrets a CR references. It goes into the Secret the operator writes and
nowhere else: messages name the Secret and key, never the value.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from api.apps.v1alpha1 import nemo_customizer
from api.apps.v1alpha1.common import STATE_FAILED
from api.apps.v1alpha1.nemo_common import (
    FAILURE_REASONS,
    REASON_CONFIGMAP_NOT_FOUND,
    REASON_FAILED,
    REASON_INVALID_SPEC,
    REASON_NOT_READY,
    REASON_PVC_NOT_FOUND,
    REASON_SECRET_NOT_FOUND,
)
from api.base import CustomResource
from controllers import nimservice_status as status_words
from controllers.blocker_facts import (
    EVENT,
    gather_pod_facts,
    pod_blocker_changed,
    pod_event_watches,
    warning_event_cache,
)
from controllers.reconciler import Event, Kind, KindReconciler
from controllers.wiring import (
    SECRET,
    SetupOptions,
    own_kinds,
    secret_without_values,
    spec_change_predicate,
)
from nimctl_runtime.builder import Builder
from nimctl_runtime.cache.cache import ByObject
from nimctl_runtime.client.client import Client
from nimctl_runtime.client.errors import NotFound
from nimctl_runtime.client.interfaces import (
    EventRecorder,
    KeyReader,
    Reader,
    get_or_none,
)
from nimctl_runtime.manager import Manager
from nimctl_runtime.meta import dig, name_of, namespace_of
from nimctl_runtime.predicate import ResourceVersionChangedPredicate
from nimctl_runtime.reconcile import Request
from platforms.capabilities import Capabilities
from platforms.contract import Blocked, Observed, Readiness
from platforms.nemo.contract import API_VERSION, CONTRACTS, NemoContract, requirements
from platforms.nemo.customizer import missing_model_config_keys
from platforms.nemo.facts import NemoFacts

__all__ = [
    "REASON_CONFIGMAP_KEY_SKIPPED",
    "REQUIREMENTS_INDEX",
    "SECRET",
    "NemoKind",
    "requirement_keys",
    "secret_without_values",
    "setup_nemo",
]

from nimctl_runtime.meta import Obj

PVC = ("v1", "PersistentVolumeClaim")
CONFIG_MAP = ("v1", "ConfigMap")
REQUIREMENTS_INDEX = "nemo.requirements"
REASON_CONFIGMAP_KEY_SKIPPED = "ConfigMapKeySkipped"
"""Event reason: a ``modelConfig`` key the ConfigMap lacks was left out of ``config.yaml``."""
"""Cache index on each NeMo kind: ``<Kind>/<name>`` of every object its spec requires."""


def requirement_keys(contract: NemoContract, obj: Mapping[str, Any]) -> list[str]:
    """``Secret/<n>``, ``PersistentVolumeClaim/<n>``, ``ConfigMap/<n>`` the CR needs."""
    try:
        req = requirements(contract.parse(obj))
    except (ValidationError, TypeError):
        return []
    out = [f"PersistentVolumeClaim/{n}" for n, _ in req.pvcs]
    out.extend(f"ConfigMap/{n}" for n in req.config_maps)
    if req.password is not None:
        out.append(f"Secret/{req.password.secret}")
    return out


@dataclass
class _Password:
    resource_version: str
    key: str
    value: str


def _missing(reason: str, message: str) -> Blocked:
    return Blocked(Readiness(STATE_FAILED, reason, message, failed=True))


class NemoKind(Kind[CustomResource, NemoFacts]):
    """Any NeMo kind: requirements checked from the cache, NVIDIA's status words."""

    api_version = API_VERSION

    def __init__(
        self,
        contract: NemoContract,
        *,
        api_reader: KeyReader,
        capabilities: Capabilities,
        operator_version: str = "",
        recorder: EventRecorder | None = None,
        read_events: bool = False,
    ) -> None:
        self.contract = contract
        #: Warning Events are read from the cache (``blocker_facts.warning_event_cache``).
        self.read_events = read_events
        self.recorder = recorder
        self._skipped: dict[tuple[str, str], tuple[Any, tuple[str, ...]]] = {}
        self.nemo = contract
        self.kind = contract.kind
        # NVIDIA's finalizer cleans nothing up and keeps CRs from being deleted
        # once the operator is gone: nimctl adds none and removes it where found.
        self.finalizer = None
        self.stale_finalizers = (contract.info.finalizer,)
        self.api_reader = api_reader
        self.capabilities = capabilities
        self.operator_version = operator_version
        self._passwords: dict[tuple[str, str], _Password] = {}

    # -- parse and gather -----------------------------------------------------------

    def parse(self, obj: Obj) -> CustomResource:
        try:
            return self.nemo.parse(obj)
        except ValidationError as exc:
            problems = "; ".join(
                f"spec{''.join(f'.{p}' for p in e['loc'][1:])}: {e['msg']}"
                if e["loc"] and e["loc"][0] == "spec"
                else f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}"
                for e in exc.errors(include_url=False)[:5]
            )
            raise _missing(
                REASON_INVALID_SPEC, f"{self.kind} spec is invalid: {problems}"
            ) from None

    async def gather(self, cr: CustomResource, obj: Obj, reader: Reader) -> NemoFacts:
        namespace = namespace_of(obj)
        req = requirements(cr)
        versions: list[Any] = []
        password: str | None = None
        if req.password is not None:
            ref = req.password
            where = "spec.databaseConfig.credentials"
            secret = await get_or_none(reader, *SECRET, ref.secret, namespace)
            if secret is None:
                raise _missing(
                    REASON_SECRET_NOT_FOUND,
                    f"Secret {ref.secret} not found: {where}.secretName names the Secret "
                    "holding the database password",
                )
            if ref.key not in (secret.get("data") or {}):
                raise _missing(
                    REASON_SECRET_NOT_FOUND,
                    f"key '{ref.key}' not found in Secret '{ref.secret}' ({where}.passwordKey)",
                )
            rv = str(dig(secret, "metadata", "resourceVersion", default=""))
            versions.append(("Secret", ref.secret, rv))
            if ref.read:
                password = await self._password(namespace, ref.secret, ref.key, rv)
        for pvc_name, field in req.pvcs:
            claim = await get_or_none(reader, *PVC, pvc_name, namespace)
            if claim is None:
                raise _missing(
                    REASON_PVC_NOT_FOUND,
                    f"PersistentVolumeClaim {pvc_name} not found (spec.{field}); create it, "
                    f"or set spec.{field}.create: true",
                )
        config_maps: dict[str, Mapping[str, str]] = {}
        for cm_name in req.config_maps:
            cm = await get_or_none(reader, *CONFIG_MAP, cm_name, namespace)
            if cm is None:
                raise _missing(REASON_CONFIGMAP_NOT_FOUND, f"ConfigMap {cm_name} not found")
            config_maps[cm_name] = dict(cm.get("data") or {})
            versions.append(("ConfigMap", cm_name, dig(cm, "metadata", "resourceVersion")))
        if isinstance(cr, nemo_customizer.NemoCustomizer):
            self._report_skipped_keys(cr, obj, config_maps, versions)
        # the Deployment's pods, the Warning Events about them and (when a pod waits
        # for a GPU) the nodes: what readiness names a blocker from (issue 25)
        pods, events, nodes = await gather_pod_facts(
            reader, namespace, [self.nemo.pod_selector(name_of(obj))], events=self.read_events
        )
        return NemoFacts(
            capabilities=self.capabilities,
            operator_version=self.operator_version,
            db_password=password,
            config_maps=config_maps,
            versions=tuple(versions),
            pods=pods,
            events=events,
            nodes=nodes,
        )

    def _report_skipped_keys(
        self,
        cr: nemo_customizer.NemoCustomizer,
        obj: Obj,
        config_maps: Mapping[str, Mapping[str, str]],
        versions: list[Any],
    ) -> None:
        """A Normal Event naming the ``modelConfig`` keys left out of ``config.yaml``.

        NVIDIA's operator skips a missing key without a word; nimctl says so once
        per ConfigMap version and CR generation, not on every pass.
        """
        missing = tuple(missing_model_config_keys(cr, config_maps))
        at = (namespace_of(obj), name_of(obj))
        seen = (dig(obj, "metadata", "generation"), tuple(versions))
        if not missing:
            self._skipped.pop(at, None)
            return
        if self._skipped.get(at) == (seen, missing) or self.recorder is None:
            return
        self._skipped[at] = (seen, missing)
        keys = ", ".join(f"'{k}'" for k in missing)
        self.recorder.event(
            obj,
            "Normal",
            REASON_CONFIGMAP_KEY_SKIPPED,
            f"ConfigMap {cr.spec.model_config_ref.name} has no key {keys} "
            "(spec.modelConfig): skipped, config.yaml is written without it",
        )

    def forget(self, namespace: str, name: str) -> None:
        """Drop what is kept about a CR that is gone."""
        self._skipped.pop((namespace, name), None)

    async def _password(self, namespace: str, secret: str, key: str, rv: str) -> str:
        known = self._passwords.get((namespace, secret))
        if known is not None and known.resource_version == rv and known.key == key:
            return known.value
        try:
            live = await self.api_reader.get("v1", "Secret", secret, namespace or None)
        except NotFound:
            raise _missing(REASON_SECRET_NOT_FOUND, f"Secret {secret} not found") from None
        raw = (live.get("data") or {}).get(key)
        if raw is None:
            string_data = live.get("stringData") or {}
            if key not in string_data:
                raise _missing(
                    REASON_SECRET_NOT_FOUND, f"key '{key}' not found in Secret '{secret}'"
                )
            value = str(string_data[key])
        else:
            try:
                value = base64.b64decode(str(raw), validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                raise _missing(
                    REASON_SECRET_NOT_FOUND,
                    f"key '{key}' of Secret '{secret}' is not base64-encoded UTF-8 text",
                ) from None
        live_rv = str(dig(live, "metadata", "resourceVersion", default=rv))
        self._passwords[(namespace, secret)] = _Password(live_rv, key, value)
        return value

    def memo_key(self, cr: CustomResource, obj: Obj, facts: NemoFacts) -> tuple[Any, ...] | None:
        generation = dig(obj, "metadata", "generation")
        if generation is None:
            return None
        return (dig(obj, "metadata", "uid"), generation, facts.versions)

    # -- status and events ------------------------------------------------------------

    def status(self, old: Obj, readiness: Readiness, observed: Observed) -> Obj:
        if readiness.ready:
            st = status_words.set_ready(old, readiness.message)
        elif readiness.failed:
            st = status_words.set_failed(old, readiness.reason, readiness.message)
        else:
            st = status_words.set_not_ready(old, readiness.reason, readiness.message)
        deployments = observed.of_kind("Deployment")
        if deployments:
            available = dig(deployments[0], "status", "availableReplicas")
            if available is not None:
                st["availableReplicas"] = int(available)
        return st

    def event(self, obj: Obj, readiness: Readiness) -> Event | None:
        name = name_of(obj)
        if readiness.ready:
            return ("Normal", "Ready", f"{self.kind} {name} ready, msg: {readiness.message}")
        if readiness.reason == REASON_NOT_READY:
            return (
                "Normal",
                REASON_NOT_READY,
                f"{self.kind} {name} not ready yet, msg: {readiness.message}",
            )
        return ("Warning", readiness.reason, f"{self.kind} {name}: {readiness.message}")

    def failure_event(self, obj: Obj, message: str) -> Event | None:
        return ("Warning", REASON_FAILED, f"{self.kind} {name_of(obj)} failed, msg: {message}")

    def failure_reason(self, kind: str) -> str:
        return FAILURE_REASONS.get(kind, REASON_FAILED)


def setup_nemo(manager: Manager, client: Client, options: SetupOptions) -> None:
    """One controller per NeMo kind (``ControllerEntry("nemo", "nemo", setup_nemo)``)."""
    cache = manager.cache
    # Secrets are cached without their values (see the module docstring).
    cache.by_object.setdefault(SECRET, ByObject(transform=secret_without_values))
    warning_event_cache(cache)
    for contract in CONTRACTS.values():
        kind = contract.kind

        def index(obj: Mapping[str, Any], contract: NemoContract = contract) -> list[str]:
            return requirement_keys(contract, obj)

        cache.add_index(API_VERSION, kind, REQUIREMENTS_INDEX, index)
        reconciler: KindReconciler[CustomResource, NemoFacts] = KindReconciler(
            kind=NemoKind(
                contract,
                api_reader=cache.api_reader,
                capabilities=options.capabilities,
                operator_version=options.operator_version,
                recorder=manager.event_recorder(contract.info.recorder_name),
                read_events=True,
            ),
            cache=cache,
            client=client,
            api_reader=cache.api_reader,
            recorder=manager.event_recorder(contract.info.recorder_name),
            capabilities=options.capabilities,
        )

        def users(dep_kind: str, kind: str = kind) -> Any:
            async def map_fn(obj: dict[str, Any]) -> list[Request]:
                namespace = namespace_of(obj)
                found = await cache.list(
                    API_VERSION,
                    kind,
                    namespace,
                    index=(REQUIREMENTS_INDEX, f"{dep_kind}/{name_of(obj)}"),
                )
                return [Request(namespace, name_of(u)) for u in found]

            return map_fn

        builder = (
            Builder(manager)
            .named(kind.lower())
            .for_(API_VERSION, kind, predicates=[spec_change_predicate()])
            .with_options(max_concurrent_reconciles=options.max_concurrent_reconciles)
        )
        own_kinds(builder, manager, contract.owned_kinds(options.capabilities))
        for gvk in (SECRET, PVC, CONFIG_MAP):
            builder.watches(
                gvk[0], gvk[1], users(gvk[1]), predicates=[ResourceVersionChangedPredicate()]
            )
        # What blocks the pods (an init container, a missing Secret, the scheduler)
        # shows on them and in Warning Events, not on the Deployment (issue 25).
        of_pod, of_event = pod_event_watches(cache, contract.owner_of_pod)
        builder.watches("v1", "Pod", of_pod, predicates=[pod_blocker_changed()])
        builder.watches(*EVENT, of_event)
        builder.complete(reconciler)
