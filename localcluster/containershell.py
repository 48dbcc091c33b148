"""The few commands ``kubectl exec`` runs inside a simulated container.

No process runs in localcluster, so a container is what its pod spec and the
cluster say it is: files from its volume mounts (ConfigMap, Secret, projected
ServiceAccount token, downward API) plus ``/etc/hostname``, its environment
(``env`` and ``envFrom`` resolved as the kubelet resolves them) and, on a GPU
node, the GPUs allocated to it. :func:`run` answers:

* ``ls [-l] [-a] [PATH...]`` and ``cat PATH...`` over those files;
* ``env`` and ``printenv [NAME...]``;
* ``hostname``;
* ``nvidia-smi`` and ``nvidia-smi -L`` on a container with ``nvidia.com/gpu``
  limits, printing the node's simulated GPUs;
* ``sh -c '<one of these>'`` (and ``bash -c``), without pipes or redirection.

Anything else exits 127 with a message saying it is not available in
localcluster. Each answer is ``(stdout, stderr, exit code)``.
"""

from __future__ import annotations

import base64
import posixpath
import shlex
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from nimctl_runtime.meta import Obj
from nimctl_runtime.quantity import parse_quantity

from .storage import Storage

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
GPU_RESOURCE = "nvidia.com/gpu"
DRIVER_VERSION = "570.124.06"
CUDA_VERSION = "12.8"
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
COMMANDS = ("ls", "cat", "env", "printenv", "hostname", "nvidia-smi")
NOT_AVAILABLE = 127


@dataclass(frozen=True)
class Result:
    """What a command printed and how it exited."""

    stdout: str = ""
    stderr: str = ""
    code: int = 0


def not_available(command: str) -> Result:
    return Result(
        stderr=(
            f'"{command}" is not available in localcluster: simulated containers run no '
            f"processes. kubectl exec here answers {', '.join(COMMANDS)} "
            "(nvidia-smi in containers with nvidia.com/gpu) and sh -c with one of them.\n"
        ),
        code=NOT_AVAILABLE,
    )


class Container:
    """One container of a pod, as the simulated exec sees it."""

    def __init__(self, storage: Storage, pod: Mapping[str, Any], container: Mapping[str, Any]):
        self.storage = storage
        self.pod = pod
        self.spec = container
        meta = pod.get("metadata") or {}
        self.namespace = str(meta.get("namespace") or "default")
        self.name = str(meta.get("name") or "")

    # ------------------------------------------------------------------ objects

    def _get(self, kind: str, name: str) -> Obj | None:
        try:
            return self.storage.get("v1", kind, name, self.namespace)
        except Exception:
            return None

    def _data(self, kind: str, name: str) -> dict[str, str] | None:
        obj = self._get(kind, name)
        if obj is None:
            return None
        out = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
        if kind == "Secret":
            out = {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in out.items()}
        elif obj.get("binaryData"):
            for key, value in (obj.get("binaryData") or {}).items():
                out[str(key)] = base64.b64decode(str(value)).decode("utf-8", "replace")
        return out

    def _field(self, path: str) -> str:
        meta = self.pod.get("metadata") or {}
        status = self.pod.get("status") or {}
        spec = self.pod.get("spec") or {}
        simple = {
            "metadata.name": meta.get("name"),
            "metadata.namespace": meta.get("namespace"),
            "metadata.uid": meta.get("uid"),
            "spec.nodeName": spec.get("nodeName"),
            "spec.serviceAccountName": spec.get("serviceAccountName"),
            "status.podIP": status.get("podIP"),
            "status.hostIP": status.get("hostIP"),
        }
        if path in simple:
            return str(simple[path] or "")
        for prefix, source in (
            ("metadata.labels", "labels"),
            ("metadata.annotations", "annotations"),
        ):
            if path.startswith(prefix + "['") and path.endswith("']"):
                return str((meta.get(source) or {}).get(path[len(prefix) + 2 : -2], ""))
        return ""

    def _resource(self, ref: Mapping[str, Any]) -> str:
        resource = str(ref.get("resource") or "")
        kind, _, name = resource.partition(".")
        value = ((self.spec.get("resources") or {}).get(kind) or {}).get(name)
        if value is None:
            return ""
        divisor = parse_quantity(str(ref.get("divisor") or "1"))
        amount = parse_quantity(str(value)) / divisor
        return str(int(-(-amount // 1)))

    # ------------------------------------------------------------------ env

    def environment(self) -> list[tuple[str, str]]:
        """The container's environment, in the order the kubelet builds it."""
        env: dict[str, str] = {"PATH": PATH, "HOSTNAME": self.name}
        for source in self.spec.get("envFrom") or []:
            prefix = str(source.get("prefix") or "")
            for kind, key in (("ConfigMap", "configMapRef"), ("Secret", "secretRef")):
                ref = source.get(key)
                if ref:
                    for k, v in (self._data(kind, str(ref.get("name") or "")) or {}).items():
                        env[prefix + k] = v
        for item in self.spec.get("env") or []:
            name = str(item.get("name") or "")
            if "value" in item or not item.get("valueFrom"):
                env[name] = str(item.get("value") or "")
                continue
            source = item["valueFrom"]
            if source.get("fieldRef"):
                env[name] = self._field(str(source["fieldRef"].get("fieldPath") or ""))
            elif source.get("resourceFieldRef"):
                env[name] = self._resource(source["resourceFieldRef"])
            else:
                for kind, key in (("ConfigMap", "configMapKeyRef"), ("Secret", "secretKeyRef")):
                    ref = source.get(key)
                    if ref:
                        data = self._data(kind, str(ref.get("name") or "")) or {}
                        if str(ref.get("key")) in data:
                            env[name] = data[str(ref.get("key"))]
        gpus = self.gpu_count()
        if gpus:
            env.setdefault("NVIDIA_VISIBLE_DEVICES", ",".join(g[2] for g in self.gpus()))
        env.setdefault("KUBERNETES_SERVICE_HOST", "10.96.0.1")
        env.setdefault("KUBERNETES_SERVICE_PORT", "443")
        env.setdefault("KUBERNETES_SERVICE_PORT_HTTPS", "443")
        env.setdefault("KUBERNETES_PORT", "tcp://10.96.0.1:443")
        env.setdefault("HOME", "/root")
        return list(env.items())

    # ------------------------------------------------------------------ files

    def files(self) -> dict[str, str]:
        """Path -> content of every file the container has (as far as localcluster knows)."""
        out: dict[str, str] = {"/etc/hostname": self.name + "\n"}
        volumes = {str(v.get("name")): v for v in (self.pod.get("spec") or {}).get("volumes") or []}
        for mount in self.spec.get("volumeMounts") or []:
            volume = volumes.get(str(mount.get("name")))
            if volume is None:
                continue
            root = str(mount.get("mountPath") or "/")
            sub = str(mount.get("subPath") or "")
            contents = self._volume_files(volume)
            if sub:
                if sub in contents:
                    out[root] = contents[sub]
                continue
            for rel, text in contents.items():
                out[posixpath.join(root, rel)] = text
            if not contents:
                out.setdefault(posixpath.join(root, ""), "")  # an empty directory
        return out

    def _keyed(self, kind: str, source: Mapping[str, Any], name_key: str) -> dict[str, str]:
        data = self._data(kind, str(source.get(name_key) or "")) or {}
        items = source.get("items")
        if items:
            return {
                str(i.get("path")): data[str(i.get("key"))] for i in items if i.get("key") in data
            }
        return data

    def _volume_files(self, volume: Mapping[str, Any]) -> dict[str, str]:
        if volume.get("configMap"):
            return self._keyed("ConfigMap", volume["configMap"], "name")
        if volume.get("secret"):
            return self._keyed("Secret", volume["secret"], "secretName")
        if volume.get("downwardAPI"):
            return self._downward(volume["downwardAPI"].get("items") or [])
        if volume.get("projected"):
            out: dict[str, str] = {}
            for source in volume["projected"].get("sources") or []:
                if source.get("configMap"):
                    out.update(self._keyed("ConfigMap", source["configMap"], "name"))
                elif source.get("secret"):
                    out.update(self._keyed("Secret", source["secret"], "name"))
                elif source.get("downwardAPI"):
                    out.update(self._downward(source["downwardAPI"].get("items") or []))
                elif source.get("serviceAccountToken"):
                    path = str(source["serviceAccountToken"].get("path") or "token")
                    out[path] = "<a projected ServiceAccount token>"
            return out
        return {}

    def _downward(self, items: list[Any]) -> dict[str, str]:
        out: dict[str, str] = {}
        for item in items:
            path = str(item.get("path") or "")
            if item.get("fieldRef"):
                field_path = str(item["fieldRef"].get("fieldPath") or "")
                meta = self.pod.get("metadata") or {}
                if field_path in ("metadata.labels", "metadata.annotations"):
                    values = meta.get(field_path.split(".")[1]) or {}
                    out[path] = "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
                else:
                    out[path] = self._field(field_path)
            elif item.get("resourceFieldRef"):
                out[path] = self._resource(item["resourceFieldRef"])
        return out

    # ------------------------------------------------------------------ GPUs

    def gpu_count(self) -> int:
        limits = (self.spec.get("resources") or {}).get("limits") or {}
        try:
            return int(str(limits.get(GPU_RESOURCE) or "0"))
        except ValueError:
            return 0

    def node(self) -> Obj | None:
        name = str((self.pod.get("spec") or {}).get("nodeName") or "")
        if not name:
            return None
        try:
            return self.storage.get("v1", "Node", name)
        except Exception:
            return None

    def gpus(self) -> list[tuple[str, int, str]]:
        """(name, memory MiB, UUID) of each GPU allocated to the container."""
        node = self.node() or {}
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        product = str(
            labels.get("nvidia.com/gpu.product")
            or annotations.get("localcluster.nimctl.io/gpu-product")
            or "NVIDIA-GPU"
        )
        memory_text = str(
            labels.get("nvidia.com/gpu.memory")
            or annotations.get("localcluster.nimctl.io/gpu-memory")
            or "0"
        )
        memory = int(memory_text) if memory_text.isdigit() else 0
        if not memory:
            memory = _memory_from_name(product)
        node_name = str(meta.get("name") or "")
        return [
            (
                product.replace("-", " "),
                memory,
                f"GPU-{uuid.uuid5(uuid.NAMESPACE_URL, f'localcluster/{node_name}/{i}')}",
            )
            for i in range(self.gpu_count())
        ]


def _memory_from_name(product: str) -> int:
    for part in product.split("-"):
        if part.endswith("GB") and part[:-2].isdigit():
            return int(part[:-2]) * 1024
    return 0


# ---------------------------------------------------------------------- commands


def _ls(c: Container, args: list[str]) -> Result:
    flags = "".join(a[1:] for a in args if a.startswith("-") and len(a) > 1)
    paths = [a for a in args if not a.startswith("-") or a == "-"] or ["/"]
    files = c.files()
    out: list[str] = []
    err: list[str] = []
    for raw in paths:
        path = posixpath.normpath(raw if raw.startswith("/") else "/" + raw)
        if path in files:
            out.append(_ls_line(raw, files[path], "l" in flags, False))
            continue
        prefix = path.rstrip("/") + "/"
        children: dict[str, bool] = {}
        for file_path in files:
            if file_path.startswith(prefix) and file_path != prefix:
                rest = file_path[len(prefix) :]
                head, _, tail = rest.partition("/")
                if head:
                    children[head] = children.get(head, False) or bool(tail) or rest.endswith("/")
        if not children and path != "/" and prefix not in files:
            err.append(f"ls: cannot access '{raw}': No such file or directory")
            continue
        if len(paths) > 1:
            out.append(f"{raw}:")
        names = sorted(children)
        if "a" in flags:
            names = [".", "..", *names]
        for name in names:
            is_dir = name in (".", "..") or children.get(name, False)
            content = files.get(prefix + name, "")
            out.append(_ls_line(name, content, "l" in flags, is_dir))
    code = 2 if err else 0
    return Result("".join(line + "\n" for line in out), "".join(e + "\n" for e in err), code)


def _ls_line(name: str, content: str, long: bool, is_dir: bool) -> str:
    if not long:
        return name
    mode = "drwxr-xr-x" if is_dir else "-rw-r--r--"
    size = 4096 if is_dir else len(content.encode())
    return f"{mode} 1 root root {size:>8} Jan  1 00:00 {name}"


def _cat(c: Container, args: list[str]) -> Result:
    files = c.files()
    out: list[str] = []
    err: list[str] = []
    for raw in args or []:
        path = posixpath.normpath(raw if raw.startswith("/") else "/" + raw)
        if path in files:
            out.append(files[path])
        elif any(f.startswith(path.rstrip("/") + "/") for f in files):
            err.append(f"cat: {raw}: Is a directory")
        else:
            err.append(f"cat: {raw}: No such file or directory")
    return Result("".join(out), "".join(e + "\n" for e in err), 1 if err else 0)


def _printenv(c: Container, args: list[str]) -> Result:
    env = dict(c.environment())
    if not args:
        return Result("".join(f"{k}={v}\n" for k, v in c.environment()))
    missing = [a for a in args if a not in env]
    return Result("".join(env[a] + "\n" for a in args if a in env), "", 1 if missing else 0)


def nvidia_smi(c: Container, args: list[str], now: datetime | None = None) -> Result:
    """``nvidia-smi`` (the summary table) or ``nvidia-smi -L`` (one line per GPU)."""
    node = c.node() or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    has_gpus = bool(((node.get("status") or {}).get("capacity") or {}).get(GPU_RESOURCE)) or any(
        k.startswith("nvidia.com/gpu") for k in labels
    )
    if not has_gpus:
        return Result(
            stderr="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.\n",
            code=9,
        )
    gpus = c.gpus()
    if not gpus:
        return Result(stdout="No devices were found\n", code=6)
    if args and args[0] in ("-L", "--list-gpus"):
        return Result("".join(f"GPU {i}: {n} (UUID: {u})\n" for i, (n, _, u) in enumerate(gpus)))
    if args:
        return not_available("nvidia-smi " + " ".join(args))
    driver = str(labels.get("nvidia.com/cuda.driver-version.full") or DRIVER_VERSION)
    cuda = str(
        ".".join(
            str(labels.get(f"nvidia.com/cuda.runtime-version.{part}") or "")
            for part in ("major", "minor")
        ).strip(".")
        or CUDA_VERSION
    )
    rule = "+" + "-" * 89 + "+"
    bar = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
    when = (now or datetime.now(UTC)).strftime("%a %b %d %H:%M:%S %Y")
    title = (
        f"NVIDIA-SMI {driver}".ljust(34)
        + f"Driver Version: {driver}".ljust(31)
        + f"CUDA Version: {cuda}"
    )
    lines = [
        when,
        rule,
        _wide(title),
        "|" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "|",
        _row(
            "GPU  Name                 Persistence-M",
            "Bus-Id          Disp.A",
            "Volatile Uncorr. ECC",
        ),
        _row(
            "Fan  Temp   Perf          Pwr:Usage/Cap",
            "Memory-Usage".rjust(22),
            "GPU-Util  Compute M.",
        ),
        _row("", "", "MIG M.".rjust(20)),
        "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
    ]
    for i, (name, memory, _) in enumerate(gpus):
        bus = f"00000000:{0x18 + 0x10 * i:02X}:00.0"
        lines += [
            _row(f"{i:>3}  {name[:28]:<28}   On", f"{bus:>18} Off", "0".rjust(20)),
            _row(
                "N/A   33C    P0             70W /  700W",
                f"0MiB / {memory}MiB".rjust(22),
                "0%".rjust(6) + "      Default",
            ),
            _row("", "", "Disabled".rjust(20)),
            bar,
        ]
    lines += [
        "",
        rule,
        _wide("Processes:"),
        _wide(" GPU   GI   CI              PID   Type   Process name" + " " * 24 + "GPU Memory"),
        _wide("       ID   ID" + " " * 63 + "Usage"),
        "|" + "=" * 89 + "|",
        _wide(" No running processes found"),
        rule,
    ]
    return Result("\n".join(lines) + "\n")


def _row(left: str, middle: str, right: str) -> str:
    return f"| {left:<39} | {middle:<22} | {right:<20} |"


def _wide(text: str) -> str:
    return f"| {text:<87} |"


def run(container: Container, argv: list[str]) -> Result:
    """Run *argv* in the simulated *container*."""
    if not argv:
        return Result(stderr="you must specify at least one command for the container\n", code=1)
    command, args = argv[0], argv[1:]
    base = posixpath.basename(command)
    if base in ("sh", "bash", "ash", "dash") and len(args) >= 2 and args[0] == "-c":
        script = args[1]
        if any(ch in script for ch in "|;&<>`$("):
            return not_available(script)
        try:
            inner = shlex.split(script)
        except ValueError:
            return not_available(script)
        return run(container, inner) if inner else Result()
    if base == "ls":
        return _ls(container, args)
    if base == "cat":
        return _cat(container, args)
    if base == "env" and not args:
        return _printenv(container, [])
    if base == "printenv":
        return _printenv(container, args)
    if base == "hostname" and not args:
        return Result(container.name + "\n")
    if base == "nvidia-smi":
        return nvidia_smi(container, args)
    return not_available(" ".join(argv))
