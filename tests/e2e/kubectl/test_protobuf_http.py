"""Go clients that ask for protobuf first get protobuf answers, as from kube-apiserver."""

from __future__ import annotations

import ssl

import aiohttp

from localcluster.cluster import LocalCluster
from localcluster.protobuf import decode
from tests.unit.localcluster.protobuf.test_protobuf import DEPLOYMENT


async def test_clients_that_ask_for_protobuf_first_get_protobuf() -> None:
    async with LocalCluster(simulator=False) as cluster:
        context = ssl.create_default_context(cadata=cluster.ca_pem.decode())
        headers = {"Authorization": f"Bearer {cluster.token_for('admin')}"}
        url = f"{cluster.url}/apis/apps/v1/namespaces/default/deployments"
        async with aiohttp.ClientSession(headers=headers) as session:
            created = await session.post(
                url,
                data=DEPLOYMENT,
                headers={
                    "Content-Type": "application/vnd.kubernetes.protobuf",
                    "Accept": "application/vnd.kubernetes.protobuf,application/json",
                },
                ssl=context,
            )
            assert created.status == 201
            assert created.content_type == "application/vnd.kubernetes.protobuf"
            obj = decode(await created.read())
            assert obj["metadata"]["name"] == "web" and obj["metadata"]["uid"]
            assert obj["spec"]["template"]["spec"]["restartPolicy"] == "Always"  # defaulted
            listed = await session.get(
                url, headers={"Accept": "application/vnd.kubernetes.protobuf"}, ssl=context
            )
            items = decode(await listed.read())
            assert items["kind"] == "DeploymentList" and len(items["items"]) == 1
            missing = await session.get(
                f"{url}/nope",
                headers={"Accept": "application/vnd.kubernetes.protobuf"},
                ssl=context,
            )
            assert missing.status == 404
            status = decode(await missing.read())
            assert (status["kind"], status["reason"], status["code"]) == ("Status", "NotFound", 404)
            as_json = await session.get(f"{url}/web", ssl=context)
            assert as_json.content_type == "application/json"
