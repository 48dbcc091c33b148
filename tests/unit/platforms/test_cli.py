"""``nimctl render``: offline output a user can read, and errors naming file and field."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from nimctl.cli import main as nimctl_main
from platforms.cli import main

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


def _render(tmp_path: Path, text: str, cache: str | None = None) -> tuple[int, list[dict], str]:
    path = tmp_path / "cr.yaml"
    path.write_text(text)
    out = io.StringIO()
    code = main(str(path), cache, out=out)
    docs = [d for d in YAML(typ="safe").load_all(out.getvalue()) if d]
    return code, docs, str(path)


def test_renders_nimcache_and_nimservice_from_one_file(capsys: pytest.CaptureFixture[str]) -> None:
    out = io.StringIO()
    assert main(str(EXAMPLES / "nim-minimal.yaml"), None, out=out) == 0
    docs = list(YAML(typ="safe").load_all(out.getvalue()))
    kinds = [d["kind"] for d in docs]
    assert kinds[:3] == ["ServiceAccount", "Role", "RoleBinding"]
    assert "PersistentVolumeClaim" in kinds and "Pod" in kinds and "Deployment" in kinds
    dep = next(d for d in docs if d["kind"] == "Deployment")
    volumes = dep["spec"]["template"]["spec"]["volumes"]
    claim = next(v for v in volumes if v["name"] == "model-store")["persistentVolumeClaim"]
    assert claim["claimName"] == "meta-llama-3-2-1b-instruct-pvc"


def test_missing_cache_is_assumed_ready_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    service_only = (EXAMPLES / "nimservice-router-ingress.yaml").read_text().split("---")[-1]
    code, docs, _ = _render(tmp_path, service_only)
    assert code == 0
    assert "Ingress" in [d["kind"] for d in docs]
    assert "NIMCache meta-llama3-8b-instruct not given" in capsys.readouterr().err


def test_cache_file_resolves_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache.yaml"
    cache.write_text(
        (EXAMPLES / "nim-hf-multi-llm.yaml")
        .read_text()
        .split("---")[0]
        .replace("qwen2-5-0-5b-instruct", "meta-llama3-8b-instruct")
    )
    code, docs, _ = _render(
        tmp_path, (EXAMPLES / "nimservice-gateway-httproute.yaml").read_text(), str(cache)
    )
    assert code == 0
    dep = next(d for d in docs if d["kind"] == "Deployment")
    env = {
        e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["NIM_MODEL_PATH"] == "hf://Qwen/Qwen2.5-0.5B-Instruct"


def test_pipeline_renders_enabled_services_only(tmp_path: Path) -> None:
    text = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMPipeline
metadata: {name: p, namespace: ns}
spec:
  services:
    - name: svc-a
      enabled: true
      spec:
        image: {repository: r, tag: t}
        storage: {emptyDir: {}}
      dependencies:
        - {name: svc-b, port: 8000, envName: DEP_URL, envValue: "http://svc-b:8000"}
    - name: svc-b
      spec:
        image: {repository: r, tag: t}
        storage: {emptyDir: {}}
"""
    code, docs, _ = _render(tmp_path, text)
    assert code == 0
    assert {d["metadata"]["name"] for d in docs} == {"svc-a"}
    dep = next(d for d in docs if d["kind"] == "Deployment")
    env = {
        e["name"]: e.get("value") for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["DEP_URL"] == "http://svc-b:8000"


def test_invalid_field_names_file_and_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = (EXAMPLES / "nimservice-emptydir.yaml").read_text().replace("port: 8000", "port: eighty")
    code, docs, path = _render(tmp_path, text)
    assert code == 1 and docs == []
    err = capsys.readouterr().err
    assert path in err and "spec.expose.service.port" in err


def test_render_errors_name_the_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = """
apiVersion: apps.nvidia.com/v1alpha1
kind: NIMService
metadata: {name: broken, namespace: ns}
spec:
  image: {repository: r, tag: t}
  storage: {pvc: {create: true}}
"""
    code, _, path = _render(tmp_path, text)
    assert code == 1
    err = capsys.readouterr().err
    assert f"{path}: NIMService broken: failed to parse size for pvc creation broken-pvc" in err


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n", "no kind 'ConfigMap'"),
        ("kind: [unclosed\n", "not valid YAML"),
    ],
)
def test_unsupported_or_broken_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, fragment: str
) -> None:
    code, _, path = _render(tmp_path, text)
    assert code == 1
    err = capsys.readouterr().err
    assert path in err and fragment in err


def test_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main("/nonexistent/cr.yaml", None) == 1
    assert "/nonexistent/cr.yaml" in capsys.readouterr().err


def test_nimctl_render_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert nimctl_main(["render", "-f", str(EXAMPLES / "nimservice-emptydir.yaml")]) == 0
    docs = list(YAML(typ="safe").load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs][-1] == "Deployment"


def test_nimcache_with_explicit_profiles_shows_its_job(tmp_path: Path) -> None:
    code, docs, _ = _render(tmp_path, (EXAMPLES / "nimcache-ngc-profiles.yaml").read_text())
    assert code == 0
    job = next(d for d in docs if d["kind"] == "Job")
    ctr = job["spec"]["template"]["spec"]["containers"][0]
    assert ctr["command"] == ["download-to-cache"]
    assert ctr["args"][0] == "--profiles" and len(ctr["args"]) == 3
    assert [d["kind"] for d in docs][:3] == ["ServiceAccount", "Role", "RoleBinding"]


def test_render_is_stable_across_runs(tmp_path: Path) -> None:
    first = _render(tmp_path, (EXAMPLES / "nimservice-full.yaml").read_text())
    second = _render(tmp_path, (EXAMPLES / "nimservice-full.yaml").read_text())
    assert first[0] == second[0] == 0 and first[1] == second[1]


def test_empty_file_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing here\n")
    assert main(str(empty), None) == 1
    assert "no objects found" in capsys.readouterr().err
