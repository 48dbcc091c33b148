"""CRDs follow ``helm upgrade``: the chart's pre-install/pre-upgrade hook Job runs
``nimctl crds --apply`` as its own ServiceAccount, with RBAC enforced on a LocalCluster.

The cluster holds the CRDs of an "older release" (one CRD's schema lacks a field, one
CRD does not exist yet); the hook's command, run exactly as the Job runs it and with
only the hook's ClusterRole, brings both to this version, and every permission that
ClusterRole grants was needed."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from localcluster.authz import enable_rbac, service_account_user
from localcluster.cluster import LocalCluster
from nimctl.cli import build_parser
from nimctl.crdupgrade import apply_crds
from nimctl_runtime.client import Client, NotFound
from nimctl_runtime.client.config import in_cluster_config
from tests.integration.chart.helm import chart_crds, find, notes, render, require_helm
from tests.integration.chart.test_chart_install import granted_atoms_of, used

NS = "nimctl-system"
CRD_API = "apiextensions.k8s.io/v1"
CHANGED = "nimservices.apps.nvidia.com"
NEW = "nvidiadrivers.nvidia.com"
INSTALL_MD = Path(__file__).resolve().parents[3] / "docs" / "install.md"


def hooks(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if "helm.sh/hook" in (o["metadata"].get("annotations") or {})]


def older_release(crds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chart's CRDs as an older release had them: no spec.replicas on NIMService, no NVIDIADriver."""
    out = []
    for crd in copy.deepcopy(crds):
        name = crd["metadata"]["name"]
        if name == NEW:
            continue
        if name == CHANGED:
            for version in crd["spec"]["versions"]:
                del version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["replicas"]
        out.append(crd)
    return out


def has_replicas(crd: dict[str, Any]) -> bool:
    version = crd["spec"]["versions"][0]
    return "replicas" in version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]


def test_the_hook_runs_before_install_and_upgrade_and_can_be_switched_off() -> None:
    objects = render({})
    hook_objects = hooks(objects)
    assert sorted(o["kind"] for o in hook_objects) == ["ClusterRole", "ClusterRoleBinding", "Job", "ServiceAccount"]
    for obj in hook_objects:
        assert obj["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    job = find(objects, "Job")
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    args = build_parser().parse_args(container["args"])
    assert (args.command, args.apply) == ("crds", True)
    assert job["spec"]["template"]["spec"]["serviceAccountName"] == find(hook_objects, "ServiceAccount")["metadata"]["name"]
    assert hooks(render({"operator": {"upgradeCRD": False}})) == []


def test_notes_and_install_md_give_the_same_crd_command() -> None:
    on, off = notes({}), notes({"operator": {"upgradeCRD": False}})
    command = "kubectl apply --server-side --force-conflicts -f charts/nimctl/crds/"
    assert command in on and command in off
    assert "hook Job applied this version's CRDs" in on
    assert "never upgrades them" in off
    assert command in INSTALL_MD.read_text()


async def test_hook_upgrades_changed_and_new_crds_with_only_its_own_rbac(tmp_path: Path) -> None:
    require_helm()
    objects = render({}, namespace=NS)
    hook_objects = hooks(objects)
    job = find(hook_objects, "Job")
    sa = job["spec"]["template"]["spec"]["serviceAccountName"]
    async with LocalCluster(simulator=False, workdir=tmp_path / "cluster") as cluster:
        admin = Client(str(cluster.kubeconfig_path))
        try:
            await admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
            for crd in older_release(chart_crds()):
                await admin.create(crd)
            assert not has_replicas(await admin.get(CRD_API, "CustomResourceDefinition", CHANGED))
            authorizer = enable_rbac(cluster)
            for obj in hook_objects:
                if obj["kind"] != "Job":
                    await admin.create(obj)
            user = service_account_user(NS, sa)
            sa_dir = tmp_path / "sa"
            sa_dir.mkdir()
            (sa_dir / "token").write_text(cluster.token_for(user))
            (sa_dir / "ca.crt").write_bytes(cluster.ca_pem)
            (sa_dir / "namespace").write_text(NS)
            config = in_cluster_config(
                sa_dir, environ={"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(cluster.port)}
            )
            assert await apply_crds(config, wait_seconds=30) == 0

            assert has_replicas(await admin.get(CRD_API, "CustomResourceDefinition", CHANGED))
            created = await admin.get(CRD_API, "CustomResourceDefinition", NEW)
            assert any(c["type"] == "Established" and c["status"] == "True" for c in created["status"]["conditions"])
            decisions = authorizer.decisions(user)
            assert all(allowed for _, allowed in decisions), [a for a, ok in decisions if not ok]
            granted = granted_atoms_of(hook_objects)
            # get and patch were needed on every CRD of the chart; create on the one that
            # was new (any of them is new on a first install, or in the release adding it)
            unused = [a for a in granted if not used(a, decisions) and a[0] != "create"]
            assert unused == [], f"the hook's ClusterRole grants more than it uses: {unused}"
            assert {a[0] for a in granted} == {"create", "get", "patch"}
            assert used(("create", "apiextensions.k8s.io", "customresourcedefinitions", NEW), decisions)
            # and nothing beyond the CRDs
            assert {(a.api_group, a.resource) for a, _ in decisions if a.resource_request} == {
                ("apiextensions.k8s.io", "customresourcedefinitions")
            }
            # a second run (the next upgrade, nothing changed) succeeds too
            assert await apply_crds(config, wait_seconds=30) == 0
        finally:
            await admin.close()


async def test_without_the_hooks_rbac_it_is_refused_saying_so(tmp_path: Path, capsys: Any) -> None:
    async with LocalCluster(simulator=False, workdir=tmp_path / "cluster") as cluster:
        enable_rbac(cluster)
        user = service_account_user(NS, "someone")
        sa_dir = tmp_path / "sa"
        sa_dir.mkdir()
        (sa_dir / "token").write_text(cluster.token_for(user))
        (sa_dir / "ca.crt").write_bytes(cluster.ca_pem)
        (sa_dir / "namespace").write_text(NS)
        config = in_cluster_config(
            sa_dir, environ={"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(cluster.port)}
        )
        assert await apply_crds(config, wait_seconds=5) == 1
        async with Client(str(cluster.kubeconfig_path)) as admin:
            try:
                await admin.get(CRD_API, "CustomResourceDefinition", NEW)
                raise AssertionError("a CRD was created without permission")
            except NotFound:
                pass
    assert "forbidden" in capsys.readouterr().err.lower()
