"""The facts ``nimctl render`` uses for a NeMo CR, with no cluster to read them from.

The DB password becomes a visible placeholder naming its Secret and key (so the
rendered DSN/URI Secret shows where the value comes from), the ConfigMaps the
Customizer reads are taken as empty, and the capabilities as "everything
installed" (HTTPRoute, ServiceMonitor). Each assumption is returned as a note
for stderr.
"""

from __future__ import annotations

from api.base import CustomResource
from platforms.capabilities import Capabilities
from platforms.nemo.contract import requirements
from platforms.nemo.facts import NemoFacts

__all__ = ["offline_facts"]

EMPTY_CONFIG = {
    "models": "{}\n",
    "customizationTargets": "{}\n",
    "customizationConfigTemplates": "{}\n",
    "training": "{}\n",
}


def offline_facts(cr: CustomResource) -> tuple[NemoFacts, list[str]]:
    """Facts for rendering ``cr`` offline, and the notes saying what was assumed."""
    req = requirements(cr)
    where = f"{cr.kind} {cr.metadata.name}"
    notes: list[str] = []
    password = None
    if req.password is not None and req.password.read:
        password = f"<password from Secret {req.password.secret} key {req.password.key}>"
        notes.append(f"{where}: the database password is shown as a placeholder")
    config_maps = {}
    for name in req.config_maps:
        config_maps[name] = dict(EMPTY_CONFIG)
        notes.append(f"{where}: ConfigMap {name} is not read offline; taken as empty")
    facts = NemoFacts(
        capabilities=Capabilities.everything(),
        db_password=password,
        config_maps=config_maps,
    )
    return facts, notes
