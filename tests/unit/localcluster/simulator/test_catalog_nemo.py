"""The catalog's NeMo entries: the init containers nimctl renders finish, the services run."""

from __future__ import annotations

from typing import Any

from api.serialize import load
from localcluster.catalog import ImageCatalog
from platforms.capabilities import Capabilities
from platforms.nemo.contract import CONTRACTS
from platforms.nemo.demo import sample_crs
from platforms.nemo.facts import NemoFacts
from platforms.nemo.offline import offline_facts


def pod_spec(kind: str, edit: Any = None) -> dict[str, Any]:
    cr = next(c for c in sample_crs() if c.kind == kind)
    if edit is not None:
        obj = cr.model_dump(by_alias=True, exclude_none=True, mode="json")
        edit(obj)
        cr = load(obj)
    facts, _ = offline_facts(cr)
    facts = NemoFacts(Capabilities.nothing(), db_password="x", config_maps=facts.config_maps)
    dep = next(o for o in CONTRACTS[kind].render(cr, facts) if o["kind"] == "Deployment")
    spec: dict[str, Any] = dep["spec"]["template"]["spec"]
    return spec


def test_migrations_and_init_scripts_exit_zero_and_services_keep_running() -> None:
    catalog = ImageCatalog()

    def with_db(o: dict[str, Any]) -> None:
        o["spec"]["databaseConfig"] = {
            "host": "pg",
            "databaseName": "g",
            "credentials": {"user": "u", "secretName": "s"},
        }

    specs = [pod_spec(k) for k in ("NemoDatastore", "NemoEntitystore", "NemoEvaluator")]
    specs.append(pod_spec("NemoGuardrail", with_db))
    for spec in specs:
        for init in spec["initContainers"]:
            if init["name"] == "wait-for-postgres":
                continue  # held by simulator.tcpwait, not the catalog
            b = catalog.resolve(init["image"], init.get("command") or (), init.get("args") or ())
            assert (b.exit_code, b.run_seconds) == (0, 1.0), init["name"]
            assert b.logs, init["name"]
        main = spec["containers"][0]
        b = catalog.resolve(main["image"], main.get("command") or (), main.get("args") or ())
        assert b.exit_code is None and "Application startup complete" in b.logs
