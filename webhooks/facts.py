"""Cluster facts some admission rules need: the server version and KServe's mode.

NVIDIA's validator refuses DRA on clusters older than v1.34.0 and restricts
KServe NIMServices in knative (Serverless) mode. Those facts come from the API
server; :class:`ClusterFacts` is the small interface the validators read them
through, so the rules stay pure and testable. Implementations cache what they
read and raise :class:`FactUnavailable` with a clear message when they cannot.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

KSERVE_MODES = ("Standard", "Knative", "ModelMesh", "RawDeployment", "Serverless")
KSERVE_MODE_ANNOTATION = "serving.kserve.io/deploymentMode"


class FactUnavailable(RuntimeError):
    """A cluster fact could not be read (the request is denied with this message)."""


class ClusterFacts(Protocol):
    async def server_version(self) -> str:
        """The API server's gitVersion, e.g. ``v1.32.4``."""
        ...

    async def kserve_default_deployment_mode(self) -> str:
        """KServe's ``deploy.defaultDeploymentMode`` (``Standard`` when unset)."""
        ...


@dataclass
class StaticClusterFacts:
    """Fixed facts (tests, ``nimctl render``, clusters where they are known)."""

    version: str = "v1.32.0"
    kserve_mode: str = "Standard"

    async def server_version(self) -> str:
        return self.version

    async def kserve_default_deployment_mode(self) -> str:
        return self.kserve_mode


_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:\.(\d+))?")


def version_tuple(version: str) -> tuple[int, int, int]:
    """``v1.34.2+k3s1`` -> ``(1, 34, 2)``; raise FactUnavailable on junk."""
    m = _VERSION.match(version.strip())
    if not m:
        raise FactUnavailable(f"cannot parse the API server version {version!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


async def kserve_deployment_mode(facts: ClusterFacts, nimservice: dict[str, Any]) -> str:
    """Resolve the mode like NVIDIA: CR annotation, then KServe's default, then Standard."""
    annotations = (nimservice.get("spec") or {}).get("annotations") or {}
    mode = annotations.get(KSERVE_MODE_ANNOTATION)
    if mode is not None:
        if mode not in KSERVE_MODES:
            raise FactUnavailable(f"deployment mode annotation found but value is invalid: {mode}")
        return str(mode)
    return await facts.kserve_default_deployment_mode() or "Standard"


def is_knative(mode: str) -> bool:
    return mode in ("Knative", "Serverless")
