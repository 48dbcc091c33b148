"""The simulated image catalog: what a container "prints" and how it exits.

No container engine runs in localcluster, so a container's behaviour comes from
this catalog. A rule matches an image reference (``fnmatch`` pattern, tried
against the full reference and against it without tag/digest) and, optionally,
a substring of the container's command line (``command`` + ``args`` joined by
spaces). The first matching rule wins; rules a test adds with
:meth:`ImageCatalog.set` come before the built-in ones. An image no rule
matches runs forever and prints nothing.

Whether an image can be pulled at all is decided by ``registries.py`` (which
repositories and tags exist, which need credentials); an image a test added a
rule for here counts as existing.

Built-in rules make NVIDIA's NIM images behave as the NIM Operator expects: the
``cat .../model_manifest.yaml`` probe prints a model manifest and keeps
running, the caching commands (``download-to-cache``, ``create-model-store``,
``huggingface-cli download``) print progress and exit 0, and a NIM itself prints
a start-up log naming the model its image serves (``registries.served_model``).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass

from localcluster.catalog_nemo import NEMO_RULES

# The model manifest every simulated NIM prints for ``cat .../model_manifest.yaml``:
# ``{model}``, ``{version}`` and ``{image}`` are the image's served model, its tag and
# the image itself (``render_logs``), so a NIMCache of the 3.2-1b NIM caches
# profiles of meta/llama-3.2-1b-instruct. Profiles: TensorRT-LLM H100 tp2 fp8
# latency and tp1 bf16 throughput, vLLM tp1 bf16, and TensorRT-LLM H100 tp8 pp2
# fp8 throughput for the multi-node examples (tensor parallelism 8 on two nodes).
MODEL_MANIFEST_TEMPLATE = """\
8835c31752fbc67ef658b20a9f78e056914fdef0660206d82f252d62fd96064d:
  model: {model}
  release: {version}
  tags:
    feat_lora: 'false'
    gpu: H100
    gpu_device: 2330:10de
    llm_engine: tensorrt_llm
    pp: '1'
    precision: fp8
    profile: latency
    tp: '2'
  container_url: {image}
  workspace: !workspace
    components:
      - dst: trtllm_engine
        src:
          repo_id: ngc://nim/{model}:0.12+2333135a3-h100x2-fp8-latency
193649a2eb95e821309d6023a2cabb31489d3b690a9973c7ab5d1ff58b0aa7eb:
  model: {model}
  release: {version}
  tags:
    feat_lora: 'false'
    gpu: H100
    gpu_device: 2330:10de
    llm_engine: tensorrt_llm
    pp: '1'
    precision: bf16
    profile: throughput
    tp: '1'
  container_url: {image}
  workspace: !workspace
    components:
      - dst: trtllm_engine
        src:
          repo_id: ngc://nim/{model}:0.12+2333135a3-h100x1-bf16-throughput
3bb4e8fe78e5037b05dd618cebb1053347325ad6a1e709e0eb18bb8558362ac5:
  model: {model}
  release: {version}
  tags:
    feat_lora: 'false'
    llm_engine: vllm
    precision: bf16
    tp: '1'
  container_url: {image}
  workspace: !workspace
    components:
      - dst: ''
        src:
          repo_id: ngc://nim/{model}:hf-8c22764-nim1.3b
9e5661cbbe0c82ab452de34b7fe6a6b31f82991ff73ec42109fe7fa44a58c01f:
  model: {model}
  release: {version}
  tags:
    feat_lora: 'false'
    gpu: H100
    gpu_device: 2330:10de
    llm_engine: tensorrt_llm
    pp: '2'
    precision: fp8
    profile: throughput
    tp: '8'
  container_url: {image}
  workspace: !workspace
    components:
      - dst: trtllm_engine
        src:
          repo_id: ngc://nim/{model}:0.12+2333135a3-h100x16-fp8-throughput
"""

# The template as the 8B NIM 1.3.3 prints it (tests read it as a pod log).
SAMPLE_MODEL_MANIFEST = (
    MODEL_MANIFEST_TEMPLATE.replace("{model}", "meta/llama-3.1-8b-instruct")
    .replace("{version}", "1.3.3")
    .replace("{image}", "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3")
)

# A NIM with a ``trtllm_buildable`` profile (NIMBuild builds an engine from it).
BUILDABLE_MODEL_MANIFEST = """\
6e2acb9de10b5e8ab8557946d6852b84d35c412b59a356925ec590f61e0b0458:
  model: meta/llama-3.2-3b-instruct
  release: 1.10.0
  tags:
    feat_lora: 'false'
    gpu: H100
    gpu_device: 2330:10de
    llm_engine: tensorrt_llm
    pp: '1'
    precision: bf16
    profile: throughput
    tp: '1'
24872ba6b72f1f4a734331b657be3b3509f6789288a9ce7e1155f3b0638f5694:
  model: meta/llama-3.2-3b-instruct
  release: 1.10.0
  tags:
    feat_lora: 'false'
    llm_engine: tensorrt_llm
    pp: '1'
    precision: bf16
    tp: '1'
    trtllm_buildable: 'true'
9f725316b4acd70b7afd2f545759d59ffad0845a7c4c13030ee8d66ec48f5e71:
  model: meta/llama-3.2-3b-instruct
  release: 1.10.0
  tags:
    feat_lora: 'false'
    llm_engine: vllm
    precision: bf16
    tp: '1'
"""

# What a NIM prints while it starts. ``{model}``, ``{version}`` and ``{image}`` are
# filled in from the container's image when the logs are read.
NIM_STARTUP_LOG = """\
===========================================
== NVIDIA Inference Microservice: {model} ==
===========================================

NIM version: {version}
Image: {image}

INFO nim.launch: Checking NGC_API_KEY and the model cache at /model-store
INFO nim.profiles: Detected 1 compatible profile(s) for the visible GPUs
INFO nim.profiles: Selected profile 3bb4e8fe78e5 (vllm-bf16-tp1)
INFO nim.model: Loading model {model} from /model-store
INFO nim.model: Model {model} loaded
INFO nim.server: Serving /v1/models, /v1/chat/completions, /v1/completions, /v1/health/ready
INFO uvicorn: Application startup complete.
INFO uvicorn: Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)
"""

CACHE_LOG = """\
INFO Fetching contents for profile
INFO Downloading model files to /model-store
INFO Download complete
"""


@dataclass(frozen=True)
class ContainerBehavior:
    """What a simulated container does once started.

    ``exit_code=None`` means it runs until deleted; otherwise it exits with that
    code ``run_seconds`` (simulated seconds) after starting. ``ready=False``
    keeps a running container un-ready (its readiness probe never passes).
    ``pull_error=True`` means the image cannot be pulled (``ImagePullBackOff``).
    """

    logs: str = ""
    exit_code: int | None = None
    run_seconds: float = 0.0
    ready: bool = True
    pull_error: bool = False


@dataclass(frozen=True)
class CatalogRule:
    """Images matching ``image`` (and whose command line contains ``command``) behave so."""

    image: str
    behavior: ContainerBehavior
    command: str = ""

    def matches(self, image: str, command_line: str) -> bool:
        if self.command and self.command not in command_line:
            return False
        return fnmatch.fnmatchcase(image, self.image) or fnmatch.fnmatchcase(
            strip_tag(image), self.image
        )


RUN_FOREVER = ContainerBehavior()


def strip_tag(image: str) -> str:
    """``repo[:tag][@digest]`` without tag and digest."""
    image = image.split("@", 1)[0]
    slash = image.rfind("/")
    colon = image.rfind(":")
    return image[:colon] if colon > slash else image


def builtin_rules() -> list[CatalogRule]:
    """The rules every catalog starts with (a fresh list each call)."""
    cache_ok = ContainerBehavior(logs=CACHE_LOG, exit_code=0, run_seconds=1.0)
    return [
        CatalogRule(
            "nvcr.io/nim/meta/llama-3.2-3b-instruct",
            ContainerBehavior(logs=BUILDABLE_MODEL_MANIFEST),
            "model_manifest.yaml",
        ),
        CatalogRule("*", ContainerBehavior(logs=MODEL_MANIFEST_TEMPLATE), "model_manifest.yaml"),
        CatalogRule("*", cache_ok, "download-to-cache"),
        CatalogRule("*", cache_ok, "create-model-store"),
        CatalogRule("*", cache_ok, "huggingface-cli download"),
        *(
            CatalogRule(image, ContainerBehavior(logs, exit_code, run_seconds), command)
            for image, command, logs, exit_code, run_seconds in NEMO_RULES
        ),
        CatalogRule("nvcr.io/nim/*", ContainerBehavior(logs=NIM_STARTUP_LOG)),
    ]


def render_logs(logs: str, image: str, model: str) -> str:
    """Fill ``{model}``, ``{version}`` and ``{image}`` in a catalog entry's logs."""
    version = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else "latest"
    return (
        logs.replace("{model}", model or strip_tag(image).split("/", 2)[-1])
        .replace("{version}", version)
        .replace("{image}", image)
    )


class ImageCatalog:
    """An ordered, mutable rule list; tests change it through :meth:`set` and :meth:`reset`."""

    def __init__(self, rules: Iterable[CatalogRule] | None = None) -> None:
        self._custom: list[CatalogRule] = list(rules or [])
        self._builtin = builtin_rules()

    def set(
        self,
        image: str,
        *,
        logs: str = "",
        exit_code: int | None = None,
        run_seconds: float = 0.0,
        ready: bool = True,
        pull_error: bool = False,
        command: str = "",
    ) -> None:
        """Make *image* (a pattern) behave so, ahead of every earlier rule for the same match."""
        behavior = ContainerBehavior(
            logs=logs,
            exit_code=exit_code,
            run_seconds=run_seconds,
            ready=ready,
            pull_error=pull_error,
        )
        self.remove(image, command=command)
        self._custom.insert(0, CatalogRule(image, behavior, command))

    def remove(self, image: str, *, command: str = "") -> None:
        """Drop the test-added rule for exactly this pattern and command substring."""
        self._custom = [r for r in self._custom if (r.image, r.command) != (image, command)]

    def reset(self) -> None:
        """Forget every rule a test added."""
        self._custom.clear()

    def added_for(self, image: str) -> bool:
        """Whether a test added a rule for *image* (such an image exists in its registry)."""
        return any(
            fnmatch.fnmatchcase(image, r.image) or fnmatch.fnmatchcase(strip_tag(image), r.image)
            for r in self._custom
        )

    @property
    def rules(self) -> list[CatalogRule]:
        """All rules in match order."""
        return [*self._custom, *self._builtin]

    def resolve(
        self, image: str, command: Iterable[str] = (), args: Iterable[str] = ()
    ) -> ContainerBehavior:
        """The behaviour of a container running *image* with *command* and *args*."""
        command_line = " ".join([*command, *args])
        for rule in self.rules:
            if rule.matches(image, command_line):
                return rule.behavior
        return RUN_FOREVER
