"""The objects NVIDIA's operator would have made for an NVIDIADriver, from NVIDIA's render goldens.

NVIDIA's render goldens (``../shared/nvidia-render-goldens/nvidiadriver/driver-<case>.yaml``)
are the output of NVIDIA's own driver state for the case's input. Its unit
tests hand the render a few values a live operator computes itself; each is
replaced here by what NVIDIA's live operator sets in the test's cluster
(``REPLACEMENTS`` says which and why). Then what NVIDIA's state skeleton adds
when it syncs (``internal/state/state_skel.go``: ``createOrUpdateObjs``) is
added: the NVIDIADriver as controller owner of every object, the
``nvidia.com/gpu-operator.state: state-driver`` label, and on the DaemonSet
its ``nvidia.com/last-applied-hash`` (an FNV-32 decimal of NVIDIA's Go object,
which nimctl's hash never equals, so nimctl always writes the DaemonSet once).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from manifests.hashing import short_hash
from nimctl_runtime.meta import Obj, dig
from tests.unit.gpu_nvidiadriver import goldens

FIXTURE_NAMESPACE = "test-operator"
STATE_LABEL = "nvidia.com/gpu-operator.state"
HASH_ANNOTATION = "nvidia.com/last-applied-hash"
NVIDIAS_HASH = "3263451180"
"""Any decimal FNV-32: NVIDIA's ``utils.GetObjectHash`` of its Go object."""
FIXTURE_VOLUMES = ("test-cm", "test-host-path", "test-host-path-ro")
OS_ID = "feature.node.kubernetes.io/system-os_release.ID"
OS_VERSION = "feature.node.kubernetes.io/system-os_release.VERSION_ID"
KERNEL = "feature.node.kubernetes.io/kernel-version.full"

REPLACEMENTS = (
    "names: the fixtures hand the template Driver.Name and Driver.AppName "
    "(nvidia-gpu-driver-ubuntu22.04, ...-7c6d7bd86b); the live operator computes getDriverName "
    "(nvidia-<type>-driver-<cr>-<osTag>) and getDriverAppName (nvidia-<type>-driver-<osTag>-"
    "<FNV-32 of the CR's uid[-kernel]>, SafeEncodeString) from the CR in the cluster",
    "namespace: the fixtures' runner sets test-operator; the operator runs in gpu-operator",
    "nodeSelector: the fixtures give no node pool; getNodePools adds the pool's selector "
    "(nvidia.com/gpu.present, the driver owner label, the OS ID and VERSION_ID, and for "
    "precompiled drivers the kernel)",
    "DRIVER_CONFIG_DIGEST: the fixtures hash HostRoot '' and kernelModuleType ''; the live "
    "operator hashes the ClusterPolicy's rootFS and the CRD default 'auto' (the digest "
    "function is checked against NVIDIA's in all 16 fixtures: tests/unit/gpu_nvidiadriver/"
    "test_nvidia_goldens.py)",
    "KERNEL_MODULE_TYPE=auto after DRIVER_CONFIG_DIGEST: the CRD default, which NVIDIA's "
    "template renders there when the spec's kernelModuleType is set",
    "additionalConfigs: the fixtures inject test-cm, test-host-path, test-host-path-ro, which no "
    "NVIDIADriver field produces; left out",
    "GDS/GDRCopy images: the fixtures give the image path; GetImagePath appends -<osTag>",
    "licensing mounts readOnly: the fixtures inject the licensing volume as additionalConfigs "
    "without readOnly; getDriverAdditionalConfigs mounts gridd.conf and the client token "
    "readOnly",
)
LICENSING_MOUNTS = (
    "/drivers/gridd.conf",
    "/drivers/ClientConfigToken/client_configuration_token.tok",
)


def os_tag(node: Mapping[str, Any]) -> str:
    labels = dig(node, "metadata", "labels") or {}
    return f"{labels[OS_ID]}{labels[OS_VERSION]}"


def live_names(cr: Mapping[str, Any], node: Mapping[str, Any]) -> tuple[str, str]:
    """(getDriverName, getDriverAppName) of ``cr`` for ``node``'s pool, as NVIDIA computes them."""
    driver_type = str(dig(cr, "spec", "driverType") or "gpu")
    tag = os_tag(node)
    seed = str(cr["metadata"]["uid"])
    if dig(cr, "spec", "usePrecompiled"):
        seed += "-" + str((dig(node, "metadata", "labels") or {})[KERNEL])
    if driver_type == "vgpu-host-manager":
        name = f"nvidia-vgpu-manager-{cr['metadata']['name']}-{tag}"
    else:
        name = f"nvidia-{driver_type}-driver-{cr['metadata']['name']}-{tag}"
    return name, f"nvidia-{driver_type}-driver-{tag}-{short_hash(seed, 63)}"


def _pool_selector(cr: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, str]:
    labels = dig(node, "metadata", "labels") or {}
    selector = {
        **(dig(cr, "spec", "nodeSelector") or {}),
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu-operator.driver.owner": cr["metadata"]["name"],
        OS_ID: labels[OS_ID],
        OS_VERSION: labels[OS_VERSION],
    }
    if dig(cr, "spec", "usePrecompiled"):
        selector[KERNEL] = labels[KERNEL]
    return selector


def _fix_containers(pod: Obj, digest: str, tag: str, kernel_module_type: str | None) -> None:
    for ctr in [*pod.get("initContainers", []), *pod.get("containers", [])]:
        env = ctr.get("env") or []
        for i, var in enumerate(list(env)):
            if var.get("name") == "DRIVER_CONFIG_DIGEST":
                var["value"] = digest
                names = {e.get("name") for e in env}
                if (
                    ctr.get("name") == "nvidia-driver-ctr"
                    and kernel_module_type
                    and "KERNEL_MODULE_TYPE" not in names
                ):
                    env.insert(i + 1, {"name": "KERNEL_MODULE_TYPE", "value": kernel_module_type})
        if ctr.get("volumeMounts"):
            ctr["volumeMounts"] = [
                m for m in ctr["volumeMounts"] if m.get("name") not in FIXTURE_VOLUMES
            ]
            for m in ctr["volumeMounts"]:
                if m.get("mountPath") in LICENSING_MOUNTS:
                    m["readOnly"] = True
        gds_gdrcopy = ctr.get("name") in ("nvidia-fs-ctr", "nvidia-gdrcopy-ctr")
        if gds_gdrcopy and not str(ctr["image"]).endswith(f"-{tag}"):
            ctr["image"] = f"{ctr['image']}-{tag}"
    if pod.get("volumes"):
        pod["volumes"] = [v for v in pod["volumes"] if v.get("name") not in FIXTURE_VOLUMES]


def nvidia_objects(
    case: str,
    cr: Mapping[str, Any],
    node: Mapping[str, Any],
    *,
    namespace: str,
    digest: str,
) -> list[Obj]:
    """NVIDIA's objects for ``case`` as its live operator would have synced them for ``cr``
    (the NVIDIADriver in the cluster, with its uid) over ``node``'s pool."""
    theirs = goldens.golden(case)
    ds = next(o for o in theirs if o["kind"] == "DaemonSet")
    fixture_app = ds["metadata"]["name"]
    fixture_name = ds["spec"]["template"]["spec"]["serviceAccountName"]
    name, app = live_names(cr, node)
    objects: list[Obj] = goldens.renamed(theirs, {fixture_app: app, fixture_name: name})
    owner = {
        "apiVersion": cr["apiVersion"],
        "kind": cr["kind"],
        "name": cr["metadata"]["name"],
        "uid": cr["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    kernel_module_type = dig(cr, "spec", "kernelModuleType") or "auto"
    out: list[Obj] = []
    for original in objects:
        obj = copy.deepcopy(original)
        meta = obj["metadata"]
        if meta.get("namespace") == FIXTURE_NAMESPACE:
            meta["namespace"] = namespace
        for subject in obj.get("subjects") or []:
            if subject.get("namespace") == FIXTURE_NAMESPACE:
                subject["namespace"] = namespace
        meta["ownerReferences"] = [owner]
        meta.setdefault("labels", {})[STATE_LABEL] = "state-driver"
        if obj["kind"] == "DaemonSet":
            meta.setdefault("annotations", {})[HASH_ANNOTATION] = NVIDIAS_HASH
            pod = obj["spec"]["template"]["spec"]
            pod["nodeSelector"] = {**(pod.get("nodeSelector") or {}), **_pool_selector(cr, node)}
            _fix_containers(pod, digest, os_tag(node), kernel_module_type)
        out.append(obj)
    return out
