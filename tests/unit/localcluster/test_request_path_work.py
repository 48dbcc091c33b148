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
