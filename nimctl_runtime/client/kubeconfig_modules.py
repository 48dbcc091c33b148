"""kubernetes_asyncio's kubeconfig loader, without importing its generated API client.

The kubeconfig support (contexts, exec plugins, OIDC, client certificates) is
kubernetes_asyncio's ``config.kube_config``; importing it the ordinary way runs
``kubernetes_asyncio/__init__`` and ``kubernetes_asyncio/client/__init__``,
which import every generated API class and model: about 37 MB of resident
memory that a process using our own :class:`~nimctl_runtime.client.Client`
never touches (the operator in a pod reads its service account and never
loads them; run with a kubeconfig it did).

:func:`kube_config` imports the two modules it needs under placeholder parent
packages and removes the placeholders at once, so a later
``import kubernetes_asyncio.client`` elsewhere in the process still gets the
real, complete package (and ``new_client_from_config`` still works).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from typing import Any

_PARENTS = ("kubernetes_asyncio", "kubernetes_asyncio.client")


class _ApiClientOnDemand:
    """Stands in for ``ApiClient`` in ``kube_config``: the real class, imported when called."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from kubernetes_asyncio.client.api_client import ApiClient

        return ApiClient(*args, **kwargs)


@functools.cache
def kube_config() -> tuple[types.ModuleType, type]:
    """``(kubernetes_asyncio.config.kube_config, Configuration)``, imported lightly."""
    placeholders: list[str] = []
    try:
        for name in _PARENTS:
            if name in sys.modules:
                continue
            spec = importlib.util.find_spec(name)
            if spec is None or spec.submodule_search_locations is None:
                raise ImportError(f"{name} is not installed")
            package = types.ModuleType(name)
            package.__path__ = list(spec.submodule_search_locations)
            package.__spec__ = spec
            sys.modules[name] = package
            placeholders.append(name)
        configuration = importlib.import_module("kubernetes_asyncio.client.configuration")
        client = sys.modules["kubernetes_asyncio.client"]
        if "kubernetes_asyncio.client" in placeholders:
            client.Configuration = configuration.Configuration  # type: ignore[attr-defined]
            client.ApiClient = _ApiClientOnDemand  # type: ignore[attr-defined]
        module = importlib.import_module("kubernetes_asyncio.config.kube_config")
    finally:
        for name in placeholders:
            sys.modules.pop(name, None)
    config_class: type = configuration.Configuration
    return module, config_class
