"""``nimctl render`` on NVIDIA's NeMo samples: the contract's objects, with placeholders."""

from __future__ import annotations

import base64
import io
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from platforms.cli import main

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("nemo-customizer.yaml", {"ConfigMap", "Secret", "PersistentVolumeClaim", "Deployment"}),
        ("nemo-datastore.yaml", {"PersistentVolumeClaim", "Deployment"}),
        ("nemo-entitystore.yaml", {"Deployment"}),
        ("nemo-evaluator.yaml", {"Secret", "Ingress", "Deployment"}),
        ("nemo-guardrail.yaml", {"HTTPRoute", "HorizontalPodAutoscaler", "ServiceMonitor"}),
    ],
)
def test_render_prints_what_the_operator_creates(
    name: str, kinds: set[str], capsys: pytest.CaptureFixture[str]
) -> None:
    out = io.StringIO()
    assert main(str(EXAMPLES / name), None, out=out) == 0
    objs = list(YAML(typ="safe").load_all(out.getvalue()))
    assert kinds | {"ServiceAccount", "Role", "RoleBinding", "Service"} <= {o["kind"] for o in objs}
    for secret in (o for o in objs if o["kind"] == "Secret"):
        value = base64.b64decode(next(iter(secret["data"].values()))).decode()
        assert "<password from Secret" in value
        assert "note: " in capsys.readouterr().err
