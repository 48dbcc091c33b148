"""The simulated image registries: which repositories and tags exist, which need credentials.

No registry is reachable from localcluster, so whether a pull succeeds comes from
this table, as data: a new image is one line in :data:`REPOSITORIES` (or one
model name in :data:`NIM_MODELS`).

* A *closed* registry host (``nvcr.io``) serves only the repositories listed for
  it: a misspelt repository or a tag that does not match the repository's tag
  pattern is "not found", as on the real registry.
* Other hosts (``docker.io``, ``registry.example.com`` ...) are open: any
  repository and tag exists, unless a listed repository says otherwise.
* A repository with ``auth=True`` (NIM and NeMo images on nvcr.io) can only be
  pulled with credentials for its host: an image pull secret of type
  ``kubernetes.io/dockerconfigjson`` (or ``dockercfg``) whose ``auths`` name the
  host. Without them nvcr.io answers 401 Unauthorized.
* ``model`` is the model a NIM image serves (what ``GET /v1/models`` returns).
* A NIM repository knows its released tags (:data:`NIM_RELEASES`, per model):
  each release (``1.8.4``), its ``major.minor`` moving tag (``1.8``) and
  ``latest``. Any other tag, however version-shaped (``9.99.99``), is "not
  found", as nvcr.io answers.

:func:`parse_reference` normalises an image reference the way containerd does
(``nginx`` is ``docker.io/library/nginx:latest``); :func:`find_repository` and
:func:`pull_problem` answer "does this pull succeed, and if not, what does the
kubelet say".
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from urllib.parse import quote

# A released version (1.3.3, 1.8.4, 25.08, v0.20.0, 4.6.0-4.8.3-distroless) or latest.
RELEASE_TAGS = r"(latest|v?\d+(\.\d+)*([-+][0-9A-Za-z.-]+)?)"
ANY_TAG = r".+"


@dataclass(frozen=True)
class Registry:
    """One registry host; a closed one serves only its listed repositories."""

    host: str
    closed: bool = False
    token_url: str = ""


@dataclass(frozen=True)
class Repository:
    """A repository (``fnmatch`` pattern on ``host/path``) and the tags that exist in it."""

    name: str
    tags: str = ANY_TAG
    auth: bool = False
    model: str = ""
    released: tuple[str, ...] = ()
    """The releases that exist (a NIM's); empty: every tag matching ``tags`` exists."""

    def has_tag(self, tag: str) -> bool:
        if self.released:
            return tag in released_tags(self.released)
        return re.fullmatch(self.tags, tag) is not None


def released_tags(releases: Iterable[str]) -> frozenset[str]:
    """Every tag a repository with these releases serves: each release, its
    ``major.minor`` moving tag, and ``latest``."""
    tags = {"latest"}
    for release in releases:
        tags.add(release)
        parts = release.split(".")
        if len(parts) == 3:
            tags.add(".".join(parts[:2]))
    return frozenset(tags)


REGISTRIES: tuple[Registry, ...] = (
    Registry("nvcr.io", closed=True, token_url="https://authn.nvidia.com/token"),
)

# NIM microservices on nvcr.io/nim/<model>: each serves the model its name says.
NIM_MODELS: tuple[str, ...] = (
    "meta/llama-3.1-8b-instruct",
    "meta/llama-3.1-70b-instruct",
    "meta/llama-3.1-405b-instruct",
    "meta/llama-3.2-1b-instruct",
    "meta/llama-3.2-3b-instruct",
    "meta/llama-3.3-70b-instruct",
    "meta/llama3-8b-instruct",
    "meta/llama3-70b-instruct",
    "mistralai/mistral-7b-instruct-v0.3",
    "mistralai/mixtral-8x7b-instruct-v01",
    "deepseek-ai/deepseek-r1",
    "deepseek-ai/deepseek-r1-distill-llama-8b",
    "google/gemma-2-9b-it",
    "microsoft/phi-3-mini-4k-instruct",
    "qwen/qwen2.5-7b-instruct",
    "nvidia/llama-3.1-nemotron-70b-instruct",
    "nvidia/llama-3.3-nemotron-super-49b-v1",
    "nvidia/llama-3.1-nemoguard-8b-content-safety",
    "nvidia/llama-3.1-nemoguard-8b-topic-control",
    "nvidia/nemoguard-jailbreak-detect",
    "nvidia/nv-embedqa-e5-v5",
    "nvidia/nv-embedqa-mistral-7b-v2",
    "nvidia/llama-3.2-nv-embedqa-1b-v2",
    "nvidia/nv-rerankqa-mistral-4b-v3",
    "nvidia/llama-3.2-nv-rerankqa-1b-v2",
    "nvidia/parakeet-ctc-1.1b-asr",
)

# The releases of the LLM NIMs (one release train), and the NIMs with their own.
LLM_RELEASES: tuple[str, ...] = (
    "1.0.0",
    "1.0.3",
    "1.1.0",
    "1.1.2",
    "1.2.0",
    "1.2.2",
    "1.3.0",
    "1.3.3",
    "1.5.0",
    "1.6.0",
    "1.7.0",
    "1.7.3",
    "1.8.0",
    "1.8.4",
    "1.8.5",
    "1.10.0",
    "1.12.0",
    "1.13.1",
    "1.14.0",
    "1.15.5",
)
NIM_RELEASES: dict[str, tuple[str, ...]] = {
    "nvidia/nv-embedqa-e5-v5": ("1.0.0", "1.0.4", "1.1.0", "1.5.0"),
    "nvidia/nv-embedqa-mistral-7b-v2": ("1.0.0", "1.0.1", "1.5.0"),
    "nvidia/llama-3.2-nv-embedqa-1b-v2": ("1.3.1", "1.5.0", "1.10.0"),
    "nvidia/nv-rerankqa-mistral-4b-v3": ("1.0.0", "1.0.2", "1.5.0"),
    "nvidia/llama-3.2-nv-rerankqa-1b-v2": ("1.3.1", "1.5.0", "1.8.0"),
    "nvidia/llama-3.1-nemoguard-8b-content-safety": ("1.0.0", "1.10.1"),
    "nvidia/llama-3.1-nemoguard-8b-topic-control": ("1.0.0", "1.10.1"),
    "nvidia/nemoguard-jailbreak-detect": ("1.0.0", "1.10.1"),
    "nvidia/parakeet-ctc-1.1b-asr": ("1.3.0", "2.0.0"),
}
"""Released tags per NIM model (:data:`LLM_RELEASES` for the ones not listed)."""


REPOSITORIES: tuple[Repository, ...] = (
    *(
        Repository(
            f"nvcr.io/nim/{model}",
            RELEASE_TAGS,
            auth=True,
            model=model,
            released=NIM_RELEASES.get(model, LLM_RELEASES),
        )
        for model in NIM_MODELS
    ),
    # The multi-LLM NIM serves whatever NIM_MODEL_NAME points it at.
    Repository("nvcr.io/nim/nvidia/llm-nim", RELEASE_TAGS, auth=True, released=LLM_RELEASES),
    Repository("nvcr.io/nvidia/nemo-microservices/*", ANY_TAG, auth=True),
    # GPU Operator and CUDA images are public.
    Repository("nvcr.io/nvidia/gpu-operator"),
    Repository("nvcr.io/nvidia/driver"),
    Repository("nvcr.io/nvidia/cuda"),
    Repository("nvcr.io/nvidia/k8s-device-plugin"),
    Repository("nvcr.io/nvidia/gpu-feature-discovery"),
    Repository("nvcr.io/nvidia/mellanox/*"),
    Repository("nvcr.io/nvidia/kubevirt-gpu-device-plugin"),
    Repository("nvcr.io/nvidia/cloud-native/*"),
    Repository("nvcr.io/nvidia/k8s/*"),
)


@dataclass(frozen=True)
class ImageReference:
    """A normalised image reference: ``docker.io/library/nginx`` + ``latest``."""

    host: str
    repository: str  # host/path
    tag: str
    digest: str

    @property
    def canonical(self) -> str:
        """What containerd names in its messages (``docker.io/library/nginx:latest``)."""
        if self.digest:
            return f"{self.repository}@{self.digest}"
        return f"{self.repository}:{self.tag}"


def parse_reference(image: str) -> ImageReference:
    """Normalise *image* as containerd does (default host docker.io, ``library/``, ``latest``)."""
    rest, _, digest = image.partition("@")
    slash = rest.rfind("/")
    colon = rest.rfind(":")
    tag = ""
    if colon > slash:
        rest, tag = rest[:colon], rest[colon + 1 :]
    first, _, remainder = rest.partition("/")
    if remainder and ("." in first or ":" in first or first == "localhost"):
        host, path = first, remainder
    else:
        host, path = "docker.io", rest
        if "/" not in path:
            path = f"library/{path}"
    return ImageReference(host, f"{host}/{path}", tag or ("" if digest else "latest"), digest)


def registry_of(host: str) -> Registry:
    return next((r for r in REGISTRIES if r.host == host), Registry(host))


def find_repository(ref: ImageReference) -> Repository | None:
    """The listed repository *ref* is in (None: not listed)."""
    for repo in REPOSITORIES:
        if fnmatch.fnmatchcase(ref.repository, repo.name):
            return repo
    return None


def served_model(image: str) -> str:
    """The model a NIM image serves (``meta/llama-3.1-8b-instruct``), or ""."""
    repo = find_repository(parse_reference(image))
    return repo.model if repo is not None else ""


def pull_problem(image: str, credentials: Collection[str]) -> str | None:
    """Why pulling *image* fails with credentials for the hosts in *credentials*, or None.

    The text is containerd's error as the kubelet shows it after ``Failed to pull
    image "<image>": ``.
    """
    ref = parse_reference(image)
    registry = registry_of(ref.host)
    repo = find_repository(ref)
    canonical = ref.canonical
    prefix = (
        f'failed to pull and unpack image "{canonical}": failed to resolve reference "{canonical}"'
    )
    # A closed registry does not tell anonymous clients whether a repository exists.
    needs_auth = (repo is not None and repo.auth) or (repo is None and registry.closed)
    if needs_auth and ref.host not in credentials:
        scope = quote(f"repository:{ref.repository.split('/', 1)[1]}:pull", safe="")
        token = registry.token_url or f"https://{ref.host}/token"
        return (
            f"rpc error: code = Unknown desc = {prefix}: failed to authorize: failed to fetch "
            f"anonymous token: unexpected status from GET request to {token}?scope={scope}"
            "&service=registry: 401 Unauthorized"
        )
    missing = (repo is None and registry.closed) or (
        repo is not None and not ref.digest and not repo.has_tag(ref.tag)
    )
    if missing:
        return f"rpc error: code = NotFound desc = {prefix}: {canonical}: not found"
    return None
