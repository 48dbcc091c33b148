"""An in-process Kubernetes API server (real HTTPS, real watch streams) plus a
simulator of kubelet and the built-in controllers: the test substrate and the
embedded cluster of `nimctl local`.

This module is localcluster's public face; the program (``nimctl``) uses
nothing else:

* ``LocalCluster``: start / stop (``async with``), ``write_kubeconfig``;
* ``load_profile``: the simulated nodes (docs/localcluster.md, "Node profiles");
* ``extensions_of``: the simulator, audit log, fault injection and catalog of a
  running cluster (the ``/debug/`` API serves the same);
* ``install_ecosystem``: the third-party CRDs NVIDIA's samples use (LWS,
  KServe, Gateway API, ...);
* ``install_openshift``: opt-in, what OpenShift serves beside Kubernetes
  (ClusterVersion, Proxy, SCCs, the Driver Toolkit ImageStream);
* ``serve_forever``: ``nimctl localcluster``, the server as a process;
* ``claim_state_dir`` / ``StateDirBusy``: one process per state directory;
* ``parse_kubernetes_version``: what ``--kubernetes-version`` accepts.

Everything is imported lazily so that light modules (``hooks``, ``errors``)
can be used without loading the HTTP server.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as mypy sees them; at run time __getattr__ loads them
    from .addons import install_ecosystem
    from .cluster import LocalCluster
    from .discovery import parse_kubernetes_version
    from .extensions import extensions_of
    from .openshift import install_openshift
    from .simulator.nodes import load_profile
    from .standalone import main as serve_forever
    from .statedir import StateDirBusy
    from .statedir import claim as claim_state_dir

_PUBLIC = {
    "LocalCluster": ("cluster", "LocalCluster"),
    "load_profile": ("simulator.nodes", "load_profile"),
    "extensions_of": ("extensions", "extensions_of"),
    "install_ecosystem": ("addons", "install_ecosystem"),
    "install_openshift": ("openshift", "install_openshift"),
    "serve_forever": ("standalone", "main"),
    "claim_state_dir": ("statedir", "claim"),
    "StateDirBusy": ("statedir", "StateDirBusy"),
    "parse_kubernetes_version": ("discovery", "parse_kubernetes_version"),
}

__all__ = [
    "LocalCluster",
    "StateDirBusy",
    "claim_state_dir",
    "extensions_of",
    "install_ecosystem",
    "install_openshift",
    "load_profile",
    "parse_kubernetes_version",
    "serve_forever",
]


def __getattr__(name: str) -> Any:
    try:
        module, attr = _PUBLIC[name]
    except KeyError:
        raise AttributeError(name) from None
    return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
