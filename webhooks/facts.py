"""Cluster facts some admission rules need: the server version and KServe's mode.

NVIDIA's validator refuses DRA on clusters older than v1.34.0 and restricts
KServe NIMServices in knative (Serverless) mode. Those facts come from the API
server; :class:`ClusterFacts` is the small interface the validators read them
through, so the rules stay pure and testable. Implementations cache what they
read and raise :class:`FactUnavailable` with a clear message when they cannot.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from nimctl_runtime.client.interfaces import APIReader

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


FactsClient = APIReader
"""The slice of the runtime client the facts reader uses."""


class ClientClusterFacts:
    """Reads the facts through the runtime's client and caches them.

    The server version is read once (as NVIDIA's validator does at start-up, but
    lazily, so a slow API server does not block the webhook server). KServe's
    default mode is cached for ``ttl`` seconds: ConfigMap ``inferenceservice-config``
    key ``deploy`` in ``KSERVE_NAMESPACE`` (else the namespace of the Deployment
    labelled ``control-plane=kserve-controller-manager``); no KServe means
    KServe's own default, ``Standard``.
    """

    def __init__(
        self, client: FactsClient, *, kserve_namespace: str | None = None, ttl: float = 60.0
    ) -> None:
        self.client = client
        self.kserve_namespace = kserve_namespace
        self.ttl = ttl
        self._version: str | None = None
        self._mode: tuple[float, str] | None = None

    async def server_version(self) -> str:
        if self._version is None:
            try:
                info = await self.client.request("GET", "/version")
            except Exception as e:  # the client's typed errors and connection failures
                raise FactUnavailable(f"cannot read the API server version: {e}") from e
            version = info.get("gitVersion") if isinstance(info, dict) else None
            if not isinstance(version, str):
                raise FactUnavailable("the API server's /version answer has no gitVersion")
            self._version = version
        return self._version

    async def _kserve_namespace(self) -> str | None:
        if self.kserve_namespace:
            return self.kserve_namespace
        found = await self.client.list(
            "apps/v1", "Deployment", label_selector="control-plane=kserve-controller-manager"
        )
        items = found.get("items") or []
        if len(items) != 1:
            return None
        ns = items[0].get("metadata", {}).get("namespace")
        return str(ns) if ns else None

    async def kserve_default_deployment_mode(self) -> str:
        loop = asyncio.get_running_loop()
        if self._mode is not None and loop.time() - self._mode[0] < self.ttl:
            return self._mode[1]
        from nimctl_runtime.client.errors import NotFound

        try:
            namespace = await self._kserve_namespace()
            if namespace is None:
                mode = "Standard"
            else:
                cm = await self.client.get("v1", "ConfigMap", "inferenceservice-config", namespace)
                deploy = json.loads((cm.get("data") or {}).get("deploy") or "{}")
                mode = str(deploy.get("defaultDeploymentMode") or "Standard")
        except NotFound:
            mode = "Standard"
        except (ValueError, TypeError) as e:
            raise FactUnavailable(
                f"KServe's inferenceservice-config has an unreadable deploy key: {e}"
            ) from e
        except Exception as e:  # the client's typed errors and connection failures
            raise FactUnavailable(f"cannot read KServe's deployment mode: {e}") from e
        self._mode = (loop.time(), mode)
        return mode
