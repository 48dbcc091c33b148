"""Issue 19 items 2 and 7: localcluster refuses integer overflow and nesting bombs with a 4xx.

kube-apiserver decodes JSON integers into int64; a larger one becomes a float64,
which a ``type: integer`` field refuses (``must be of type int32: "float64"`` when
the schema has a format). A 2,000-deep body used to end in a 500 RecursionError;
it is a 400 now, for custom and built-in objects alike.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from localcluster.cluster import LocalCluster
from nimctl.operator import install_crds
from nimctl_runtime.client import Client, load_config

NIMSERVICES = "/apis/apps.nvidia.com/v1alpha1/namespaces/default/nimservices"


@pytest.fixture
async def api(cluster: LocalCluster) -> AsyncIterator[tuple[LocalCluster, aiohttp.ClientSession]]:
    async with Client(load_config(str(cluster.kubeconfig_path))) as client:
        await install_crds(client)
    headers = {"Authorization": f"Bearer {cluster.token_for('admin')}"}
    async with aiohttp.ClientSession(headers=headers) as session:
        yield cluster, session


async def _post(
    api: tuple[LocalCluster, aiohttp.ClientSession], path: str, body: str
) -> tuple[int, dict[str, Any]]:
    cluster, session = api
    async with session.post(
        cluster.url + path,
        data=body,
        headers={"Content-Type": "application/json"},
        ssl=cluster.client_ssl_context(),
    ) as r:
        return r.status, await r.json()


def _nimservice(name: str, replicas_literal: str, extra: str = "") -> str:
    return (
        '{"apiVersion":"apps.nvidia.com/v1alpha1","kind":"NIMService",'
        f'"metadata":{{"name":"{name}","namespace":"default"}},'
        '"spec":{"image":{"repository":"nvcr.io/nim/x","tag":"1"},'
        f'"storage":{{"emptyDir":{{}}}},"replicas":{replicas_literal}{extra}}}}}'
    )


@pytest.mark.parametrize("literal", ["18446744073709551616", "9223372036854775808", "1e19"])
async def test_integers_beyond_int64_are_refused_with_the_field_path(
    api: tuple[LocalCluster, aiohttp.ClientSession], literal: str
) -> None:
    status, body = await _post(api, NIMSERVICES, _nimservice("overflow", literal))
    assert status == 422, body
    causes = body["details"]["causes"]
    assert {
        "reason": "FieldValueTypeInvalid",
        "field": "spec.replicas",
        "message": 'Invalid value: "float64": spec.replicas in body must be of type '
        'int32: "float64"',
    } in causes


async def test_int64_integers_pass_the_schema_as_on_kube_apiserver(
    api: tuple[LocalCluster, aiohttp.ClientSession],
) -> None:
    # kube-apiserver does not range-check format int32 within int64; the
    # operator's webhook does (tests/unit/webhooks/test_ranges.py).
    status, body = await _post(api, NIMSERVICES, _nimservice("big", str(2**40)))
    assert status == 201, body
    assert body["spec"]["replicas"] == 2**40


@pytest.mark.parametrize("depth", [250, 2000])
async def test_nesting_bombs_are_400_for_custom_and_built_in_objects(
    api: tuple[LocalCluster, aiohttp.ClientSession], depth: int
) -> None:
    deep = "[" * depth + "]" * depth
    status, body = await _post(api, NIMSERVICES, _nimservice("deep", "1", f',"x":{deep}'))
    assert status == 400, body
    assert body["reason"] == "BadRequest"
    config_map = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "deep", "namespace": "default"},
        }
    )
    status, body = await _post(
        api, "/api/v1/namespaces/default/configmaps", config_map[:-1] + f',"x":{deep}}}'
    )
    assert status == 400, body
    # the server keeps serving
    status, _ = await _post(api, NIMSERVICES, _nimservice("fine", "1"))
    assert status == 201


@pytest.mark.parametrize(
    ("key", "value"), [("name", 7), ("generateName", ["x"]), ("namespace", {})]
)
async def test_object_meta_strings_of_another_type_are_400_not_500(
    api: tuple[LocalCluster, aiohttp.ClientSession], key: str, value: object
) -> None:
    # Found by the fuzz bench: metadata.name: 7 on a custom resource was a 500 TypeError.
    obj = json.loads(_nimservice("typed", "1"))
    obj["metadata"][key] = value
    status, body = await _post(api, NIMSERVICES, json.dumps(obj))
    assert status == 400, body
    assert body["message"].startswith(
        'NIMService in version "v1alpha1" cannot be handled as a NIMService: json: cannot '
        "unmarshal "
    )
    assert f"Go struct field ObjectMeta.metadata.{key} of type string" in body["message"]
