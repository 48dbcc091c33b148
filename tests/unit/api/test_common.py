"""Shared shapes the NeMo kinds build on (ExposeV1, IngressV1) keep NVIDIA's rules,
and ``nimctl crds`` writes the CRDs to stdout or one file per kind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from api.apps.v1alpha1.common import ExposeV1
from api.crdgen import crd_file_name, generate_crds, main


@pytest.mark.parametrize(
    ("expose", "message"),
    [
        ({"service": {"grpcPort": 9000}}, "unsupported field: spec.expose.service.grpcPort"),
        ({"service": {"metricsPort": 9000}}, "unsupported field: spec.expose.service.metricsPort"),
        (
            {"service": {}, "router": {"gateway": {"namespace": "g", "name": "g",
                                                   "grpcRoutesEnabled": True}}},
            "unsupported field: spec.expose.router.gateway.grpcRoutesEnabled",
        ),
        ({"service": {}, "ingress": {"enabled": True}}, "spec cannot be nil when ingress is enabled"),
    ],
)
def test_nemo_expose_rules(expose: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        ExposeV1.model_validate(expose)
    assert message in str(info.value)


def test_nemo_expose_accepts_nvidia_shape() -> None:
    expose = ExposeV1.model_validate(
        {
            "service": {"type": "ClusterIP", "port": 8000},
            "ingress": {"enabled": True, "spec": {"ingressClassName": "nginx", "host": "h",
                                                  "paths": [{}]}},
        }
    )
    assert expose.ingress is not None and expose.ingress.spec is not None
    paths = expose.ingress.spec.paths
    assert paths is not None and paths[0].path == "/" and paths[0].path_type == "Prefix"


def test_crds_command_writes_one_file_per_kind(tmp_path: Path) -> None:
    assert main(str(tmp_path)) == 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert "apps.nvidia.com_nimservices.yaml" in names
    assert "apps.nvidia.com_nimcaches.yaml" in names


def test_crds_command_streams_to_stdout() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "nimctl", "crds"],
        check=True, capture_output=True, text=True, timeout=60,
    ).stdout
    # Every CRD, byte for byte as committed (tests/unit/api/test_crds.py keeps those current).
    crd_dir = Path(__file__).resolve().parents[3] / "charts" / "nimctl" / "crds"
    expected = "".join((crd_dir / crd_file_name(c)).read_text() for c in generate_crds())
    assert out == expected
    assert "kind: NIMService\n" in out and "kind: NIMBuild\n" in out
