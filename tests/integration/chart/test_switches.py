"""`nimctl run --disable-nim-controllers / --disable-nemo-controllers /
--disable-gpu-lifecycle` (the chart's nim/nemo/gpu.enabled) each leave out exactly
their group's controllers."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.cluster import LocalCluster
from nimctl.cli import build_parser
from nimctl.operator import compose_operator, install_crds
from nimctl_runtime.client import Client


async def controller_names(client: Client, group: str) -> set[str]:
    """The controllers the setup of *group* adds (recorded, not started)."""
    from controllers.setup import SetupOptions, discover_capabilities, setup_controllers
    from nimctl_runtime.manager import Manager

    manager = Manager(client)
    added: list[Any] = []
    manager.add = added.append  # type: ignore[method-assign]
    environ = {"OPERATOR_NAMESPACE": "nimctl-system"}  # the chart's pod sets it
    options = SetupOptions(capabilities=await discover_capabilities(client), extra={"environ": environ})
    setup_controllers(manager, client, options, groups=(group,))
    return {c.name for c in added if hasattr(c, "watches")}


@pytest.mark.parametrize(
    ("flag", "group"),
    [("--disable-nim-controllers", "nim"), ("--disable-nemo-controllers", "nemo"), ("--disable-gpu-lifecycle", "gpu")],
)
async def test_each_flag_turns_off_its_group_only(
    cluster: LocalCluster, flag: str, group: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPERATOR_NAMESPACE", "nimctl-system")
    async with Client(str(cluster.kubeconfig_path)) as client:
        await install_crds(client)
        names = {g: await controller_names(client, g) for g in ("nim", "nemo", "gpu")}
        assert names[group], f"no controller belongs to {group!r}"
        manager = await compose_operator(client, build_parser().parse_args(["run", flag]), model_query=None)
        for g, group_names in names.items():
            for name in group_names:
                assert manager.has_controller(name) == (g != group), (flag, name)
