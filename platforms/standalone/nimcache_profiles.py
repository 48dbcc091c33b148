"""NIM model manifests: parsing (schema v1 and v2) and profile matching.

A NIM image ships ``model_manifest.yaml``: the list of *profiles* (one per
engine / precision / tensor-parallelism / GPU combination) it can download.
The NIMCache controller reads it from the manifest-extraction pod's log,
keeps a minimal copy in the ``<nimcache>-manifest`` ConfigMap and picks the
profiles that match ``spec.source.ngc.model`` and the cluster's GPUs (from
``model.gpus`` or the nodes' ``nvidia.com/gpu.product`` labels). The rules
follow NVIDIA's NIM Operator (nim-operator.md §3.4) so a NIMCache selects the
same profiles with nimctl as with NVIDIA's operator.

Everything here is pure: text, plain dicts and the typed NIMCache model in,
plain values out.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import MappingNode, Node, SequenceNode

from api.apps.v1alpha1 import nimcache as nimcache_api

MANIFEST_NOT_FOUND = "model_manifest.yaml not found"
"""What the extraction pod prints when the image carries no manifest."""

MANIFEST_CONFIGMAP_KEY = "model_manifest.yaml"

_V2_SCHEMA = re.compile(r"2\.*\.*")


class ManifestError(ValueError):
    """The manifest text is not a NIM model manifest we can read."""


@dataclass(frozen=True)
class GPUSpec:
    """One entry of ``spec.source.ngc.model.gpus``."""

    product: str = ""
    ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ModelSpec:
    """The profile filters of ``spec.source.ngc.model`` (all optional)."""

    profiles: tuple[str, ...] = ()
    precision: str = ""
    engine: str = ""
    tensor_parallelism: str = ""
    qos_profile: str = ""
    gpus: tuple[GPUSpec, ...] = ()
    lora: bool | None = None
    buildable: bool | None = None

    @classmethod
    def from_dict(cls, model: Mapping[str, Any] | None) -> ModelSpec:
        """The filters of a camelCase ``model`` object (validated as the API's ``ModelSpec``)."""
        if not model:
            return cls()
        return cls.from_model(nimcache_api.ModelSpec.model_validate(model))

    @classmethod
    def from_model(cls, model: nimcache_api.ModelSpec | None) -> ModelSpec:
        """The filters of a NIMCache's typed ``spec.source.ngc.model``."""
        if model is None:
            return cls()
        gpus = tuple(
            GPUSpec(product=g.product or "", ids=tuple(g.ids or ())) for g in model.gpus or ()
        )
        return cls(
            profiles=tuple(model.profiles or ()),
            precision=model.precision or "",
            engine=model.engine or "",
            tensor_parallelism=model.tensor_parallelism or "",
            qos_profile=model.qos_profile or "",
            gpus=gpus,
            lora=model.lora,
            buildable=model.buildable,
        )


@dataclass(frozen=True)
class Profile:
    """One downloadable profile of a NIM."""

    id: str
    tags: Mapping[str, str] = field(default_factory=dict)
    model: str = ""
    release: str = ""

    def status_entry(self) -> dict[str, Any]:
        """The ``status.profiles[]`` entry of a NIMCache: name, model, release, config."""
        return {
            "name": self.id,
            "model": self.model,
            "release": self.release,
            "config": dict(self.tags),
        }


@dataclass(frozen=True)
class Manifest:
    """A parsed model manifest (``schema_version`` "" for v1)."""

    schema_version: str
    profiles: tuple[Profile, ...]
    profile_selection_criteria: Any = None

    @property
    def is_v2(self) -> bool:
        return bool(_V2_SCHEMA.match(self.schema_version))

    def profile(self, profile_id: str) -> Profile | None:
        for p in self.profiles:
            if p.id == profile_id:
                return p
        return None

    def minimal(self) -> dict[str, Any]:
        """The manifest without workspace file lists: what the ConfigMap keeps."""
        if self.is_v2:
            out: dict[str, Any] = {"schema_version": self.schema_version}
            if self.profile_selection_criteria is not None:
                out["profile_selection_criteria"] = self.profile_selection_criteria
            out["profiles"] = [{"id": p.id, "tags": dict(p.tags)} for p in self.profiles]
            return out
        return {
            p.id: {"model": p.model, "release": p.release, "tags": dict(p.tags)}
            for p in self.profiles
        }

    def minimal_yaml(self) -> str:
        return dump_yaml(self.minimal())


def dump_yaml(data: Any) -> str:
    """Block-style YAML of plain data."""
    yaml = YAML()  # round-trip dumper: keeps insertion order
    yaml.default_flow_style = False
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()


def _tags(raw: Any) -> dict[str, str]:
    if not isinstance(raw, Mapping):
        return {}
    out: dict[str, str] = {}
    for k, v in raw.items():
        if isinstance(v, bool):
            out[str(k)] = "true" if v else "false"
        elif v is None:
            out[str(k)] = ""
        else:
            out[str(k)] = str(v)
    return out


class _ManifestConstructor(SafeConstructor):
    """Safe loading that reads application tags (NIM's ``!workspace``) as plain data."""

    def construct_undefined(self, node: Node) -> Any:
        if isinstance(node, MappingNode):
            return self.construct_mapping(node, deep=True)
        if isinstance(node, SequenceNode):
            return self.construct_sequence(node, deep=True)
        return self.construct_scalar(node)


_ManifestConstructor.add_constructor(None, _ManifestConstructor.construct_undefined)


def _load(text: str) -> Any:
    yaml = YAML(typ="safe", pure=True)
    yaml.Constructor = _ManifestConstructor
    try:
        return yaml.load(text)
    except YAMLError as exc:
        raise ManifestError(f"model manifest is not valid YAML: {exc}") from exc


def _strip_log_noise(text: str) -> str:
    """Drop anything a pod log may print before the YAML document."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if ":" in stripped or stripped == "---":
            return "\n".join(lines[i:])
    return text


def parse_manifest(text: str) -> Manifest:
    """Parse a model manifest (v1: a map of profile id to profile; v2: schema_version 2.x).

    Legacy wrapped v1 manifests (``{profiles: {<id>: ...}}`` or a list of
    ``{id, ...}`` entries without a schema version) are accepted too.
    """
    if MANIFEST_NOT_FOUND in text:
        raise ManifestError(MANIFEST_NOT_FOUND)
    data = _load(_strip_log_noise(text))
    if not isinstance(data, Mapping):
        raise ManifestError("model manifest must be a YAML mapping of profiles")
    version = str(data.get("schema_version") or "")
    if version and _V2_SCHEMA.match(version):
        raw_profiles = data.get("profiles")
        if raw_profiles is None:
            raw_profiles = []
        if not isinstance(raw_profiles, list):
            raise ManifestError("model manifest v2: profiles must be a list")
        profiles = []
        for i, entry in enumerate(raw_profiles):
            if not isinstance(entry, Mapping) or not entry.get("id"):
                raise ManifestError(f"model manifest v2: profiles[{i}] has no id")
            profiles.append(Profile(id=str(entry["id"]), tags=_tags(entry.get("tags"))))
        return Manifest(
            schema_version=version,
            profiles=tuple(profiles),
            profile_selection_criteria=data.get("profile_selection_criteria"),
        )
    body: Any = data
    if "profiles" in data and not version:
        body = data["profiles"]
    if isinstance(body, list):
        body = {str(e.get("id")): e for e in body if isinstance(e, Mapping) and e.get("id")}
    if not isinstance(body, Mapping):
        raise ManifestError("model manifest v1: expected a mapping of profile id to profile")
    profiles = []
    for pid, entry in body.items():
        if pid == "schema_version":
            continue
        if not isinstance(entry, Mapping):
            raise ManifestError(f"model manifest v1: profile {pid} is not a mapping")
        profiles.append(
            Profile(
                id=str(pid),
                tags=_tags(entry.get("tags")),
                model=str(entry.get("model") or ""),
                release=str(entry.get("release") or ""),
            )
        )
    return Manifest(schema_version=version, profiles=tuple(profiles))


def is_optimized_engine(engine: str) -> bool:
    """TensorRT(-LLM) engines are GPU-specific ("optimized")."""
    return "tensorrt" in engine.lower()


def _gpu_ids_match(gpu: GPUSpec, tags: Mapping[str, str]) -> bool:
    device = tags.get("gpu_device", "").removesuffix(":10de")
    return any(i.removesuffix(":10de") == device for i in gpu.ids)


def _product_match(product: str, tags: Mapping[str, str]) -> bool:
    p = product.lower()
    return any(p and p in tags.get(key, "").lower() for key in ("gpu", "key"))


def _discovered_match(labels: Iterable[str], tags: Mapping[str, str]) -> bool:
    gpu_tag = tags.get("gpu", "").lower()
    regex = tags.get("product_name_regex", "")
    for label in labels:
        low = label.lower()
        if gpu_tag and (gpu_tag in low or gpu_tag.replace("_", "-") in low):
            return True
        if regex:
            try:
                if re.search(regex, label, flags=re.IGNORECASE):
                    return True
            except re.error:
                continue
    return False


def _gpu_match(spec: ModelSpec, tags: Mapping[str, str], discovered: Sequence[str]) -> bool:
    """True when the profile's GPU suits ``model.gpus`` (or, if empty, the discovered GPUs)."""
    if spec.gpus:
        for gpu in spec.gpus:
            if gpu.product and not _product_match(gpu.product, tags):
                continue
            if gpu.ids and not _gpu_ids_match(gpu, tags):
                continue
            return True
        return False
    return _discovered_match(discovered, tags)


def _match_v1(spec: ModelSpec, p: Profile, discovered: Sequence[str]) -> bool:
    t = p.tags
    if spec.precision and t.get("precision", "") != spec.precision:
        return False
    if spec.tensor_parallelism and t.get("tp", "") != spec.tensor_parallelism:
        return False
    if spec.qos_profile and t.get("profile", "") != spec.qos_profile:
        return False
    if spec.lora is None and t.get("feat_lora") == "true":
        return False
    if spec.lora is not None and t.get("feat_lora") != ("true" if spec.lora else "false"):
        return False
    backend = t.get("llm_engine") or t.get("backend") or ""
    if spec.engine and spec.engine.removesuffix("_llm") not in backend:
        return False
    if is_optimized_engine(spec.engine) or spec.gpus:
        if not is_optimized_engine(backend):
            return False
        if (spec.gpus or discovered) and not _gpu_match(spec, t, discovered):
            return False
    return True


def _v2_engine(tags: Mapping[str, str]) -> str:
    engine = tags.get("llm_engine") or tags.get("model_type") or tags.get("backend") or ""
    engine = engine.lower()
    return "tensorrt" if engine == "triton" else engine


def _match_v2(spec: ModelSpec, p: Profile, discovered: Sequence[str]) -> bool:
    t = {k: v for k, v in p.tags.items()}
    low = {k: v.lower() for k, v in t.items()}
    if spec.precision and low.get("precision", "") != spec.precision.lower():
        return False
    if spec.tensor_parallelism and low.get("tp", "") != spec.tensor_parallelism.lower():
        return False
    if spec.qos_profile and low.get("profile", "") != spec.qos_profile.lower():
        return False
    if spec.lora is None and low.get("feat_lora") == "true":
        return False
    want_lora = "true" if spec.lora else "false"
    if spec.lora is not None and low.get("feat_lora", "false") != want_lora:
        return False
    buildable = low.get("trtllm_buildable") == "true"
    if spec.buildable is not None and buildable != spec.buildable:
        return False
    engine = _v2_engine(t)
    if spec.engine and spec.engine.lower().removesuffix("_llm") not in engine:
        return False
    has_gpu_tags = any(k in t for k in ("gpu", "gpu_device", "product_name_regex", "key"))
    if not spec.gpus and (not has_gpu_tags or not discovered):
        return True
    if is_optimized_engine(spec.engine) or spec.gpus or discovered:
        if _gpu_match(spec, t, discovered):
            return True
        return buildable
    return True


def match_profiles(
    manifest: Manifest, spec: ModelSpec, discovered_gpus: Sequence[str] = ()
) -> list[str]:
    """The ids of the manifest's profiles that satisfy ``spec``, in manifest order."""
    match = _match_v2 if manifest.is_v2 else _match_v1
    return [p.id for p in manifest.profiles if match(spec, p, discovered_gpus)]


def select_profiles(
    manifest: Manifest | None, spec: ModelSpec, discovered_gpus: Sequence[str] = ()
) -> list[str]:
    """Explicit ``model.profiles`` win; else the matched profiles (needs a manifest)."""
    if spec.profiles:
        return list(spec.profiles)
    if manifest is None:
        return []
    return match_profiles(manifest, spec, discovered_gpus)


def status_profiles(manifest: Manifest | None, selected: Sequence[str]) -> list[dict[str, Any]]:
    """``status.profiles`` for a Ready NIMCache: one entry per selected profile in the manifest.

    Empty when the selection is ``all`` or no manifest is known (native / model-free).
    """
    if manifest is None or "all" in selected:
        return []
    out = []
    for pid in selected:
        p = manifest.profile(pid)
        if p is not None:
            out.append(p.status_entry())
    return out


def discovered_gpu_products(nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """Unique ``nvidia.com/gpu.product`` node label values, in first-seen order."""
    seen: list[str] = []
    for node in nodes:
        labels = (node.get("metadata") or {}).get("labels") or {}
        product = labels.get("nvidia.com/gpu.product")
        if product and product not in seen:
            seen.append(str(product))
    return seen


def gpu_count_for_profile(config: Mapping[str, Any]) -> int:
    """GPUs a profile needs: its ``tensorParallelism`` or ``tp`` tag, default 1 (§2.7).

    Raises ``ValueError`` when the tag is not a whole number.
    """
    for key in ("tensorParallelism", "tp"):
        value = config.get(key)
        if value not in (None, ""):
            try:
                return int(str(value))
            except ValueError as exc:
                raise ValueError(
                    f"profile tag {key}={value!r} is not a whole number of GPUs"
                ) from exc
    return 1
