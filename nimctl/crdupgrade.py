"""``nimctl crds --apply``: server-side apply this version's CRDs, then wait until served.

Helm installs a chart's ``crds/`` once and never upgrades them. The chart's
pre-install/pre-upgrade hook Job (``operator.upgradeCRD``, as NVIDIA's charts'
``upgradeCRD``) runs this command from the operator image, so the CRDs of the
version being installed are applied before the new operator starts. It is also
the one command docs/install.md gives for applying them by hand.

Each CRD is applied with field manager ``nimctl-crds`` and ``force`` (it takes
over the fields Helm or ``kubectl apply`` wrote), then waited for until it is
Established. It needs ``create``, ``get`` and ``patch`` on the CRDs, nothing else.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nimctl_runtime.client.config import RestConfig

FIELD_MANAGER = "nimctl-crds"
CRD_API = "apiextensions.k8s.io/v1"


def _established(crd: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Established" and c.get("status") == "True"
        for c in (crd.get("status") or {}).get("conditions") or []
    )


async def apply_crds(config: RestConfig | str | None = None, *, wait_seconds: float = 60.0) -> int:
    """Apply every CRD; 0 when all are Established, 1 (with the reason on stderr) otherwise.

    *config* is a kubeconfig path or a RestConfig; None finds the cluster as ``run`` does.
    """
    from api.crdgen import generate_crds
    from nimctl_runtime.client import ApiError, Client

    crds = generate_crds()
    async with Client(config) as client:
        for crd in crds:
            name = crd["metadata"]["name"]
            try:
                await client.apply(crd, field_manager=FIELD_MANAGER, force=True)
            except ApiError as exc:
                print(f"nimctl crds --apply: {name}: {exc}", file=sys.stderr)
                return 1
            print(f"customresourcedefinition.apiextensions.k8s.io/{name} serverside-applied")
        pending = {c["metadata"]["name"] for c in crds}
        try:
            async with asyncio.timeout(wait_seconds):
                while pending:
                    for name in sorted(pending):
                        live = await client.get(CRD_API, "CustomResourceDefinition", name)
                        if _established(live):
                            pending.discard(name)
                    if pending:
                        await asyncio.sleep(0.5)
        except TimeoutError:
            print(
                f"nimctl crds --apply: not Established after {wait_seconds:.0f}s: "
                f"{', '.join(sorted(pending))}",
                file=sys.stderr,
            )
            return 1
    return 0
