"""An in-process Kubernetes API server (real HTTPS, real watch streams) plus a
simulator of kubelet and the built-in controllers: the test substrate and the
embedded cluster of `nimctl local`.

``from localcluster import LocalCluster`` is the entry point;
it is imported lazily so that light modules (``hooks``, ``errors``) can be
used without loading the HTTP server.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LocalCluster"]


def __getattr__(name: str) -> Any:
    if name == "LocalCluster":
        from .cluster import LocalCluster

        return LocalCluster
    raise AttributeError(name)
