"""``nimctl render -f FILE [--cache FILE] [--nodes FILE]``: the objects a CR would
produce, offline. A ClusterPolicy renders against the Nodes of ``--nodes``
(``platforms.gpu.cli``), and so do the file's NVIDIADrivers, all of them
together where the first one stands (``platforms.gpu.nvidiadriver_cli``). A
GPUCluster renders its four states (``platforms.gpu.gpucluster_cli``).

Reads NIMService, NIMPipeline, NIMCache and NeMo manifests (several per file, ``-``
for stdin; other kinds in the file, a ConfigMap say, are passed through
unchanged) and prints, as a YAML stream, what the operator would create for
them on the standalone platform (or on KServe for ``inferencePlatform:
kserve``, as an InferenceService in the mode its annotation names, else
``Standard``). Nothing is contacted: a NIMCache that a
NIMService names is taken from ``--cache`` or from the same file and treated
as Ready; when there is none, a Ready cache on PVC ``<cache>-pvc`` is assumed
and a note says so on stderr. Errors name the file and the field.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from ruamel.yaml import YAML

from api.apps.v1alpha1.common import PersistentVolumeClaim
from api.apps.v1alpha1.nimcache import (
    NGCSource,
    NIMCache,
    NIMCacheSpec,
    NIMCacheStatus,
    NimCacheStorage,
    NIMSource,
)
from api.apps.v1alpha1.nimpipeline import NIMPipeline
from api.apps.v1alpha1.nimservice import NIMService
from api.base import CustomResource, ObjectMeta
from api.nvidia.v1.clusterpolicy import ClusterPolicy
from api.nvidia.v1alpha1.gpucluster import GPUCluster
from api.nvidia.v1alpha1.nvidiadriver import NVIDIADriver
from api.serialize import LoadError, load
from platforms.gpu import cli as gpu_cli
from platforms.gpu import gpucluster_cli, nvidiadriver_cli
from platforms.gpu.errors import RenderError as GPURenderError
from platforms.nemo.common import RenderFailed as NemoRenderFailed
from platforms.nemo.contract import CONTRACTS as NEMO_CONTRACTS
from platforms.nemo.offline import offline_facts
from platforms.nimpipeline import pipeline_nimservices, pipeline_services
from platforms.nimservice import NIMServiceContract
from platforms.objects import dig
from platforms.parsing import InvalidResource, apply_defaults
from platforms.standalone import RenderContext, RenderError, sources
from platforms.standalone import nimcache as cache_objects

GROUP_VERSION = "apps.nvidia.com/v1alpha1"

__all__ = ["is_nimctl_kind", "main", "pipeline_services"]

Doc = CustomResource | dict[str, Any]
"""A document of the file: one of our kinds, parsed once, or another kind as written."""


def main(
    filename: str, cache: str | None, *, nodes: str | None = None, out: TextIO | None = None
) -> int:
    """Render ``filename`` (and resolve caches from ``cache``, a ClusterPolicy's cluster
    from ``nodes``); 0 on success, 1 on error."""
    out = out or sys.stdout
    try:
        docs = _read(filename)
        if not docs:
            raise _CliError(f"{filename}: no objects found (the file is empty)")
        if not any(isinstance(d, CustomResource) for d in docs):
            kinds = ", ".join(sorted({str(_kind(d)) for d in docs}))
            raise _CliError(
                f"{filename}: no kind {str(_kind(docs[0]))!r} in nimctl's APIs; the file holds "
                f"only {kinds}, which nimctl render passes through next to a NIMService, "
                "NIMCache, NIMPipeline, NIMBuild, NeMo, ClusterPolicy, NVIDIADriver or GPUCluster "
                "manifest"
            )
        # A cache given with --cache wins over one of the same name in the file.
        caches = {
            d.metadata.name: d
            for d in docs + (_read(cache) if cache else [])
            if isinstance(d, NIMCache)
        }
        objects: list[dict[str, Any]] = []
        for doc in docs:
            if not isinstance(doc, CustomResource):
                # a ConfigMap or Secret next to the CRs: kept as written, not rendered
                objects.append(doc)
                kind, name = doc.get("kind"), dig(doc, "metadata", "name", default="<unnamed>")
                print(f"note: {filename}: {kind} {name} passed through unchanged", file=sys.stderr)
                continue
            if isinstance(doc, ClusterPolicy):
                objects.extend(_render_cluster_policy(doc, nodes, filename))
                continue
            if isinstance(doc, GPUCluster):
                objects.extend(_render_gpucluster(doc, docs, nodes, filename))
                continue
            if isinstance(doc, NVIDIADriver):
                if doc is next(d for d in docs if isinstance(d, NVIDIADriver)):
                    objects.extend(_render_nvidia_drivers(docs, nodes, filename))
                continue
            objects.extend(_render_doc(doc, caches, filename))
    except _CliError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    yaml = YAML()
    yaml.default_flow_style = False
    yaml.width = 4096
    buf = io.StringIO()
    yaml.dump_all(objects, buf)
    out.write(buf.getvalue())
    return 0


class _CliError(Exception):
    """An input problem, already worded for the user."""


def _kind(doc: Doc) -> str:
    return doc.kind if isinstance(doc, CustomResource) else str(doc.get("kind"))


def _read(filename: str) -> list[Doc]:
    """The file's documents: our kinds parsed into their models, other kinds as written."""
    try:
        text = sys.stdin.read() if filename == "-" else Path(filename).read_text()
    except OSError as err:
        raise _CliError(f"{filename}: {err.strerror or err}") from None
    try:
        raw = [d for d in YAML(typ="safe", pure=True).load_all(text) if d is not None]
    except Exception as err:  # YAML syntax errors carry their own line/column
        raise _CliError(f"{filename}: not valid YAML: {err}") from None
    out: list[Doc] = []
    for doc in raw:
        if isinstance(doc, dict) and doc.get("kind") and not is_nimctl_kind(doc):
            out.append(doc)
            continue
        try:
            # Defaulted as the API server would, so the render matches the operator's.
            out.append(apply_defaults(load(doc)))
        except LoadError as err:
            raise _CliError(f"{filename}: {err}") from None
    return out


def is_nimctl_kind(doc: Mapping[str, Any]) -> bool:
    """Whether *doc* is one of the kinds nimctl serves (by API group), or has no apiVersion."""
    api_version = str(doc.get("apiVersion") or "")
    group = api_version.split("/", maxsplit=1)[0]
    return not api_version or group in ("apps.nvidia.com", "nvidia.com")


def _ready(cache: NIMCache) -> NIMCache:
    """The cache as it would look once cached (status kept when the file has one)."""
    status = cache.status or NIMCacheStatus()
    update = {
        "state": status.state or "Ready",
        "pvc": status.pvc or sources.cache_pvc_name(cache),
    }
    return cache.model_copy(update={"status": status.model_copy(update=update)})


def _assumed_cache(name: str, namespace: str) -> NIMCache:
    """A Ready cache on PVC ``<name>-pvc`` whose source is unknown (so it is
    constructed, not validated: a real NIMCache must name its source)."""
    pvc = f"{name}-pvc"
    return NIMCache.model_construct(
        metadata=ObjectMeta(name=name, namespace=namespace),
        spec=NIMCacheSpec.model_construct(
            source=NIMSource.model_construct(),
            storage=NimCacheStorage(pvc=PersistentVolumeClaim(name=pvc)),
        ),
        status=NIMCacheStatus(state="Ready", pvc=pvc),
    )


def _render_doc(
    doc: CustomResource, caches: Mapping[str | None, NIMCache], filename: str
) -> list[dict[str, Any]]:
    kind = doc.kind
    where = f"{filename}: {kind} {doc.metadata.name or '<unnamed>'}"
    try:
        if isinstance(doc, NIMService):
            return _render_service(doc, caches)
        if isinstance(doc, NIMPipeline):
            # The NIMServices the pipeline deploys, built from its model.
            out: list[dict[str, Any]] = []
            for svc in pipeline_nimservices(doc):
                out.extend(_render_service(svc, caches))
            return out
        if isinstance(doc, NIMCache):
            return _render_cache(doc)
        if kind in NEMO_CONTRACTS:
            return _render_nemo(doc)
    except (RenderError, NemoRenderFailed) as err:
        raise _CliError(f"{where}: {err.message}") from None
    except InvalidResource as err:
        raise _CliError(f"{where}: {err}") from None
    raise _CliError(
        f"{where}: nimctl render handles NIMService, NIMPipeline, NIMCache, the NeMo kinds, "
        "ClusterPolicy, NVIDIADriver and GPUCluster"
    )


def _render_nemo(doc: CustomResource) -> list[dict[str, Any]]:
    """A NeMo CR through its contract, with placeholders for what lives in the cluster."""
    contract = NEMO_CONTRACTS[doc.kind]
    facts, notes = offline_facts(doc)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return contract.render(doc, facts)


def _render_cluster_policy(
    doc: ClusterPolicy, nodes: str | None, filename: str
) -> list[dict[str, Any]]:
    """A ClusterPolicy's objects on the cluster ``nodes`` describes (platforms.gpu.cli)."""
    where = f"{filename}: ClusterPolicy {doc.metadata.name or '<unnamed>'}"
    try:
        return gpu_cli.render_policy(doc, gpu_cli.read_cluster(nodes))
    except GPURenderError as err:
        raise _CliError(f"{where}: {err}") from None


def _render_gpucluster(
    doc: GPUCluster, docs: list[Doc], nodes: str | None, filename: str
) -> list[dict[str, Any]]:
    """A GPUCluster's states (platforms.gpu.gpucluster_cli); a ClusterPolicy beside it
    (in the file or in ``nodes``) means nothing would be deployed."""
    where = f"{filename}: GPUCluster {doc.metadata.name or '<unnamed>'}"
    policies = [d.metadata.name or "" for d in docs if isinstance(d, ClusterPolicy)]
    try:
        return gpucluster_cli.render_gpucluster(doc, gpu_cli.read_cluster(nodes), policies)
    except GPURenderError as err:
        raise _CliError(f"{where}: {err}") from None


def _render_nvidia_drivers(
    docs: list[Doc], nodes: str | None, filename: str
) -> list[dict[str, Any]]:
    """The file's NVIDIADrivers, together, on the cluster ``nodes`` describes."""
    drivers = [d for d in docs if isinstance(d, NVIDIADriver)]
    policies = [d for d in docs if isinstance(d, ClusterPolicy)]
    try:
        return nvidiadriver_cli.render_drivers(drivers, gpu_cli.read_cluster(nodes), policies)
    except GPURenderError as err:
        raise _CliError(f"{filename}: {err}") from None


def _render_service(svc: NIMService, caches: Mapping[str | None, NIMCache]) -> list[dict[str, Any]]:
    cache_name = svc.spec.storage.nim_cache.name
    cache = None
    if cache_name:
        if cache_name in caches:
            cache = _ready(caches[cache_name])
        else:
            cache = _assumed_cache(cache_name, svc.metadata.namespace or "default")
            print(
                f"note: NIMCache {cache_name} not given (--cache); assuming it is Ready "
                f"on PVC {cache_name}-pvc",
                file=sys.stderr,
            )
    # The operator's NIMService controller renders through the same contract.
    return NIMServiceContract().render(svc, RenderContext(nimcache=cache))


def _render_cache(doc: NIMCache) -> list[dict[str, Any]]:
    namespace = doc.metadata.namespace or "default"
    out = [
        cache_objects.service_account(namespace),
        cache_objects.role(namespace, proxy=cache_objects.given(doc.spec.proxy)),
        cache_objects.role_binding(namespace),
    ]
    claim = cache_objects.build_pvc(doc)
    if claim is not None:
        out.append(claim)
    _, src = sources.source_of(doc)
    if isinstance(src, NGCSource) and not src.model_endpoint:
        out.append(cache_objects.manifest_pod(doc))
        if not (src.model is not None and src.model.profiles):
            print(
                f"note: NIMCache {doc.metadata.name}: the profiles to cache are "
                "matched against the NIM's model manifest at run time; the Job is not shown",
                file=sys.stderr,
            )
            return out
    out.append(cache_objects.caching_job(doc))
    return out
