"""Webhook paths spelled like controller-runtime's builder (and NVIDIA's operator).

``/validate-<group with dots as dashes>-<version>-<lowercase kind>``, e.g.
``/validate-apps-nvidia-com-v1alpha1-nimservice``; ``/mutate-...`` likewise.
"""

from __future__ import annotations


def _suffix(group: str, version: str, kind: str) -> str:
    g = group.replace(".", "-")
    return f"{g}-{version}-{kind.lower()}" if g else f"core-{version}-{kind.lower()}"


def validate_path(group: str, version: str, kind: str) -> str:
    return "/validate-" + _suffix(group, version, kind)


def mutate_path(group: str, version: str, kind: str) -> str:
    return "/mutate-" + _suffix(group, version, kind)
