"""State ``state-dra-driver`` of a GPUCluster: NVIDIA's DRA driver for GPUs.

Always rendered (gpucluster.md §4.1): the kubelet plugin DaemonSet
``nvidia-dra-driver-kubelet-plugin`` (init ``driver-validation`` waiting for the
driver, container ``gpus`` and, with ComputeDomains enabled, ``compute-domains``),
its RBAC, the DeviceClasses ``gpu.nvidia.com``, ``mig.nvidia.com`` and
``vfio.gpu.nvidia.com``, and the ValidatingAdmissionPolicy that keeps each
plugin to its own node's ResourceSlices. With ComputeDomains enabled also the
controller Deployment ``nvidia-dra-driver-controller``, the daemon's RBAC and
the two compute-domain DeviceClasses.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Final

from api.base import to_kubernetes
from api.nvidia.v1.clusterpolicy import ResourceRequirements
from api.nvidia.v1alpha1.gpucluster import (
    DEFAULT_COMPUTE_DOMAINS_HEALTHCHECK_PORT,
    DEFAULT_GPUS_HEALTHCHECK_PORT,
    DRADriverHealthcheckSpec,
    DRADriverKubeletPluginSpec,
    GPUCluster,
)
from nimctl_runtime.quantity import QuantityError, parse_quantity
from platforms.gpu.common import env, field_env, host_path, mount
from platforms.gpu.errors import RenderError
from platforms.gpu.gpucluster_common import (
    GPUClusterFacts,
    dra_api_version,
    env_list,
    image_of,
    object_meta,
    pod_meta,
    pull_secrets,
    tolerations,
)
from platforms.gpu.gpucluster_rbac import binding, role, rule, service_account

__all__ = ["STATE", "build", "feature_gates_value", "healthcheck_port", "init_resources"]

STATE: Final = "state-dra-driver"
PLUGIN: Final = "nvidia-dra-driver-kubelet-plugin"
PLUGIN_SA: Final = "nvidia-dra-driver-kubeletplugin"
CONTROLLER: Final = "nvidia-dra-driver-controller"
CD_DAEMON_SA: Final = "compute-domain-daemon-service-account"
CD_DAEMON: Final = "compute-domain-daemon"
POLICY: Final = "resourceslices-policy-nvidia-dra-driver"
APP_NAME: Final = "nvidia-dra-driver"
DEFAULT_DRIVER_INSTALL_DIR: Final = "/run/nvidia/driver"
VALIDATIONS: Final = "/run/nvidia/validations"
READ: Final = ("get", "list", "watch")

# The kubelet plugin's entrypoint (ours; the steps are NVIDIA's): export what the
# driver-validation init container found, optionally keep the plugin from
# re-creating GPU device nodes by masking the driver's params file, then run.
_ENTRYPOINT: Final = """\
set -a
. /run/nvidia/validations/driver-ready
set +a
if [ "$MASK_NVIDIA_DRIVER_PARAMS" = "true" ]; then
  sed 's/^ModifyDeviceFiles: 1$/ModifyDeviceFiles: 0/' /proc/driver/nvidia/params > /root/gpu-params
  mount --bind /root/gpu-params /proc/driver/nvidia/params
fi
exec {binary} -v "$LOG_VERBOSITY\""""


def feature_gates_value(gates: dict[str, bool] | None) -> str:
    """``FEATURE_GATES``: ``Name=bool`` sorted by name, comma separated."""
    return ",".join(f"{k}={'true' if v else 'false'}" for k, v in sorted((gates or {}).items()))


def healthcheck_port(hc: DRADriverHealthcheckSpec | None, default: int) -> int:
    """The plugin's health port: -1 when disabled, else the given or default port."""
    if hc is not None and not hc.enabled:
        return -1
    if hc is not None and hc.port is not None:
        return hc.port
    return default


def _quantity(value: int | str, where: str) -> Fraction:
    try:
        return parse_quantity(value)
    except QuantityError as err:
        raise RenderError(f"{where}: {err}") from None


def init_resources(*specs: ResourceRequirements | None) -> dict[str, Any] | None:
    """The init container's resources: per resource the largest request and limit of
    the plugin containers, a limit raised to its request; None when there are none."""
    out: dict[str, dict[str, int | str]] = {}
    for part in ("requests", "limits"):
        best: dict[str, tuple[Fraction, int | str]] = {}
        for spec in specs:
            for name, value in (getattr(spec, part, None) or {}).items():
                q = _quantity(value, f"resources.{part}.{name}")
                if name not in best or q > best[name][0]:
                    best[name] = (q, value)
        if best:
            out[part] = {k: v[1] for k, v in best.items()}
    for name, value in (out.get("requests") or {}).items():
        limit = (out.get("limits") or {}).get(name)
        if limit is not None and _quantity(value, name) > _quantity(limit, name):
            out["limits"][name] = value
    return out or None


def _labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": APP_NAME, "app.kubernetes.io/component": component}


def build(cr: GPUCluster, facts: GPUClusterFacts) -> list[dict[str, Any]]:
    """Every object of the state, in NVIDIA's order."""
    api_version = dra_api_version(facts)
    spec = cr.spec.dra_driver
    image = image_of(spec, spec.image_env, facts.operator_env, "draDriver")
    validator = image_of(None, "VALIDATOR_IMAGE", facts.operator_env, "draDriver")
    ns = facts.operator_namespace
    cd = spec.compute_domains_enabled()
    out: list[dict[str, Any]] = [
        service_account(PLUGIN_SA, ns, _labels("nvidia-dra-driver-kubelet-plugin"))
    ]
    if cd:
        out += _controller_rbac(ns) + _daemon_rbac(ns)
        out += [
            role(PLUGIN_SA, [rule(["resource.nvidia.com"], ["computedomaincliques"], ["get"])], ns),
            binding(PLUGIN_SA, PLUGIN_SA, ns, ns),
        ]
    crud = ["get", "list", "watch", "create", "update", "patch", "delete"]
    out += [
        role(f"{PLUGIN_SA}-mps", [rule(["apps"], ["deployments"], crud)], ns),
        binding(f"{PLUGIN_SA}-mps", PLUGIN_SA, ns, ns),
        role(f"{PLUGIN_SA}-driver-validation", [rule(["apps"], ["daemonsets"], ["list"])], ns),
        binding(f"{PLUGIN_SA}-driver-validation", PLUGIN_SA, ns, ns),
        role(
            PLUGIN_SA,
            [
                rule(["resource.nvidia.com"], ["computedomains"], READ),
                rule(["resource.k8s.io"], ["resourceclaims"], READ),
                rule(
                    ["resource.k8s.io"],
                    ["resourceslices"],
                    [*READ, "create", "update", "delete"],
                ),
                rule([""], ["nodes"], [*READ, "update", "patch"]),
                rule([""], ["pods"], READ),
            ],
        ),
        binding(PLUGIN_SA, PLUGIN_SA, ns),
    ]
    out += _device_classes(api_version, cd)
    out.append(_daemonset(cr, facts, image, validator))
    if cd:
        out.append(_controller(cr, facts, image))
    out += _admission_policy(ns)
    return out


def _controller_rbac(ns: str) -> list[dict[str, Any]]:
    return [
        service_account(CONTROLLER, ns, _labels(CONTROLLER)),
        role(
            CONTROLLER,
            [
                rule(["resource.nvidia.com"], ["computedomains"], [*READ, "update"]),
                rule(["resource.nvidia.com"], ["computedomains/status"], ["update"]),
                rule(
                    ["resource.k8s.io"],
                    ["resourceclaimtemplates"],
                    [*READ, "create", "update", "delete"],
                ),
                rule(["coordination.k8s.io"], ["leases"], ["get", "create", "update"]),
                rule([""], ["nodes"], [*READ, "update"]),
                rule([""], ["pods"], READ),
            ],
        ),
        role(
            CONTROLLER,
            [
                rule(["apps"], ["daemonsets"], [*READ, "create", "update", "patch", "delete"]),
                rule(["resource.nvidia.com"], ["computedomaincliques"], [*READ, "update"]),
            ],
            ns,
        ),
        binding(CONTROLLER, CONTROLLER, ns),
        binding(CONTROLLER, CONTROLLER, ns, ns),
    ]


def _daemon_rbac(ns: str) -> list[dict[str, Any]]:
    return [
        service_account(CD_DAEMON_SA, ns, _labels(CD_DAEMON)),
        role(
            CD_DAEMON,
            [
                rule(
                    ["resource.nvidia.com"],
                    ["computedomains", "computedomains/status"],
                    [*READ, "update", "patch"],
                ),
                rule(
                    ["resource.nvidia.com"],
                    ["computedomaincliques"],
                    [*READ, "create", "update", "patch"],
                ),
                rule([""], ["pods"], [*READ, "patch"]),
            ],
        ),
        binding(CD_DAEMON, CD_DAEMON_SA, ns),
    ]


def _device_class(api_version: str, name: str, expression: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def _device_classes(api_version: str, cd: bool) -> list[dict[str, Any]]:
    def gpu(kind: str) -> str:
        return (
            "device.driver == 'gpu.nvidia.com' && "
            f"device.attributes['gpu.nvidia.com'].type == '{kind}'"
        )

    cd_attr = "device.attributes['compute-domain.nvidia.com']"
    out = [
        _device_class(api_version, "gpu.nvidia.com", gpu("gpu")),
        _device_class(api_version, "mig.nvidia.com", gpu("mig")),
    ]
    if cd:
        out += [
            _device_class(
                api_version,
                "compute-domain-daemon.nvidia.com",
                f"device.driver == 'compute-domain.nvidia.com' && {cd_attr}.type == 'daemon'",
            ),
            _device_class(
                api_version,
                "compute-domain-default-channel.nvidia.com",
                f"device.driver == 'compute-domain.nvidia.com' && {cd_attr}.type == 'channel' "
                f"&& {cd_attr}.id == 0",
            ),
        ]
    out.append(_device_class(api_version, "vfio.gpu.nvidia.com", gpu("vfio")))
    return out


def _plugin_container(
    cr: GPUCluster,
    name: str,
    binary: str,
    image: str,
    plugin: DRADriverKubeletPluginSpec,
    *,
    port: int,
    http: str,
    liveness_period: int,
    gpus: bool,
) -> dict[str, Any]:
    spec = cr.spec.dra_driver
    kubelet = cr.spec.host_paths.kubelet_root_dir or "/var/lib/kubelet"
    env_vars = [
        env("HTTP_ENDPOINT", http),
        env("METRICS_PATH", "/metrics"),
        env("LOG_VERBOSITY", "4"),
        env("MASK_NVIDIA_DRIVER_PARAMS", ""),
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        env("CDI_ROOT", "/var/run/cdi"),
    ]
    if gpus:
        env_vars.append(env("HOST_ROOT", "/host"))
    env_vars += [
        env("NVIDIA_MIG_CONFIG_DEVICES", "all"),
        field_env("NODE_NAME", "spec.nodeName"),
        field_env("NAMESPACE", "metadata.namespace"),
    ]
    if gpus:
        env_vars.append(env("IMAGE_NAME", image))
    env_vars += [
        env("KUBELET_REGISTRAR_DIRECTORY_PATH", f"{kubelet}/plugins_registry"),
        env("KUBELET_PLUGINS_DIRECTORY_PATH", f"{kubelet}/plugins"),
        env("HEALTHCHECK_PORT", str(port)),
    ]
    if not gpus:
        env_vars.append(env("GPU_CLIQUE_LABEL_ENABLED", "true"))
    if spec.feature_gates:
        env_vars.append(env("FEATURE_GATES", feature_gates_value(spec.feature_gates)))
    env_vars += env_list(plugin.env)
    out: dict[str, Any] = {"name": name, "image": image}
    if spec.image_pull_policy:
        out["imagePullPolicy"] = spec.image_pull_policy
    out["securityContext"] = {"privileged": True}
    out["command"] = ["bash", "-c"]
    out["args"] = [_ENTRYPOINT.format(binary=binary)]
    out["env"] = env_vars
    if port > 0:
        grpc = {"port": port, "service": "liveness"}
        out["startupProbe"] = {
            "grpc": dict(grpc), "failureThreshold": 600, "periodSeconds": 1, "timeoutSeconds": 10,
        }  # fmt: skip
        out["livenessProbe"] = {
            "grpc": dict(grpc),
            "failureThreshold": 3,
            "periodSeconds": liveness_period,
            "timeoutSeconds": 10,
        }
    if plugin.resources is not None:
        out["resources"] = to_kubernetes(plugin.resources)
    mounts = [
        mount("plugins-registry", f"{kubelet}/plugins_registry"),
        mount("plugins", f"{kubelet}/plugins", propagation="Bidirectional"),
        mount("cdi", "/var/run/cdi"),
        mount("validations", VALIDATIONS, read_only=True),
        mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
        mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
    ]
    if gpus and _passthrough(cr):
        mounts += [
            mount("lib-modules", "/lib/modules/", read_only=True, propagation="HostToContainer"),
            mount("sysfs", "/sys/", propagation="Bidirectional"),
            mount("procfs", "/proc/", propagation="Bidirectional"),
        ]
    out["volumeMounts"] = mounts
    return out


def _passthrough(cr: GPUCluster) -> bool:
    return bool((cr.spec.dra_driver.feature_gates or {}).get("PassthroughSupport"))


def _daemonset(
    cr: GPUCluster, facts: GPUClusterFacts, image: str, validator: str
) -> dict[str, Any]:
    spec = cr.spec.dra_driver
    ds_spec = cr.spec.daemonsets
    cd = spec.compute_domains_enabled()
    install_dir = cr.spec.host_paths.driver_install_dir or DEFAULT_DRIVER_INSTALL_DIR
    kubelet = cr.spec.host_paths.kubelet_root_dir or "/var/lib/kubelet"
    labels = {**_labels(PLUGIN), "app": PLUGIN}
    gpus_port = healthcheck_port(
        spec.gpus.kubelet_plugin.healthcheck, DEFAULT_GPUS_HEALTHCHECK_PORT
    )
    containers = [
        _plugin_container(
            cr, "gpus", "gpu-kubelet-plugin", image, spec.gpus.kubelet_plugin, port=gpus_port,
            http=":8080", liveness_period=30, gpus=True,
        )
    ]  # fmt: skip
    resources = [spec.gpus.kubelet_plugin.resources]
    if cd and spec.compute_domains is not None:
        plugin = spec.compute_domains.kubelet_plugin
        port = healthcheck_port(plugin.healthcheck, DEFAULT_COMPUTE_DOMAINS_HEALTHCHECK_PORT)
        containers.append(
            _plugin_container(
                cr, "compute-domains", "compute-domain-kubelet-plugin", image, plugin, port=port,
                http=":8081", liveness_period=10, gpus=False,
            )
        )  # fmt: skip
        resources.append(plugin.resources)
    init: dict[str, Any] = {"name": "driver-validation", "image": validator}
    if spec.image_pull_policy:
        init["imagePullPolicy"] = spec.image_pull_policy
    init["command"] = ["nvidia-validator"]
    merged = init_resources(*resources)
    if merged is not None:
        init["resources"] = merged
    init["securityContext"] = {"privileged": True, "runAsUser": 0}
    init["env"] = [
        env("COMPONENT", "driver"),
        env("WITH_WAIT", "true"),
        env("DRIVER_VALIDATION_SKIP_GPU_INIT", "true"),
        env("DISABLE_DEV_CHAR_SYMLINK_CREATION", "true"),
        field_env("OPERATOR_NAMESPACE", "metadata.namespace"),
        env("HOST_ROOT", "/"),
        env("DRIVER_INSTALL_DIR", install_dir),
        env("DRIVER_INSTALL_DIR_CTR_PATH", "/driver-root"),
    ]
    init["volumeMounts"] = [
        mount("host-root", "/host", read_only=True, propagation="HostToContainer"),
        mount("driver-install-dir", "/driver-root", propagation="HostToContainer"),
        mount("validations", VALIDATIONS),
    ]
    volumes = [
        host_path("plugins-registry", f"{kubelet}/plugins_registry"),
        host_path("plugins", f"{kubelet}/plugins"),
        host_path("cdi", "/var/run/cdi"),
        host_path("host-root", "/"),
        host_path("driver-install-dir", install_dir, "DirectoryOrCreate"),
        host_path("validations", VALIDATIONS, "DirectoryOrCreate"),
    ]
    if _passthrough(cr):
        volumes += [
            host_path("lib-modules", "/lib/modules/", "Directory"),
            host_path("sysfs", "/sys/", "Directory"),
            host_path("procfs", "/proc/", "Directory"),
        ]
    pod: dict[str, Any] = {
        "priorityClassName": ds_spec.priority_class_name or "system-node-critical",
        "serviceAccountName": PLUGIN_SA,
    }
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = pull_secrets(spec.image_pull_secrets)
    pod["nodeSelector"] = {"nvidia.com/gpu.deploy.dra-driver": "true"}
    pod["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    _term("feature.node.kubernetes.io/pci-10de.present", "true"),
                    _term("feature.node.kubernetes.io/cpu-model.vendor_id", "NVIDIA"),
                    _term("nvidia.com/gpu.present", "true"),
                ]
            }
        }
    }
    if ds_spec.tolerations:
        pod["tolerations"] = tolerations(ds_spec)
    pod["initContainers"] = [init]
    pod["containers"] = containers
    pod["volumes"] = volumes
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": object_meta(PLUGIN, facts.operator_namespace, labels, ds_spec),
        "spec": {
            "selector": {"matchLabels": {"app": PLUGIN}},
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxUnavailable": "100%"},
            },
            "template": {"metadata": pod_meta(labels, ds_spec), "spec": pod},
        },
    }


def _term(key: str, value: str) -> dict[str, Any]:
    return {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}]}


def _controller(cr: GPUCluster, facts: GPUClusterFacts, image: str) -> dict[str, Any]:
    spec = cr.spec.dra_driver
    ds_spec = cr.spec.daemonsets
    ns = facts.operator_namespace
    controller = spec.compute_domains.controller if spec.compute_domains else None
    labels = {**_labels(CONTROLLER), "app": CONTROLLER}
    env_vars = [
        env("HTTP_ENDPOINT", ":8080"),
        env("METRICS_PATH", "/metrics"),
        env("PPROF_PATH", ""),
        env("LOG_VERBOSITY", "4"),
        env("LOG_VERBOSITY_CD_DAEMON", "4"),
        field_env("POD_NAME", "metadata.name"),
        field_env("NAMESPACE", "metadata.namespace"),
        env("IMAGE_NAME", image),
        env("NVIDIA_VISIBLE_DEVICES", "void"),
        env("LEADER_ELECTION_ENABLED", "false"),
        env("LEADER_ELECTION_LEASE_LOCK_NAME", CONTROLLER),
        env("LEADER_ELECTION_LEASE_LOCK_NAMESPACE", ns),
        env("LEADER_ELECTION_LEASE_DURATION", "15s"),
        env("LEADER_ELECTION_RENEW_DEADLINE", "10s"),
        env("LEADER_ELECTION_RETRY_PERIOD", "2s"),
    ]
    if spec.feature_gates:
        env_vars.append(env("FEATURE_GATES", feature_gates_value(spec.feature_gates)))
    env_vars += env_list(controller.env if controller else None)
    container: dict[str, Any] = {"name": "compute-domain", "image": image}
    if spec.image_pull_policy:
        container["imagePullPolicy"] = spec.image_pull_policy
    container["command"] = ["compute-domain-controller", "-v", "$(LOG_VERBOSITY)"]
    container["env"] = env_vars
    if controller is not None and controller.resources is not None:
        container["resources"] = to_kubernetes(controller.resources)
    pod: dict[str, Any] = {
        "priorityClassName": ds_spec.priority_class_name or "system-node-critical",
        "serviceAccountName": CONTROLLER,
    }
    if spec.image_pull_secrets:
        pod["imagePullSecrets"] = pull_secrets(spec.image_pull_secrets)
    pod["affinity"] = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "preference": {
                        "matchExpressions": [
                            {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"}
                        ]
                    },
                    "weight": 100,
                }
            ]
        },
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "podAffinityTerm": {
                        "labelSelector": {"matchLabels": {"app": CONTROLLER}},
                        "topologyKey": "kubernetes.io/hostname",
                    },
                    "weight": 100,
                }
            ]
        },
    }
    pod["tolerations"] = [
        {
            "effect": "NoSchedule",
            "key": "node-role.kubernetes.io/control-plane",
            "operator": "Exists",
        },
        {"effect": "NoSchedule", "key": "node-role.kubernetes.io/master", "operator": "Exists"},
        {"key": "CriticalAddonsOnly", "operator": "Exists"},
        *tolerations(ds_spec),
    ]
    pod["containers"] = [container]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(CONTROLLER, ns, labels, ds_spec),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": CONTROLLER}},
            "template": {"metadata": pod_meta(labels, ds_spec), "spec": pod},
        },
    }


def _admission_policy(ns: str) -> list[dict[str, Any]]:
    """Each kubelet plugin may write only its own node's ResourceSlices."""
    api = "admissionregistration.k8s.io/v1"
    user = f"system:serviceaccount:{ns}:{PLUGIN_SA}"
    subject = '(request.operation == "DELETE" ? oldObject : object).spec'
    policy = {
        "apiVersion": api,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "matchConditions": [
                {"name": "isRestrictedUser", "expression": f'request.userInfo.username == "{user}"'}
            ],
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["resource.k8s.io"],
                        "apiVersions": ["v1", "v1beta1", "v1beta2"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["resourceslices"],
                    }
                ]
            },
            "variables": [
                {
                    "name": "userNodeName",
                    "expression": "request.userInfo.extra[?'authentication.kubernetes.io/"
                    "node-name'][0].orValue('')",
                },
                {"name": "objectNodeName", "expression": f'{subject}.?nodeName.orValue("")'},
                {
                    "name": "nodeSelectorValue",
                    "expression": f"{subject}.?nodeSelector.orValue(null)",
                },
                {"name": "allNodesValue", "expression": f"{subject}.?allNodes.orValue(false)"},
            ],
            "validations": [
                {
                    "expression": 'variables.userNodeName != ""',
                    "message": "no node association found for user, this user must run in a "
                    "pod on a node and ServiceAccountTokenPodNodeInfo must be enabled",
                },
                {
                    "expression": "variables.userNodeName == variables.objectNodeName || "
                    "variables.allNodesValue == true || variables.nodeSelectorValue != null",
                    "messageExpression": '"this user running on node \'"+variables.userNodeName'
                    '+"\' may not modify cluster or node resourceslices"',
                },
            ],
        },
    }
    binding_ = {
        "apiVersion": api,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY},
        "spec": {"policyName": POLICY, "validationActions": ["Deny"]},
    }
    return [policy, binding_]
