"""kube-apiserver's validation of security contexts: the pod's and each container's.

:func:`validate_pod_security_context` checks ``spec.securityContext`` as
``validatePodSpecSecurityContext`` does (user and group ids in 0..2^31-1,
sysctl names, unique and not namespaced to a host namespace the pod shares,
the ``fsGroupChangePolicy``/``supplementalGroupsPolicy``/``seLinuxChangePolicy``
enums, seccomp and AppArmor profiles). :func:`validate_container_security_context`
checks a container's as ``ValidateSecurityContext`` does (ids, ``procMount``
and ``Unmasked`` only with ``hostUsers: false``, seccomp and AppArmor profiles,
``allowPrivilegeEscalation: false`` with ``privileged`` or ``CAP_SYS_ADMIN``).

kube-apiserver does not check capability names (``capabilities.add: [FOO]``
is stored; the container runtime refuses it later), and neither does this.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from typing import Any

from .validation_field import Errors, as_dict, as_list

FS_GROUP_CHANGE_POLICIES = ("Always", "OnRootMismatch")
SUPPLEMENTAL_GROUPS_POLICIES = ("Merge", "Strict")
SELINUX_CHANGE_POLICIES = ("MountOption", "Recursive")
PROC_MOUNTS = ("Default", "Unmasked")
SECCOMP_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
APPARMOR_TYPES = ("Localhost", "RuntimeDefault", "Unconfined")
ID_RANGE = "must be between 0 and 2147483647, inclusive"
_SYSCTL_SEGMENT = "[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
_SYSCTL_FMT = f"^({_SYSCTL_SEGMENT}[\\./])*{_SYSCTL_SEGMENT}$"
_SYSCTL = re.compile(_SYSCTL_FMT)
_IPC_SYSCTLS = ("kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced")
_IPC_PREFIXES = ("kernel.msg", "kernel.sem", "fs.mqueue.")


def _ids(context: Mapping[str, Any], path: str, errs: Errors, keys: tuple[str, ...]) -> None:
    for key in keys:
        value = context.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= 2**31 - 1:
            errs.invalid(f"{path}.{key}", value, ID_RANGE)


def validate_pod_security_context(spec: Mapping[str, Any], path: str, errs: Errors) -> None:
    """``<path>.securityContext`` of a pod spec (*path* is the pod spec's path)."""
    context = spec.get("securityContext")
    if not isinstance(context, Mapping):
        return
    where = f"{path}.securityContext"
    _ids(context, where, errs, ("fsGroup", "runAsUser", "runAsGroup"))
    for i, gid in enumerate(as_list(context.get("supplementalGroups"))):
        if isinstance(gid, int) and not 0 <= gid <= 2**31 - 1:
            errs.invalid(f"{where}.supplementalGroups[{i}]", gid, ID_RANGE)
    if spec.get("shareProcessNamespace") is True and spec.get("hostPID") is True:
        errs.invalid(
            f"{where}.shareProcessNamespace",
            True,
            "ShareProcessNamespace and HostPID cannot both be enabled",
        )
    _sysctls(as_list(context.get("sysctls")), spec, f"{where}.sysctls", errs)
    errs.enum(
        f"{where}.fsGroupChangePolicy", context.get("fsGroupChangePolicy"), FS_GROUP_CHANGE_POLICIES
    )
    _seccomp(context.get("seccompProfile"), f"{where}.seccompProfile", errs)
    _apparmor(context.get("appArmorProfile"), f"{where}.appArmorProfile", errs)
    errs.enum(
        f"{where}.supplementalGroupsPolicy",
        context.get("supplementalGroupsPolicy"),
        SUPPLEMENTAL_GROUPS_POLICIES,
    )
    errs.enum(
        f"{where}.seLinuxChangePolicy", context.get("seLinuxChangePolicy"), SELINUX_CHANGE_POLICIES
    )


def _sysctls(sysctls: list[Any], spec: Mapping[str, Any], path: str, errs: Errors) -> None:
    names: set[str] = set()
    for i, raw in enumerate(sysctls):
        name, where = str(as_dict(raw).get("name") or ""), f"{path}[{i}].name"
        if not name:
            errs.required(where)
        elif len(name) > 253 or not _SYSCTL.match(name):
            errs.invalid(
                where, name, f"must have at most 253 characters and match regex {_SYSCTL_FMT}"
            )
        elif name in names:
            errs.duplicate(where, name)
        dotted = name.replace("/", ".")
        if spec.get("hostNetwork") is True and dotted.startswith("net."):
            errs.invalid(where, name, "may not be specified when 'hostNetwork' is true")
        elif spec.get("hostIPC") is True and (
            dotted in _IPC_SYSCTLS or dotted.startswith(_IPC_PREFIXES)
        ):
            errs.invalid(where, name, "may not be specified when 'hostIPC' is true")
        names.add(name)


def validate_container_security_context(
    container: Mapping[str, Any], path: str, errs: Errors, *, host_users: bool
) -> None:
    """``<path>.securityContext`` of a container (*path* is the container's path)."""
    context = container.get("securityContext")
    if not isinstance(context, Mapping):
        return
    where = f"{path}.securityContext"
    _ids(context, where, errs, ("runAsUser", "runAsGroup"))
    proc_mount = context.get("procMount")
    if proc_mount is not None:
        errs.enum(f"{where}.procMount", proc_mount, PROC_MOUNTS)
        if host_users and proc_mount == "Unmasked":
            errs.invalid(
                f"{where}.procMount", proc_mount, "`hostUsers` must be false to use `Unmasked`"
            )
    _seccomp(context.get("seccompProfile"), f"{where}.seccompProfile", errs)
    if context.get("allowPrivilegeEscalation") is False:
        if context.get("privileged") is True:
            errs.invalid(
                where,
                dict(context),
                "cannot set `allowPrivilegeEscalation` to false and `privileged` to true",
            )
        for cap in as_list(as_dict(context.get("capabilities")).get("add")):
            if cap == "CAP_SYS_ADMIN":
                errs.invalid(
                    where,
                    dict(context),
                    "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` "
                    "CAP_SYS_ADMIN",
                )
    _apparmor(context.get("appArmorProfile"), f"{where}.appArmorProfile", errs)


def _local_path(value: str, path: str, errs: Errors) -> None:
    if posixpath.isabs(value):
        errs.invalid(path, value, "must be a relative path")
    if ".." in value.replace("\\", "/").split("/"):
        errs.invalid(path, value, "must not contain '..'")


def _seccomp(profile: Any, path: str, errs: Errors) -> None:
    if not isinstance(profile, Mapping):
        return
    kind = profile.get("type") or ""
    if not kind:
        errs.required(f"{path}.type", "type is required when seccompProfile is set")
    elif kind not in SECCOMP_TYPES:
        errs.not_supported(f"{path}.type", kind, SECCOMP_TYPES)
    local = profile.get("localhostProfile")
    if kind == "Localhost":
        if local is None:
            errs.required(f"{path}.localhostProfile", "must be set when seccomp type is Localhost")
        else:
            _local_path(str(local), f"{path}.localhostProfile", errs)
    elif local is not None:
        errs.invalid(
            f"{path}.localhostProfile",
            dict(profile),
            "can only be set when seccomp type is Localhost",
        )


def _apparmor(profile: Any, path: str, errs: Errors) -> None:
    if not isinstance(profile, Mapping):
        return
    kind = profile.get("type") or ""
    local = profile.get("localhostProfile")
    if kind == "Localhost":
        if local is None:
            errs.required(f"{path}.localhostProfile", "must be set when AppArmor type is Localhost")
        elif str(local) != str(local).strip():
            errs.invalid(f"{path}.localhostProfile", local, "must not be padded with whitespace")
        elif not str(local):
            errs.required(f"{path}.localhostProfile", "must be set when AppArmor type is Localhost")
        if local is not None and len(str(local)) > 4095:
            errs.too_long(f"{path}.localhostProfile", 4095)
    elif kind in ("RuntimeDefault", "Unconfined"):
        if local is not None:
            errs.invalid(
                f"{path}.localhostProfile", local, "can only be set when AppArmor type is Localhost"
            )
    elif not kind:
        errs.required(f"{path}.type", "type is required when appArmorProfile is set")
    else:
        errs.not_supported(f"{path}.type", kind, APPARMOR_TYPES)
