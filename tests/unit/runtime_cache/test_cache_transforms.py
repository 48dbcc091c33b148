"""Issue 18 (memory): the operator's cache transforms drop only what no controller reads.

The CRD cache keeps what the NIMService controller's CRD watch reads (served
versions, kind, ``Established``, deletion) and drops the schemas; the
wiring applies it to the operator's cache.
"""

from __future__ import annotations

import copy
import pickle
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from controllers.nimservice import crd_established, crd_gvks
from controllers.wiring import CRD, crd_without_schemas, filtered_cache_options
from nimctl_runtime.cache.store import Store
from platforms.capabilities import Capabilities

CRDS = Path(__file__).parents[3] / "charts" / "nimctl" / "crds"


def _nimservice_crd() -> dict[str, Any]:
    crd: dict[str, Any] = YAML(typ="safe").load(
        (CRDS / "apps.nvidia.com_nimservices.yaml").read_text()
    )
    crd["metadata"].update(
        uid="u1",
        resourceVersion="7",
        deletionTimestamp="2026-11-24T00:00:00Z",
        annotations={"kubectl.kubernetes.io/last-applied-configuration": "{" + "x" * 50_000 + "}"},
        managedFields=[{"manager": "kubectl"}],
    )
    crd["spec"]["versions"].append({"name": "v1beta9", "served": False, "storage": False})
    crd["status"] = {"conditions": [{"type": "Established", "status": "True"}]}
    return crd


def test_the_crd_transform_keeps_what_the_crd_watch_reads() -> None:
    crd = _nimservice_crd()
    slim = crd_without_schemas(copy.deepcopy(crd))
    assert crd_gvks(slim) == crd_gvks(crd) == [("apps.nvidia.com/v1alpha1", "NIMService")]
    assert crd_established(slim) and slim["metadata"]["deletionTimestamp"]
    assert slim["spec"]["names"] == crd["spec"]["names"]
    assert [v["served"] for v in slim["spec"]["versions"]] == [True, False]


def test_the_crd_cache_holds_a_small_fraction_of_the_crd() -> None:
    crd = _nimservice_crd()
    full = len(pickle.dumps(crd))
    store = Store(transform=filtered_cache_options(Capabilities.nothing())[CRD].transform)
    store.upsert(crd)
    assert store.size_bytes() * 20 < full, (store.size_bytes(), full)
