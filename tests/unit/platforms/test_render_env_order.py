"""The NIM container's env in NVIDIA's order: a different order is a different pod template.

On a real API server NVIDIA's HF and multi-LLM samples run with ``NGC_API_KEY``
(optional) and ``HF_TOKEN`` first and the ``NIM_*`` block after them.
"""

from __future__ import annotations

from platforms.standalone import RenderContext, render
from tests.unit.platforms.helpers import main_container, nimcache, nimservice
from tests.unit.platforms.test_render_nimservice import HF_SOURCE

STANDARD = [
    "NIM_CACHE_PATH",
    "OUTLINES_CACHE_DIR",
    "NIM_SERVER_PORT",
    "NIM_HTTP_API_PORT",
    "NIM_JSONL_LOGGING",
    "NIM_LOG_LEVEL",
]


def names(svc: dict[str, object], ctx: RenderContext | None = None) -> list[str]:
    return [e["name"] for e in main_container(render(svc, ctx))["env"]]


def test_hf_cache_puts_the_credentials_first() -> None:
    svc = nimservice({"storage": {"nimCache": {"name": "cache"}}})
    env = names(svc, RenderContext(nimcache=nimcache(HF_SOURCE)))
    assert env[:2] == ["NGC_API_KEY", "HF_TOKEN"]
    assert env[2:8] == STANDARD
    assert env[8:] == ["NIM_MODEL_NAME", "HF_HOME", "NIM_MODEL_PATH"]


def test_multi_llm_model_name_puts_the_credentials_first() -> None:
    svc = nimservice({"env": [{"name": "NIM_MODEL_NAME", "value": "hf://Qwen/Qwen2.5-0.5B"}]})
    env = names(svc)
    assert env[:2] == ["NGC_API_KEY", "HF_TOKEN"]
    assert sorted(env[2:]) == sorted([*STANDARD, "NIM_MODEL_NAME"])


def test_ngc_nim_keeps_its_key_after_the_standard_block() -> None:
    assert names(nimservice()) == [*STANDARD, "NGC_API_KEY"]
