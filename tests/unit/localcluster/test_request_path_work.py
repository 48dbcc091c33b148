"""The work localcluster's request path does per write, counted, never timed (issue 30).

A Service's cluster IP is found without scanning the addresses in use; a built-in
object's schema nodes are worked out once per server; JSON is read and written by
orjson, and by the stdlib json only where orjson would give another answer (floats,
integers beyond 64 bits), with json's exact bytes and values either way; a write's
response is the bytes it stored (one encode per write); a poll of the audit log
encodes each finished record once. Each test also checks the answer is the one the
plain way gives.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest

from localcluster import builtin_fields, cel, codec, handlers, store
from localcluster.admission import BuiltinAdmission
from localcluster.audit import AuditLog, AuditRecord
from localcluster.cluster import LocalCluster
from localcluster.errors import StatusError
from localcluster.storage import Storage
from localcluster.tokens import ISSUER
from tests.unit.localcluster.services import admit, service
from tests.unit.localcluster.services import empty_storage as _storage

N = 200


def _create_service(storage: Storage, builtin: BuiltinAdmission, name: str) -> str:
    obj = service(name)
    del obj["spec"]["type"]
    return str(storage.create(admit(builtin, obj))["spec"]["clusterIP"])


def _lowest_free(used: set[str]) -> str:
    """The plain way: scan from the network's 11th address."""
    offset = 10
    while f"10.96.{offset >> 8}.{offset & 255}" in used:
        offset += 1
    return f"10.96.{offset >> 8}.{offset & 255}"


def test_the_lowest_free_cluster_ip_is_found_without_scanning_the_addresses_in_use() -> None:
    storage = _storage()
    builtin = BuiltinAdmission(storage)
    ips = [_create_service(storage, builtin, f"s{i}") for i in range(N)]
    allocations = builtin._allocations
    assert allocations is not None
    # the same addresses as a scan gives: 10.96.0.10 upwards, in order
    assert ips == [f"10.96.{(10 + i) >> 8}.{(10 + i) & 255}" for i in range(N)]
    # two addresses looked at per Service: the one the previous create took, then
    # the free one (a scan from the 11th looks at 1 + 2 + ... + N, 20,100 for 200)
    assert allocations.probes == 2 * N - 1

    # a freed address is the next one handed out, then allocation goes on above
    storage.delete("v1", "Service", "s7", "default")
    storage.delete("v1", "Service", "s3", "default")
    used = set(ips) - {ips[3], ips[7]}
    allocations.probes = 0
    for name in ("again3", "again7", "next"):
        expected = _lowest_free(used)
        assert _create_service(storage, builtin, name) == expected
        used.add(expected)
    assert used == set(ips) | {f"10.96.{(10 + N) >> 8}.{(10 + N) & 255}"}
    # 1 + 1 + (N - 7): after the two holes the search walks once past what is held
    assert allocations.probes <= N


def _deployment(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"d{i}", "namespace": "default", "labels": {"app": f"d{i}"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": f"d{i}"}},
            "template": {
                "metadata": {"labels": {"app": f"d{i}"}},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
                            "env": [{"name": "A", "value": "1"}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            "typo": True,
                        }
                    ],
                    "volumes": [{"name": "v", "emptyDir": {}, "typo": 1}],
                },
            },
        },
    }


def test_schema_nodes_are_worked_out_once_per_server_not_per_object(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made = [0]
    real = builtin_fields._Shape.__init__

    def counted(self: Any, *args: Any) -> None:
        made[0] += 1
        real(self, *args)

    monkeypatch.setattr(builtin_fields._Shape, "__init__", counted)
    pruner = builtin_fields.BuiltinPruner()
    first = pruner.prune(("apps/v1", "Deployment"), _deployment(0))
    after_first = made[0]
    assert after_first > 0
    for i in range(1, N):
        pruned = pruner.prune(("apps/v1", "Deployment"), _deployment(i))
        assert pruned == first
    assert made[0] == after_first
    assert first == [
        "spec.template.spec.containers[0].typo",
        "spec.template.spec.volumes[0].typo",
    ]


class _Counted:
    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.real(*args, **kwargs)


def _json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def test_objects_are_written_by_orjson_with_json_s_exact_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stdlib = _Counted(store._dumps)
    monkeypatch.setattr(store, "_dumps", stdlib)
    tricky_strings = {
        "esc": 'quote " backslash \\ "1.5," \\" e:1e5, [2.5] \u2028 \x00 \x1f é ✓',
        "json-in-a-string": json.dumps({"a": 1.5, "b": [1e-05, "x"]}),
    }
    for i in range(N):
        obj = _deployment(i) | {"extra": tricky_strings}
        assert store.encode(obj) == _json_bytes(obj)
    assert stdlib.calls == 0  # no float, nothing orjson refuses: orjson wrote every one

    # where orjson writes otherwise or refuses, json writes: the same bytes as before
    special: list[Any] = [
        {"a": 1e-05, "b": 1e16, "c": 0.1, "d": -0.0, "e": [2.5e-07]},
        {"big": 2**64, "small": -(2**63) - 1},
        {1: "an int key"},
        [1.5],
        1.5,
        "bare",
    ]
    for obj in special:
        assert store.encode(obj) == _json_bytes(obj)
    assert stdlib.calls == len(special)


def test_objects_are_read_by_orjson_with_json_s_values_and_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stdlib = _Counted(json.loads)
    monkeypatch.setattr(json, "loads", stdlib)  # the module store reads json with
    for i in range(N):
        raw = _json_bytes(_deployment(i))
        assert store.loads(raw) == _deployment(i)
    assert stdlib.calls == 0

    # an integer beyond 64 bits stays an int (orjson would give a float)
    big = store.loads(b'{"n":123456789012345678901234567890,"m":-9223372036854775809}')
    assert big == {"n": 123456789012345678901234567890, "m": -9223372036854775809}
    assert all(type(v) is int for v in big.values())
    # what only json reads, json reads
    assert math.isnan(store.loads(b'{"x":NaN}')["x"])
    assert store.loads(b'{"x":1e400}')["x"] == math.inf
    assert store.loads('{"x":"\\ud800"}')["x"] == "\ud800"
    # and what json refuses is refused with json's error
    with pytest.raises(json.JSONDecodeError, match="Expecting"):
        store.loads(b'{"x":')
    with pytest.raises(StatusError, match="json parse error: Expecting value"):
        codec.decode_body(b'{"x": [1,', "application/json")


def test_the_nesting_limit_still_holds_when_the_walk_is_skipped() -> None:
    deep = b'{"a":' * (codec.MAX_NESTING_DEPTH + 1) + b"1" + b"}" * (codec.MAX_NESTING_DEPTH + 1)
    with pytest.raises(Exception, match="nests objects and arrays more than"):
        codec.decode_body(deep, "application/json")
    limit = b"[" * codec.MAX_NESTING_DEPTH + b"]" * codec.MAX_NESTING_DEPTH
    assert codec.decode_body(limit, "application/json") is not None


def test_a_poll_of_the_audit_log_encodes_each_finished_record_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    to_json = _Counted(AuditRecord.to_json)

    def counted_to_json(self: AuditRecord) -> dict[str, Any]:
        out: dict[str, Any] = to_json(self)
        return out

    monkeypatch.setattr(AuditRecord, "to_json", counted_to_json)

    def record(seq: int, code: int | None) -> AuditRecord:
        return AuditRecord(
            seq, "t", "u", (), "create", "apps", "v1", "deployments", "", "ns", "n", "POST",
            "/apis/apps/v1/namespaces/ns/deployments", "", code,
        )  # fmt: skip

    done = [record(i, 201) for i in range(N)]
    watch = record(N, None)  # still open: its code comes later
    for _poll in range(5):
        for r in [*done, watch]:
            assert json.loads(r.encoded()) == r.to_json()
    # N once each, the open one on every poll (5 x encoded + 5 x the assert's own
    # to_json for every record)
    assert to_json.calls == N + 5 + 5 * (N + 1)
    watch.code = 200
    assert json.loads(watch.encoded())["code"] == 200


async def test_a_write_is_encoded_once_and_answered_with_the_stored_bytes(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    counted = _Counted(store.encode)
    for module in (store, codec, handlers):
        monkeypatch.setattr(module, "encode", counted)
    conn = aiohttp.TCPConnector(ssl=cluster.client_ssl_context())
    headers = {"Authorization": f"Bearer {cluster.token_for('admin')}"}
    async with aiohttp.ClientSession(connector=conn, headers=headers) as session:
        url = cluster.url + "/apis/apps/v1/namespaces/default/deployments"
        bodies = []
        for i in range(5):
            counted.calls = 0
            async with session.post(url, json=_deployment(i)) as resp:
                assert resp.status == 201, await resp.text()
                body = await resp.read()
            assert counted.calls == 1  # stored; the response is those bytes
            bodies.append(body)
            async with session.patch(
                f"{url}/d{i}",
                data=json.dumps({"metadata": {"labels": {"patched": "yes"}}}),
                headers={"Content-Type": "application/merge-patch+json"},
            ) as resp:
                assert resp.status == 200
                patched = await resp.json()
            assert patched["metadata"]["labels"]["patched"] == "yes"
    for i, body in enumerate(bodies):
        created = json.loads(body)
        assert created["metadata"]["name"] == f"d{i}"
        assert created["metadata"]["resourceVersion"]
        assert "typo" not in created["spec"]["template"]["spec"]["containers"][0]
    stored = cluster.storage.get("apps/v1", "Deployment", "d4", "default")
    assert stored["metadata"]["labels"]["patched"] == "yes"
    assert copy.deepcopy(stored)["spec"] == json.loads(bodies[4])["spec"]


async def test_a_service_account_token_decodes_its_account_once_per_stored_version(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = cluster.storage
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nim"}})

    def account() -> dict[str, Any]:
        return storage.create(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot", "namespace": "nim"}}
        )  # fmt: skip

    uid = account()["metadata"]["uid"]
    now = int(cluster.token_issuer.clock())
    token = cluster.token_issuer.sign(
        {
            "aud": [ISSUER],
            "exp": now + 600,
            "iat": now,
            "nbf": now,
            "iss": ISSUER,
            "sub": "system:serviceaccount:nim:robot",
            "kubernetes.io": {"namespace": "nim", "serviceaccount": {"name": "robot", "uid": uid}},
        }
    )
    decodes = _Counted(store.Entry.decode)

    def counted_decode(self: store.Entry) -> dict[str, Any]:
        out: dict[str, Any] = decodes(self)
        return out

    monkeypatch.setattr(store.Entry, "decode", counted_decode)
    for _ in range(N):
        assert cluster.user_for_token(token) == (
            "system:serviceaccount:nim:robot",
            ("system:serviceaccounts", "system:serviceaccounts:nim", "system:authenticated"),
        )
    assert decodes.calls == 1
    # a write to the account is a new stored version: read again, still valid
    labelled = storage.get("v1", "ServiceAccount", "robot", "nim")
    labelled["metadata"]["labels"] = {"a": "b"}
    storage.update(labelled)
    decodes.calls = 0
    assert cluster.user_for_token(token) is not None
    assert cluster.user_for_token(token) is not None
    assert decodes.calls == 1
    # deleted, then re-created under another uid: refused both times
    storage.delete("v1", "ServiceAccount", "robot", "nim")
    assert cluster.user_for_token(token) is None
    account()
    assert cluster.user_for_token(token) is None


def test_a_poll_for_one_user_s_creates_of_one_resource_reads_only_those() -> None:
    log = AuditLog(max_records=50)
    calls = [
        ("op", "create", "deployments"),
        ("op", "patch", "nimservices"),
        ("admin", "create", "deployments"),
    ]
    for i in range(300):
        user, verb, resource = calls[i % 3]
        rec = AuditRecord(
            i, "t", user, (), verb, "", "v1", resource, "", "ns", f"n{i}", "POST", "/", ""
        )
        log._append(rec)  # fmt: skip
    # the index gives what the scan gives, the bound included (the last 50 records)
    for user, verb, resource in calls:
        scanned = [
            r for r in log.records() if (r.user, r.verb, r.resource) == (user, verb, resource)
        ]
        assert log.records(user=user, verb=verb, resource=resource) == scanned
        assert len(scanned) in (16, 17)
    assert sum(len(v) for v in log._by_call.values()) == 50
    log.clear()
    assert log.records(user="op", verb="create", resource="deployments") == []


def test_a_status_write_keys_the_unchanged_spec_for_its_rules_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.replicas >= 0"},
                    {"rule": "self.replicas == oldSelf.replicas || self.replicas > 0"},
                ],
                "properties": {"replicas": {"type": "integer"}, "x": {}},
            },
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    keys = _Counted(cel._value_key)
    monkeypatch.setattr(cel, "_value_key", keys)
    old = {"spec": {"replicas": 1, "x": 1}, "status": {"a": 1}}
    new = {"spec": {"replicas": 1, "x": 1}, "status": {"a": 2}}
    for _ in range(N):
        assert cel.validate_rules(schema, new, old) == []
    assert keys.calls == N  # the spec's key, once: the old spec is the same value
    # the same by == is not enough: 1.0 is not 1 where the schema leaves it untyped
    keys.calls = 0
    floated = {"spec": {"replicas": 1, "x": 1.0}, "status": {}}
    assert cel.validate_rules(schema, floated, old) == []
    assert keys.calls == 2
    # and a changed spec is judged against the old one
    shrunk = {"spec": {"replicas": -1, "x": 1}, "status": {}}
    assert [c["message"] for c in cel.validate_rules(schema, shrunk, old)] != []


# -- fifth pass: per-request work that does not depend on the body ------------------


async def test_the_request_hooks_are_chained_once_not_per_request(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from localcluster import server

    wraps = _Counted(server._wrap)
    monkeypatch.setattr(server, "_wrap", wraps)
    seen: list[str] = []

    async def last_hook(request: Any, info: Any, handler: Any) -> Any:
        seen.append(info.verb)
        return await handler(request)

    conn = aiohttp.TCPConnector(ssl=cluster.client_ssl_context())
    headers = {"Authorization": f"Bearer {cluster.token_for('admin')}"}
    url = cluster.url + "/api/v1/namespaces/default/configmaps"
    async with aiohttp.ClientSession(connector=conn, headers=headers) as session:

        async def create(name: str) -> None:
            body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
            async with session.post(url, json=body) as resp:
                assert resp.status == 201, await resp.text()

        for i in range(20):
            await create(f"c{i}")
        hooks = len(cluster.request_hooks)
        assert wraps.calls == hooks  # once for the hooks there are, not 20 times
        # a hook added later is in the chain from the next request on, innermost
        wraps.calls = 0
        cluster.request_hooks.append(last_hook)
        for i in range(20, 25):
            await create(f"c{i}")
        assert wraps.calls == hooks + 1
        assert seen == ["create"] * 5
        # the audit hook (outermost) still saw every request
        from localcluster.extensions import extensions_of

        records = extensions_of(cluster).audit.records(verb="create", resource="configmaps")
        assert [r.name for r in records] == [f"c{i}" for i in range(25)]


def test_without_webhook_configurations_a_write_lists_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from localcluster.admission import WebhookAdmission
    from localcluster.hooks import AdmissionAttributes

    storage = _storage()
    webhooks = WebhookAdmission(storage)
    lists = _Counted(storage.list)
    monkeypatch.setattr(storage, "list", lists)
    attrs = AdmissionAttributes(
        operation="CREATE", group="", version="v1", resource="configmaps", subresource="",
        kind="ConfigMap", namespace="default", name="c", user="admin", groups=("system:masters",),
    )  # fmt: skip
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    import asyncio

    for _ in range(N):
        assert asyncio.run(webhooks.mutate(attrs, obj, None)) == (None, [])
        assert asyncio.run(webhooks.validate(attrs, obj, None)) == []
    assert lists.calls == 0
    # once one is stored it is listed (and matched) again on every write
    storage.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "v"},
            "webhooks": [],
        }
    )
    asyncio.run(webhooks.validate(attrs, obj, None))
    assert lists.calls == 1


def test_creation_timestamps_are_formatted_once_per_second(monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime

    from localcluster import strategy

    clock = [1_764_326_843.25]
    monkeypatch.setattr(strategy, "time", SimpleNamespace(time=lambda: clock[0]))
    formats = _Counted(datetime.datetime.strftime)

    class _Datetime(datetime.datetime):
        def strftime(self, fmt: str) -> str:
            out: str = formats(self, fmt)
            return out

    monkeypatch.setattr(strategy, "datetime", SimpleNamespace(datetime=_Datetime, UTC=datetime.UTC))
    strategy._Stamp.second = -1
    stamps = {strategy.now_rfc3339() for _ in range(N)}
    assert stamps == {"2025-11-28T10:47:23Z"}
    assert formats.calls == 1
    clock[0] += 1.0  # the next second
    assert strategy.now_rfc3339() == "2025-11-28T10:47:24Z"
    assert formats.calls == 2


def test_uids_come_from_one_read_of_random_bytes_per_256(monkeypatch: pytest.MonkeyPatch) -> None:
    import uuid

    from localcluster import strategy

    reads = _Counted(os.urandom)
    monkeypatch.setattr(strategy, "os", SimpleNamespace(urandom=reads))
    strategy._RandomPool.data, strategy._RandomPool.offset = b"", 0
    uids = [strategy.new_uid() for _ in range(N)]
    assert reads.calls == 1
    assert len(set(uids)) == N
    for text in uids:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
    [strategy.new_uid() for _ in range(256 - N + 1)]
    assert reads.calls == 2
    # the text of uuid.UUID(bytes=..., version=4) of the same bytes
    raw = os.urandom(16)
    strategy._RandomPool.data, strategy._RandomPool.offset = raw, 0
    assert strategy.new_uid() == str(uuid.UUID(bytes=raw, version=4))


def test_garbage_collection_steps_share_a_turn_of_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from localcluster import gc

    async def run() -> tuple[int, int]:
        storage = _storage()
        collector = gc.GarbageCollector(storage)
        real_sleep = asyncio.sleep
        turns = [0]

        async def counted_sleep(delay: float, *args: Any) -> Any:
            turns[0] += delay == 0  # the collector's turns; the polling below waits longer
            return await real_sleep(delay, *args)

        monkeypatch.setattr(asyncio, "sleep", counted_sleep)
        owner = storage.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "o", "namespace": "default"},
            }
        )
        ref = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "o",
            "uid": owner["metadata"]["uid"],
        }
        collector.start()
        try:
            for i in range(N):
                storage.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {
                            "name": f"d{i}",
                            "namespace": "default",
                            "ownerReferences": [ref],
                        },
                    }
                )
            storage.delete("v1", "ConfigMap", "o", "default")
            for _ in range(1000):
                if not storage.list("v1", "ConfigMap", "default"):
                    break
                await real_sleep(0.01)
        finally:
            await collector.stop()
        return turns[0], len(storage.list("v1", "ConfigMap", "default"))

    sleeps, left = asyncio.run(run())
    assert left == 0  # every dependent collected
    assert sleeps < N  # not a turn of the loop per event (N + 1 creates, N + 1 deletes)


def test_a_label_key_is_validated_once_and_a_bad_one_every_time(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from localcluster import strategy
    from nimctl_runtime.labels import validate_label_key

    checks = _Counted(validate_label_key)
    monkeypatch.setattr(strategy, "validate_label_key", checks)
    strategy._valid_label_keys.clear()
    storage = _storage()
    for i in range(N):
        storage.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"c{i}",
                    "namespace": "default",
                    "labels": {"app.kubernetes.io/name": f"c{i}", "tier": "x"},
                },
            }
        )
    assert checks.calls == 2
    for i in range(3):
        with pytest.raises(StatusError, match="invalid label key"):
            storage.create(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": f"b{i}", "namespace": "default", "labels": {"-bad": "x"}},
                }
            )
    assert checks.calls == 5


def _role(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {
            "name": f"r{i}",
            "namespace": "default",
            "labels": {"app": f"r{i}"},
            "annotations": {"a": "b"},
            "finalizers": ["x/y"],
        },
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}],
    }


def test_go_types_of_common_values_are_settled_without_the_long_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    long_way = _Counted(builtin_fields._TypeChecker._check_field)

    def counted(self: Any, *args: Any) -> None:
        long_way(self, *args)

    monkeypatch.setattr(builtin_fields._TypeChecker, "_check_field", counted)
    pruner = builtin_fields.BuiltinPruner()
    for i in range(N):
        pruner.check_types(("rbac.authorization.k8s.io/v1", "Role"), _role(i))
        pruner.check_types(("v1", "ConfigMap"), {"metadata": {"name": "c"}, "data": {"k": "v"}})
    assert long_way.calls == 0
    # a Deployment: only its quantities (resources.limits) take the long way
    for i in range(N):
        pruner.check_types(("apps/v1", "Deployment"), _deployment(i))
    assert long_way.calls == N
    # what does not fit is refused in Go's words, as before
    bad: list[tuple[tuple[str, str], dict[str, Any], str]] = [
        (("v1", "ConfigMap"), {"data": {"k": 1}}, "number into Go struct field ConfigMap.data of type string"),
        (("v1", "ConfigMap"), {"metadata": {"labels": {"k": True}}}, "bool into Go struct field ObjectMeta.metadata.labels of type string"),
        (("v1", "ConfigMap"), {"metadata": {"finalizers": ["a", 2]}}, "number into Go struct field ObjectMeta.metadata.finalizers of type string"),
        (("rbac.authorization.k8s.io/v1", "Role"), {"rules": [{"verbs": "get"}]}, "string into Go struct field PolicyRule.rules.verbs of type []string"),
        (("apps/v1", "Deployment"), {"spec": {"replicas": 2**40}}, "number 1099511627776 into Go struct field DeploymentSpec.spec.replicas of type int32"),
        (("apps/v1", "Deployment"), {"spec": {"replicas": True}}, "bool into Go struct field DeploymentSpec.spec.replicas of type int32"),
        (("apps/v1", "Deployment"), {"spec": {"template": {"spec": {"containers": [{"name": 1}]}}}}, "number into Go struct field Container.spec.template.spec.containers.name of type string"),
    ]  # fmt: skip
    for kind_key, obj, message in bad:
        with pytest.raises(StatusError, match=re.escape(f"cannot unmarshal {message}")):
            pruner.check_types(kind_key, obj)


async def test_a_service_is_decoded_once_and_stored_as_allocated(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    prunes = _Counted(builtin_fields.BuiltinPruner.prune)

    def counted(self: Any, *args: Any) -> list[str]:
        out: list[str] = prunes(self, *args)
        return out

    monkeypatch.setattr(builtin_fields.BuiltinPruner, "prune", counted)
    deep = _Counted(copy.deepcopy)
    from localcluster import admission

    monkeypatch.setattr(admission, "copy", SimpleNamespace(deepcopy=deep))
    conn = aiohttp.TCPConnector(ssl=cluster.client_ssl_context())
    headers = {"Authorization": f"Bearer {cluster.token_for('admin')}"}
    url = cluster.url + "/api/v1/namespaces/default/services"
    async with aiohttp.ClientSession(connector=conn, headers=headers) as session:
        for i in range(5):
            sent = service(f"s{i}", svc_type="NodePort")
            sent["spec"]["typo"] = 1
            async with session.post(url, json=sent) as resp:
                assert resp.status == 201, await resp.text()
                assert resp.headers.getall("Warning") == ['299 - "unknown field \\"spec.typo\\""']
                created = await resp.json()
            spec = created["spec"]
            assert "typo" not in spec
            assert spec["clusterIP"] == spec["clusterIPs"][0]
            assert spec["ports"][0]["protocol"] == "TCP"
            assert spec["ports"][0]["targetPort"] == 80
            assert 30000 <= spec["ports"][0]["nodePort"] <= 32767
            assert (spec["sessionAffinity"], spec["externalTrafficPolicy"]) == ("None", "Cluster")
    assert prunes.calls == 5  # once per create: the allocation keeps the Go types
    assert deep.calls == 0
    stored = cluster.storage.get("v1", "Service", "s4", "default")
    assert stored["spec"] == created["spec"]


def _crd_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["image"],
                "x-kubernetes-validations": [{"rule": "self.replicas >= 0", "message": "negative"}],
                "properties": {
                    "image": {"type": "string", "maxLength": 10},
                    "replicas": {"type": "integer"},
                    "env": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
                },
            },
            "status": {"type": "object", "properties": {"state": {"type": "string"}}},
        },
    }  # fmt: skip


def test_a_status_write_does_not_validate_the_spec_it_leaves_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from localcluster import schema as crschema
    from localcluster import schema_validate

    visits = _Counted(schema_validate._validate_node)
    monkeypatch.setattr(schema_validate, "_validate_node", visits)
    walks = _Counted(cel._walk)
    monkeypatch.setattr(cel, "_walk", walks)
    sch = _crd_schema()
    old = {"metadata": {"name": "a"}, "spec": {"image": "i", "replicas": 1, "env": [{"name": "A"}]}}
    for i in range(N):
        new = {**copy.deepcopy(old), "status": {"state": f"s{i}"}}
        assert crschema.validate_custom_resource(sch, new, old) == []
    # the root, status and status.state only (the spec's 6 nodes are not visited)
    assert (visits.calls, walks.calls) == (3 * N, 3 * N)
    # a spec stored before a stricter schema is still left alone (ratcheting), as before
    legacy = {"metadata": {"name": "a"}, "spec": {"image": "much-too-long", "replicas": -1}}
    write = {**copy.deepcopy(legacy), "status": {"state": "x"}}
    assert crschema.validate_custom_resource(sch, write, legacy) == []
    # a changed spec is validated, and judged against the old one
    changed = {"metadata": {"name": "a"}, "spec": {"image": "much-too-long", "replicas": -2}}
    messages = [c["message"] for c in crschema.validate_custom_resource(sch, changed, legacy)]
    # image unchanged (its too-long value ratcheted); replicas changed: the rule fails
    assert messages == ['Invalid value: "object": negative']
    # on create everything is validated
    created = crschema.validate_custom_resource(sch, changed, None)
    assert sorted(c["field"] for c in created) == ["spec", "spec.image"]
    # equal by == is not the same value: 1.0 where an integer is declared is refused
    floated = {
        "metadata": {"name": "a"},
        "spec": {"image": "i", "replicas": 1.0, "env": [{"name": "A"}]},
    }
    assert crschema.unchanged_fields(floated, old) == frozenset()
    assert crschema.unchanged_fields({**old, "status": {}}, old) == frozenset({"spec"})
    # every answer is the one validating everything gives
    cases = [(new, old), (write, legacy), (changed, legacy), (changed, None), (floated, old)]
    answers = [crschema.validate_custom_resource(sch, n, o) for n, o in cases]
    monkeypatch.setattr(crschema, "unchanged_fields", lambda _n, _o: frozenset())
    assert answers == [crschema.validate_custom_resource(sch, n, o) for n, o in cases]


def test_a_service_account_token_s_claims_are_read_once(cluster: LocalCluster) -> None:
    storage = cluster.storage
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "nim"}})
    sa = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "robot", "namespace": "nim"},
    }
    uid = storage.create(sa)["metadata"]["uid"]
    issuer = cluster.token_issuer
    now = int(issuer.clock())
    token = issuer.sign(
        {
            "aud": [ISSUER], "exp": now + 600, "iat": now, "nbf": now, "iss": ISSUER,
            "sub": "system:serviceaccount:nim:robot",
            "kubernetes.io": {"namespace": "nim", "serviceaccount": {"name": "robot", "uid": uid}},
        }
    )  # fmt: skip
    claims = _Counted(issuer.claims)
    issuer.claims = claims  # type: ignore[method-assign]
    for _ in range(N):
        assert cluster.user_for_token(token) is not None
    assert claims.calls == 1
    # still refused once expired, and once its account is gone
    real_clock = issuer.clock
    issuer.clock = lambda: real_clock() + 3600
    assert cluster.user_for_token(token) is None
    issuer.clock = real_clock
    assert cluster.user_for_token(token) is not None
    storage.delete("v1", "ServiceAccount", "robot", "nim")
    assert cluster.user_for_token(token) is None
    storage.create(sa)  # another uid
    assert cluster.user_for_token(token) is None


def test_an_audit_record_formats_its_time_when_first_read(monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime

    log = AuditLog(max_records=N)
    formats = _Counted(datetime.datetime.isoformat)
    stamps = [1_764_326_843.123456 + i for i in range(N)]
    for i, stamp in enumerate(stamps):
        log._append(
            AuditRecord(i, stamp, "u", (), "create", "", "v1", "configmaps", "", "ns", f"n{i}", "POST", "/", "", 201)
        )  # fmt: skip

    class _Datetime(datetime.datetime):
        def isoformat(self, sep: str = "T", timespec: str = "auto") -> str:
            out: str = formats(self, sep, timespec)
            return out

    from localcluster import audit

    monkeypatch.setattr(audit, "datetime", SimpleNamespace(datetime=_Datetime, UTC=datetime.UTC))
    for _poll in range(3):
        served = [json.loads(r.encoded())["timestamp"] for r in log.records()]
    assert formats.calls == N
    assert [r.timestamp for r in log.records()] == served  # the attribute reads the same text
    assert served == [
        datetime.datetime.fromtimestamp(s, datetime.UTC).isoformat(timespec="microseconds")
        for s in stamps
    ]


async def test_nan_and_infinity_in_a_json_body_are_refused_as_go_s_decoder_does(
    cluster: LocalCluster,
) -> None:
    conn = aiohttp.TCPConnector(ssl=cluster.client_ssl_context())
    headers = {
        "Authorization": f"Bearer {cluster.token_for('admin')}",
        "Content-Type": "application/json",
    }
    url = cluster.url + "/api/v1/namespaces/default/configmaps"
    words = {
        "NaN": "invalid character 'N' looking for beginning of value",
        "Infinity": "invalid character 'I' looking for beginning of value",
        "-Infinity": "invalid character 'I' in numeric literal",
    }
    async with aiohttp.ClientSession(connector=conn, headers=headers) as session:
        for constant, message in words.items():
            body = '{"apiVersion":"v1","kind":"ConfigMap","data":{"a":' + constant + "}}"
            async with session.post(url, data=body) as resp:
                assert resp.status == 400
                status = await resp.json()
            assert status["kind"] == "Status"
            assert status["reason"] == "BadRequest"
            assert status["message"] == f"couldn't get version/kind; json parse error: {message}"
        # and a merge patch the same
        ok = '{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}'
        async with session.post(url, data=ok) as resp:
            assert resp.status == 201
        patch_headers = {"Content-Type": "application/merge-patch+json"}
        async with session.patch(
            f"{url}/c", data='{"data":{"a":NaN}}', headers=patch_headers
        ) as resp:
            assert resp.status == 400
            assert words["NaN"] in (await resp.json())["message"]
    assert "a" not in (cluster.storage.get("v1", "ConfigMap", "c", "default").get("data") or {})
