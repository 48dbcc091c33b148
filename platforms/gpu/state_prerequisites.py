"""State ``pre-requisites``: the RuntimeClasses operand and user pods run GPUs with.

``<operator.runtimeClass>`` (``nvidia``), plus ``nvidia-legacy`` and ``nvidia-cdi``
when CDI is on; each names the runtime handler of the same name that the
toolkit configures. The state is off when the NRI plugin injects GPUs.
"""

from __future__ import annotations

from typing import Any

from manifests import runtimeclass
from manifests.meta import object_meta
from platforms.gpu.context import StateContext

LABELS = {"app.kubernetes.io/component": "gpu-operator"}
CDI_RUNTIME_CLASSES = ("nvidia-legacy", "nvidia-cdi")


def build(ctx: StateContext) -> list[dict[str, Any]]:
    """The RuntimeClasses, default one first."""
    names = [ctx.runtime_class]
    if ctx.spec.cdi.enabled:
        names.extend(n for n in CDI_RUNTIME_CLASSES if n not in names)
    api_version = ctx.facts.runtime_class_api_version
    return [
        runtimeclass.build(object_meta(n, labels=LABELS), handler=n, api_version=api_version)
        for n in names
    ]
