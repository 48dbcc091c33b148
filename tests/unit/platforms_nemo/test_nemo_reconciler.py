"""A NeMo kind's KindReconciler on the in-memory API: the password is read once per Secret version."""

from __future__ import annotations

import base64
from typing import Any

from api.serialize import dump
from controllers.nemo import NemoKind
from controllers.reconciler import KindReconciler
from nimctl_runtime.reconcile import Request
from platforms.capabilities import Capabilities
from platforms.nemo.contract import CONTRACTS
from platforms.nemo.demo import sample_crs, secret
from tests.unit.controllers.fakes import FakeAPI, FakeRecorder

API = "apps.nvidia.com/v1alpha1"


class CountingReader:
    """The uncached reader: counts the Secret reads that reach the API server."""

    def __init__(self, api: FakeAPI) -> None:
        self.api = api
        self.secret_reads = 0

    async def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> Any:
        if kind == "Secret":
            self.secret_reads += 1
        return await self.api.get(api_version, kind, name, namespace)


def setup() -> tuple[FakeAPI, CountingReader, FakeRecorder, KindReconciler[Any, Any], dict[str, Any]]:
    api = FakeAPI()
    cr = dump(next(c for c in sample_crs() if c.kind == "NemoEvaluator"))
    cr["metadata"]["namespace"] = "default"
    cr["metadata"]["generation"] = 1
    api.put(cr)
    api.put(secret("evaluator-pg-existing-secret", "default", {"password": "one"}))
    reader = CountingReader(api)
    recorder = FakeRecorder()
    rec: KindReconciler[Any, Any] = KindReconciler(
        kind=NemoKind(
            CONTRACTS["NemoEvaluator"], api_reader=reader, capabilities=Capabilities.nothing()
        ),
        cache=api,
        client=api,
        api_reader=reader,
        recorder=recorder,
    )
    return api, reader, recorder, rec, cr


def uri(api: FakeAPI) -> str:
    obj = api.obj("v1", "Secret", "nemoevaluator-sample")
    assert obj is not None
    return base64.b64decode(obj["data"]["uri"]).decode()


async def test_password_read_once_per_secret_version_and_second_pass_writes_nothing() -> None:
    api, reader, recorder, rec, cr = setup()
    request = Request("default", cr["metadata"]["name"])
    await rec.reconcile(request)
    assert reader.secret_reads == 1
    assert ":one@" in uri(api)
    live = api.obj(API, "NemoEvaluator", cr["metadata"]["name"])
    assert live is not None and live["status"]["state"] == "NotReady"
    assert recorder.events and recorder.events[-1][1] == "NotReady"

    writes = len(api.writes)
    await rec.reconcile(request)
    assert api.writes[writes:] == []
    assert reader.secret_reads == 1  # same resourceVersion: not read again

    api.put(secret("evaluator-pg-existing-secret", "default", {"password": "two"}))
    await rec.reconcile(request)
    assert reader.secret_reads == 2
    assert ":two@" in uri(api)
    assert ("update", "Secret", "nemoevaluator-sample") in api.writes[writes:]


async def test_a_missing_key_is_reported_without_reading_the_value() -> None:
    api, reader, recorder, rec, cr = setup()
    api.put(secret("evaluator-pg-existing-secret", "default", {"other": "x"}))
    await rec.reconcile(Request("default", cr["metadata"]["name"]))
    live = api.obj(API, "NemoEvaluator", cr["metadata"]["name"])
    assert live is not None
    failed = next(c for c in live["status"]["conditions"] if c["type"] == "Failed")
    assert (failed["status"], failed["reason"]) == ("True", "SecretNotFound")
    assert failed["message"] == (
        "key 'password' not found in Secret 'evaluator-pg-existing-secret' "
        "(spec.databaseConfig.credentials.passwordKey)"
    )
    assert reader.secret_reads == 0
    assert recorder.events == [
        ("Warning", "SecretNotFound", f"NemoEvaluator nemoevaluator-sample: {failed['message']}")
    ]
    assert api.obj("apps/v1", "Deployment", "nemoevaluator-sample") is None
