"""kube-apiserver's validation of volume sources and volume mounts, in its words.

:func:`validate_volume_source` checks what ``validation_pod`` leaves to it: the
``defaultMode`` and ``items`` (key, relative path without ``..``, mode) of ConfigMap
and Secret volumes, and a hostPath's path (no ``..``) and ``type`` enum.
:func:`validate_mount` checks a volume mount's ``subPath`` (relative, no ``..``) and
``mountPropagation`` (the enum, and ``Bidirectional`` only for privileged
containers). The NIMService's extra volumes and mounts reach here as a user wrote them.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from .validation_field import Errors, as_dict, as_list

FILE_MODE = "must be a number between 0 and 0777 (octal), both inclusive"
HOST_PATH_TYPES = (
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
)
MOUNT_PROPAGATIONS = ("Bidirectional", "HostToContainer", "None")


def _mode(errs: Errors, path: str, value: Any) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= 0o777:
        errs.invalid(path, value, FILE_MODE)


def _no_backsteps(errs: Errors, path: str, value: str) -> None:
    if ".." in value.replace("\\", "/").split("/"):
        errs.invalid(path, value, "must not contain '..'")


def local_descending_path(errs: Errors, path: str, value: str) -> None:
    """validateLocalDescendingPath: relative, and no ``..`` element."""
    if posixpath.isabs(value):
        errs.invalid(path, value, "must be a relative path")
    _no_backsteps(errs, path, value)


def validate_volume_source(volume: Mapping[str, Any], where: str, errs: Errors) -> None:
    for kind in ("configMap", "secret"):
        source = volume.get(kind)
        if not isinstance(source, Mapping):
            continue
        _mode(errs, f"{where}.{kind}.defaultMode", source.get("defaultMode"))
        for i, raw in enumerate(as_list(source.get("items"))):
            item, at = as_dict(raw), f"{where}.{kind}.items[{i}]"
            if not item.get("key"):
                errs.required(f"{at}.key")
            target = str(item.get("path") or "")
            if not target:
                errs.required(f"{at}.path")
            local_descending_path(errs, f"{at}.path", target)
            if target.startswith("..") and not target.startswith("../"):
                errs.invalid(f"{at}.path", target, "must not start with '..'")
            _mode(errs, f"{at}.mode", item.get("mode"))
    host = volume.get("hostPath")
    if isinstance(host, Mapping) and host.get("path"):
        _no_backsteps(errs, f"{where}.hostPath.path", str(host["path"]))
        errs.enum(f"{where}.hostPath.type", host.get("type"), HOST_PATH_TYPES)


def validate_mount(
    mount: Mapping[str, Any], container: Mapping[str, Any], where: str, errs: Errors
) -> None:
    sub_path = mount.get("subPath")
    if isinstance(sub_path, str) and sub_path:
        local_descending_path(errs, f"{where}.subPath", sub_path)
    propagation = mount.get("mountPropagation")
    if propagation is None:
        return
    if propagation == "Bidirectional":
        if as_dict(container.get("securityContext")).get("privileged") is not True:
            errs.forbidden(
                f"{where}.mountPropagation",
                "Bidirectional mount propagation is available only to privileged containers",
            )
    else:
        errs.enum(f"{where}.mountPropagation", propagation, MOUNT_PROPAGATIONS)
