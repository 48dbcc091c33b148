"""What kube-apiserver refuses with a 422, localcluster refuses with the same words.

Each row is an object a real API server (v1.32+) rejects, the field path and the
message of its Status cause. The messages are kube-apiserver's (field.Error's
wording); where kube-apiserver prints a Go struct dump of a composite value,
localcluster prints compact JSON.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from localcluster.validation_builtin import validate

CONTAINER = {"name": "nim", "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3"}


def deployment(**changes: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "metadata": {"name": "llm"},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "llm"}},
            "template": {
                "metadata": {"labels": {"app": "llm"}},
                "spec": {"containers": [dict(CONTAINER)], "restartPolicy": "Always"},
            },
        },
    }
    for path, value in changes.items():
        node = obj
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        if isinstance(node, list):
            node[int(keys[-1])] = value
        else:
            node[keys[-1]] = value
    return obj


def container(**fields: Any) -> list[dict[str, Any]]:
    return [{**CONTAINER, **fields}]


SERVICE = {"spec": {"type": "ClusterIP", "ports": [{"port": 8000, "targetPort": 8000}]}}
INGRESS_PATH = {
    "path": "/",
    "pathType": "Prefix",
    "backend": {"service": {"name": "llm", "port": {"number": 8000}}},
}
INGRESS = {"rules": [{"http": {"paths": [INGRESS_PATH]}}]}
HPA = {
    "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llm"},
    "minReplicas": 1,
    "maxReplicas": 3,
}

REFUSED: list[tuple[str, str, dict[str, Any], str, str]] = [
    (
        "apps",
        "Deployment",
        deployment(spec__template__spec__containers=container(imagePullPolicy="IfNotPresnt")),
        "spec.template.spec.containers[0].imagePullPolicy",
        'Unsupported value: "IfNotPresnt": supported values: "Always", "IfNotPresent", "Never"',
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__template__spec__containers=container(image="")),
        "spec.template.spec.containers[0].image",
        "Required value",
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__template__spec__containers=container(name="Nim")),
        "spec.template.spec.containers[0].name",
        'Invalid value: "Nim": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character "
        "(e.g. 'my-name',  or '123-abc', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__template__spec__restartPolicy="Never"),
        "spec.template.spec.restartPolicy",
        'Unsupported value: "Never": supported values: "Always"',
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__replicas=-1),
        "spec.replicas",
        "Invalid value: -1: must be greater than or equal to 0",
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__template__metadata={"labels": {"app": "other"}}),
        "spec.template.metadata.labels",
        'Invalid value: {"app":"other"}: `selector` does not match template `labels`',
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__strategy={"type": "Canary"}),
        "spec.strategy.type",
        'Unsupported value: "Canary": supported values: "Recreate", "RollingUpdate"',
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__strategy={"type": "Recreate", "rollingUpdate": {"maxSurge": 1}}),
        "spec.strategy.rollingUpdate",
        "Forbidden: may not be specified when strategy `type` is 'Recreate'",
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__strategy={
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 0},
            }
        ),
        "spec.strategy.rollingUpdate.maxUnavailable",
        "Invalid value: 0: may not be 0 when `maxSurge` is 0",
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__containers=container(
                resources={"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}
            )
        ),
        "spec.template.spec.containers[0].resources.requests",
        'Invalid value: "2": must be less than or equal to cpu limit of 1',
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__containers=container(
                resources={"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "2"}}
            )
        ),
        "spec.template.spec.containers[0].resources.requests",
        'Invalid value: "2": must be equal to nvidia.com/gpu limit of 1',
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__containers=container(
                resources={"requests": {"nvidia.com/gpu": "1"}}
            )
        ),
        "spec.template.spec.containers[0].resources.limits",
        "Required value: Limit must be set for non overcommitable resources",
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__containers=container(resources={"limits": {"memory": "-1Gi"}})
        ),
        "spec.template.spec.containers[0].resources.limits[memory]",
        'Invalid value: "-1Gi": must be greater than or equal to 0',
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__containers=container(
                volumeMounts=[{"name": "cache", "mountPath": "/model-store"}]
            )
        ),
        "spec.template.spec.containers[0].volumeMounts[0].name",
        'Not found: "cache"',
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__template__spec__volumes=[{"name": "cache"}]),
        "spec.template.spec.volumes[0]",
        "Required value: must specify a volume type",
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__template__spec__containers=container(ports=[{"containerPort": 70000}])),
        "spec.template.spec.containers[0].ports[0].containerPort",
        "Invalid value: 70000: must be between 1 and 65535, inclusive",
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__containers=container(
                ports=[{"containerPort": 8000, "protocol": "tcp"}]
            )
        ),
        "spec.template.spec.containers[0].ports[0].protocol",
        'Unsupported value: "tcp": supported values: "SCTP", "TCP", "UDP"',
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__containers=container(
                readinessProbe={"httpGet": {"path": "/v1/health/ready", "port": 0}}
            )
        ),
        "spec.template.spec.containers[0].readinessProbe.httpGet.port",
        "Invalid value: 0: must be between 1 and 65535, inclusive",
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__template__spec__containers=container(livenessProbe={"periodSeconds": 5})),
        "spec.template.spec.containers[0].livenessProbe",
        "Required value: must specify a handler type",
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__containers=container(
                env=[{"name": "NGC_API_KEY", "valueFrom": {"secretKeyRef": {"name": "ngc"}}}]
            )
        ),
        "spec.template.spec.containers[0].env[0].valueFrom.secretKeyRef.key",
        "Required value",
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__tolerations=[{"key": "nvidia.com/gpu", "operator": "exists"}]
        ),
        "spec.template.spec.tolerations[0].operator",
        'Unsupported value: "exists": supported values: "Equal", "Exists"',
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__selector=None),
        "spec.selector",
        "Required value",
    ),
    (
        "batch",
        "Job",
        {"spec": {"template": {"spec": {"containers": [CONTAINER], "restartPolicy": "Always"}}}},
        "spec.template.spec.restartPolicy",
        'Unsupported value: "Always": supported values: "OnFailure", "Never"',
    ),
    (
        "batch",
        "Job",
        {
            "spec": {
                "backoffLimit": -1,
                "template": {"spec": {"containers": [CONTAINER], "restartPolicy": "Never"}},
            }
        },
        "spec.backoffLimit",
        "Invalid value: -1: must be greater than or equal to 0",
    ),
    (
        "batch",
        "CronJob",
        {
            "metadata": {"name": "cj"},
            "spec": {
                "schedule": "*/1 * * *",
                "jobTemplate": {
                    "spec": {
                        "template": {"spec": {"containers": [CONTAINER], "restartPolicy": "Never"}}
                    }
                },
            },
        },
        "spec.schedule",
        'Invalid value: "*/1 * * *": expected exactly 5 fields, found 4: */1 * * *',
    ),
    (
        "",
        "Service",
        {"spec": {**SERVICE["spec"], "type": "ClusterIp"}},
        "spec.type",
        'Unsupported value: "ClusterIp": supported values: "ClusterIP", "ExternalName", '
        '"LoadBalancer", "NodePort"',
    ),
    (
        "",
        "Service",
        {"spec": {"type": "ClusterIP"}},
        "spec.ports",
        "Required value",
    ),
    (
        "",
        "Service",
        {"spec": {"type": "ClusterIP", "ports": [{"port": 80}, {"port": 81}]}},
        "spec.ports[1].name",
        "Required value",
    ),
    (
        "",
        "Service",
        {"spec": {"type": "ClusterIP", "ports": [{"port": 80, "nodePort": 30080}]}},
        "spec.ports[0].nodePort",
        "Forbidden: may not be used when `type` is 'ClusterIP'",
    ),
    (
        "",
        "Service",
        {"spec": {"type": "NodePort", "ports": [{"port": 80, "nodePort": 80}]}},
        "spec.ports[0].nodePort",
        "Invalid value: 80: provided port is not in the valid range. The range of valid ports "
        "is 30000-32767",
    ),
    (
        "",
        "ConfigMap",
        {"data": {"a b": "x"}},
        "data[a b]",
        'Invalid value: "a b": a valid config key must consist of alphanumeric characters, '
        "'-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for "
        "validation is '[-._a-zA-Z0-9]+')",
    ),
    (
        "",
        "Secret",
        {"type": "kubernetes.io/dockerconfigjson", "data": {}},
        "data[.dockerconfigjson]",
        "Required value",
    ),
    (
        "",
        "PersistentVolumeClaim",
        {"spec": {"resources": {"requests": {"storage": "10Gi"}}}},
        "spec.accessModes",
        "Required value: at least 1 access mode is required",
    ),
    (
        "",
        "PersistentVolumeClaim",
        {"spec": {"accessModes": ["ReadWriteOnce"]}},
        "spec.resources[storage]",
        "Required value",
    ),
    (
        "",
        "PersistentVolumeClaim",
        {"spec": {"accessModes": ["RWO"], "resources": {"requests": {"storage": "1Gi"}}}},
        "spec.accessModes",
        'Unsupported value: "RWO": supported values: "ReadOnlyMany", "ReadWriteMany", '
        '"ReadWriteOnce", "ReadWriteOncePod"',
    ),
    (
        "networking.k8s.io",
        "Ingress",
        {
            "spec": {
                "rules": [
                    {
                        "http": {
                            "paths": [
                                {
                                    "path": "bar",
                                    "pathType": "Prefix",
                                    "backend": {"service": {"name": "s", "port": {"number": 80}}},
                                }
                            ]
                        }
                    }
                ]
            }
        },
        "spec.rules[0].http.paths[0].path",
        'Invalid value: "bar": must be an absolute path',
    ),
    (
        "networking.k8s.io",
        "Ingress",
        {
            "spec": {
                "rules": [
                    {
                        "http": {
                            "paths": [
                                {"path": "/", "backend": {"service": {"name": "s", "port": {}}}}
                            ]
                        }
                    }
                ]
            }
        },
        "spec.rules[0].http.paths[0].pathType",
        "Required value: pathType must be specified",
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        {
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "llm"},
                "minReplicas": 3,
                "maxReplicas": 2,
            }
        },
        "spec.maxReplicas",
        "Invalid value: 2: must be greater than or equal to `minReplicas`",
    ),
    (
        "apps",
        "Deployment",
        deployment(spec__template__metadata={"labels": {"app": "llm", "model": "llama 3"}}),
        "spec.template.metadata.labels",
        'Invalid value: "llama 3": a valid label must be an empty string or consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__metadata={"labels": {"app": "llm"}, "annotations": {"a/b/c": "x"}}
        ),
        "spec.template.metadata.annotations",
        'Invalid value: "a/b/c": a qualified name must consist of alphanumeric characters, '
        "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  "
        "or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and "
        "'/' (e.g. 'example.com/MyName')",
    ),
    *[
        (
            "apps",
            "Deployment",
            deployment(**{f"spec__template__spec__{key}": value}),
            f"spec.template.spec.{path}",
            message,
        )
        for key, value, path, message in [
            (
                "tolerations",
                [{"key": "nvidia.com/gpu", "operator": "Exists", "tolerationSeconds": 30}],
                "tolerations[0].effect",
                "Invalid value: \"\": effect must be 'NoExecute' when `tolerationSeconds` is set",
            ),
            (
                "tolerations",
                [{"effect": "NoSchedule"}],
                "tolerations[0].operator",
                'Invalid value: "": operator must be Exists when `key` is empty, which means '
                '"match all values and all keys"',
            ),
            (
                "nodeSelector",
                {"nvidia.com/gpu.product": "A100 SXM4"},
                "nodeSelector",
                'Invalid value: "A100 SXM4": a valid label must be an empty string or consist of '
                "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
                "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ),
            (
                "runtimeClassName",
                "Nvidia",
                "runtimeClassName",
                'Invalid value: "Nvidia": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
            (
                "preemptionPolicy",
                "Sometimes",
                "preemptionPolicy",
                'Unsupported value: "Sometimes": supported values: "PreemptLowerPriority", "Never"',
            ),
            (
                "volumes",
                [{"name": "cfg", "configMap": {"name": "cfg", "defaultMode": 511 + 1}}],
                "volumes[0].configMap.defaultMode",
                "Invalid value: 512: must be a number between 0 and 0777 (octal), both inclusive",
            ),
            (
                "volumes",
                [
                    {
                        "name": "cfg",
                        "secret": {"secretName": "s", "items": [{"key": "k", "path": "../k"}]},
                    }
                ],
                "volumes[0].secret.items[0].path",
                "Invalid value: \"../k\": must not contain '..'",
            ),
            (
                "volumes",
                [{"name": "dev", "hostPath": {"path": "/dev", "type": "Dir"}}],
                "volumes[0].hostPath.type",
                'Unsupported value: "Dir": supported values: "", "BlockDevice", "CharDevice", '
                '"Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"',
            ),
            (
                "containers",
                container(volumeMounts=[{"name": "cache", "mountPath": "/c", "subPath": "/abs"}]),
                "containers[0].volumeMounts[0].subPath",
                'Invalid value: "/abs": must be a relative path',
            ),
            (
                "containers",
                container(
                    volumeMounts=[
                        {"name": "cache", "mountPath": "/c", "mountPropagation": "Bidirectional"}
                    ]
                ),
                "containers[0].volumeMounts[0].mountPropagation",
                "Forbidden: Bidirectional mount propagation is available only to privileged "
                "containers",
            ),
        ]
    ],
    (
        "",
        "Service",
        {"spec": {**SERVICE["spec"], "selector": {"app.kubernetes.io/name": "llama 3"}}},
        "spec.selector",
        'Invalid value: "llama 3": a valid label must be an empty string or consist of '
        "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is "
        "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
    ),
    (
        "",
        "Service",
        {"spec": {**SERVICE["spec"], "ipFamilyPolicy": "DualStack"}},
        "spec.ipFamilyPolicy",
        'Unsupported value: "DualStack": supported values: "PreferDualStack", '
        '"RequireDualStack", "SingleStack"',
    ),
    (
        "",
        "Service",
        {"spec": {"ports": [{"port": 8000, "appProtocol": "kubernetes.io/h2c/tls"}]}},
        "spec.ports[0].appProtocol",
        'Invalid value: "kubernetes.io/h2c/tls": a qualified name must consist of alphanumeric '
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character "
        "(e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and "
        "'/' (e.g. 'example.com/MyName')",
    ),
    (
        "apps",
        "DaemonSet",
        {
            "spec": {
                **deployment()["spec"],
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1},
                },
            }
        },
        "spec.updateStrategy.rollingUpdate.maxSurge",
        "Invalid value: 1: may not be set when maxUnavailable is non-zero",
    ),
    (
        "batch",
        "Job",
        {
            "spec": {
                "completionMode": "Indexed",
                "template": {"spec": {"containers": [CONTAINER], "restartPolicy": "Never"}},
            }
        },
        "spec.completions",
        "Required value: when completion mode is Indexed",
    ),
    (
        "",
        "PersistentVolumeClaim",
        {
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "Local_Path",
                "resources": {"requests": {"storage": "1Gi"}},
            }
        },
        "spec.storageClassName",
        'Invalid value: "Local_Path": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
    ),
    *[
        ("networking.k8s.io", "Ingress", {"spec": {**INGRESS, **change}}, path, message)
        for change, path, message in [
            (
                {"rules": [{"host": "10.0.0.1", **INGRESS["rules"][0]}]},
                "spec.rules[0].host",
                'Invalid value: "10.0.0.1": must be a DNS name, not an IP address',
            ),
            (
                {"rules": [{"host": "nim.*.example.com", **INGRESS["rules"][0]}]},
                "spec.rules[0].host",
                'Invalid value: "nim.*.example.com": a wildcard DNS-1123 subdomain must start '
                "with '*.', followed by a valid DNS subdomain, which must consist of lower case "
                "alphanumeric characters, '-' or '.' and end with an alphanumeric character "
                "(e.g. '*.example.com', regex used for validation is "
                "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
            (
                {"rules": [{"http": {"paths": [{**INGRESS_PATH, "path": "/v1//chat"}]}}]},
                "spec.rules[0].http.paths[0].path",
                "Invalid value: \"/v1//chat\": must not contain '//'",
            ),
            (
                {
                    "rules": [
                        {
                            "http": {
                                "paths": [
                                    {
                                        **INGRESS_PATH,
                                        "pathType": "ImplementationSpecific",
                                        "path": "v1",
                                    }
                                ]
                            }
                        }
                    ]
                },
                "spec.rules[0].http.paths[0].path",
                'Invalid value: "v1": must be an absolute path',
            ),
            (
                {
                    "rules": [
                        {
                            "http": {
                                "paths": [
                                    {
                                        **INGRESS_PATH,
                                        "backend": {"service": {"name": "llm", "port": {}}},
                                    }
                                ]
                            }
                        }
                    ]
                },
                "spec.rules[0].http.paths[0].backend",
                "Required value: port name or number is required",
            ),
            (
                {"ingressClassName": "NGINX"},
                "spec.ingressClassName",
                'Invalid value: "NGINX": a lowercase RFC 1123 subdomain must consist of lower '
                "case alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'example.com', regex used for validation is "
                "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
            (
                {"tls": [{"hosts": ["*.nim.example.com", "*"], "secretName": "nim-tls"}]},
                "spec.tls[0].hosts[1]",
                "Invalid value: \"*\": a wildcard DNS-1123 subdomain must start with '*.', "
                "followed by a valid DNS subdomain, which must consist of lower case "
                "alphanumeric characters, '-' or '.' and end with an alphanumeric character "
                "(e.g. '*.example.com', regex used for validation is "
                "'\\*\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
            ),
        ]
    ],
    *[
        ("autoscaling", "HorizontalPodAutoscaler", {"spec": {**HPA, **change}}, path, message)
        for change, path, message in [
            (
                {"metrics": [{"type": "Resource"}]},
                "spec.metrics[0].resource",
                "Required value: must populate information for the given metric source",
            ),
            (
                {"metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {}}}]},
                "spec.metrics[0].resource.target.type",
                "Required value: must specify a metric target type",
            ),
            (
                {
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {"name": "cpu", "target": {"type": "Percent"}},
                        }
                    ]
                },
                "spec.metrics[0].resource.target.type",
                'Invalid value: "Percent": must be either Utilization, Value, or AverageValue',
            ),
            (
                {
                    "metrics": [
                        {
                            "type": "Resource",
                            "resource": {
                                "name": "cpu",
                                "target": {"type": "Utilization", "averageUtilization": 0},
                            },
                        }
                    ]
                },
                "spec.metrics[0].resource.target.averageUtilization",
                "Invalid value: 0: must be greater than 0",
            ),
            (
                {
                    "metrics": [
                        {"type": "Pods", "pods": {"metric": {}, "target": {"type": "AverageValue"}}}
                    ]
                },
                "spec.metrics[0].pods.metric.name",
                "Required value: must specify a metric name",
            ),
            (
                {
                    "metrics": [
                        {
                            "type": "Pods",
                            "pods": {
                                "metric": {"name": "gpu_cache_usage_perc"},
                                "target": {"type": "AverageValue"},
                            },
                        }
                    ]
                },
                "spec.metrics[0].pods.target.averageValue",
                "Required value: must specify a positive target averageValue",
            ),
            (
                {
                    "metrics": [
                        {
                            "type": "Pods",
                            "pods": {
                                "metric": {"name": "gpu_cache_usage_perc"},
                                "target": {"type": "AverageValue", "averageValue": "500m"},
                            },
                            "resource": {"name": "cpu"},
                        }
                    ]
                },
                "spec.metrics[0].resource",
                "Forbidden: must populate the given metric source only",
            ),
            (
                {"behavior": {"scaleDown": {"stabilizationWindowSeconds": 7200, "policies": []}}},
                "spec.behavior.scaleDown.stabilizationWindowSeconds",
                "Invalid value: 7200: must be less than or equal to 3600",
            ),
            (
                {"behavior": {"scaleUp": {"selectPolicy": "Maximum"}}},
                "spec.behavior.scaleUp.selectPolicy",
                'Unsupported value: "Maximum": supported values: "Disabled", "Max", "Min"',
            ),
            (
                {"behavior": {"scaleUp": {"selectPolicy": "Max", "policies": []}}},
                "spec.behavior.scaleUp.policies",
                "Required value: must specify at least one Policy",
            ),
            (
                {
                    "behavior": {
                        "scaleUp": {
                            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 3600}]
                        }
                    }
                },
                "spec.behavior.scaleUp.policies[0].periodSeconds",
                "Invalid value: 3600: must be less than or equal to 1800",
            ),
            (
                {
                    "behavior": {
                        "scaleUp": {
                            "policies": [{"type": "Percent", "value": 0, "periodSeconds": 60}]
                        }
                    }
                },
                "spec.behavior.scaleUp.policies[0].value",
                "Invalid value: 0: must be greater than zero",
            ),
        ]
    ],
    *[
        (
            "apps",
            "Deployment",
            deployment(**{f"spec__template__spec__{key}": value}),
            f"spec.template.spec.{path}",
            message,
        )
        for key, value, path, message in [
            (
                "affinity",
                {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}},
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                ".nodeSelectorTerms",
                "Required value: must have at least one node selector term",
            ),
            (
                "affinity",
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "nvidia.com/gpu.product", "operator": "In"}
                                    ]
                                }
                            ]
                        }
                    }
                },
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                ".nodeSelectorTerms[0].matchExpressions[0].values",
                "Required value: must be specified when `operator` is 'In' or 'NotIn'",
            ),
            (
                "affinity",
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "nvidia.com/gpu.present",
                                            "operator": "Exists",
                                            "values": ["true"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                ".nodeSelectorTerms[0].matchExpressions[0].values",
                "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            ),
            (
                "affinity",
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {
                                            "key": "nvidia.com/gpu.memory",
                                            "operator": "Gt",
                                            "values": ["1", "2"],
                                        }
                                    ]
                                }
                            ]
                        }
                    }
                },
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                ".nodeSelectorTerms[0].matchExpressions[0].values",
                "Required value: must be specified single value when `operator` is 'Lt' or 'Gt'",
            ),
            (
                "affinity",
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "gpu", "operator": "Equals", "values": ["a"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                ".nodeSelectorTerms[0].matchExpressions[0].operator",
                'Invalid value: "Equals": not a valid selector operator',
            ),
            (
                "affinity",
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "gpu", "operator": "In", "values": ["A100 80GB"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                ".nodeSelectorTerms[0].matchExpressions[0].values[0]",
                'Invalid value: "A100 80GB": a valid label must be an empty string or consist of '
                "alphanumeric characters, '-', '_' or '.', and must start and end with an "
                "alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
                "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            ),
            (
                "affinity",
                {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "-gpu", "operator": "Exists"}]}
                            ]
                        }
                    }
                },
                "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                ".nodeSelectorTerms[0].matchExpressions[0].key",
                'Invalid value: "-gpu": name part must consist of alphanumeric characters, '
                "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. "
                "'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
                "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            ),
            (
                "affinity",
                {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 0, "preference": {}}
                        ]
                    }
                },
                "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
                "Invalid value: 0: must be in the range 1-100",
            ),
            (
                "affinity",
                {
                    "podAntiAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "weight": 101,
                                "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"},
                            }
                        ]
                    }
                },
                "affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
                "Invalid value: 101: must be in the range 1-100",
            ),
            (
                "affinity",
                {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"labelSelector": {"matchLabels": {"app": "llm"}}}
                        ]
                    }
                },
                "affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
                "Required value: can not be empty",
            ),
            (
                "affinity",
                {
                    "podAntiAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "labelSelector": {
                                    "matchExpressions": [{"key": "app", "operator": "In"}]
                                },
                                "topologyKey": "kubernetes.io/hostname",
                            }
                        ]
                    }
                },
                "affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
                ".labelSelector.matchExpressions[0].values",
                "Required value: must be specified when `operator` is 'In' or 'NotIn'",
            ),
            (
                "affinity",
                {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"matchLabelKeys": ["pod-template-hash"], "topologyKey": "zone"}
                        ]
                    }
                },
                "affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
                ".matchLabelKeys",
                "Forbidden: must not be specified when labelSelector is not set",
            ),
            (
                "topologySpreadConstraints",
                [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
                "topologySpreadConstraints[0].maxSkew",
                "Invalid value: 0: must be greater than zero",
            ),
            (
                "topologySpreadConstraints",
                [{"maxSkew": 1, "whenUnsatisfiable": "DoNotSchedule"}],
                "topologySpreadConstraints[0].topologyKey",
                "Required value: can not be empty",
            ),
            (
                "topologySpreadConstraints",
                [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotScheduled"}],
                "topologySpreadConstraints[0].whenUnsatisfiable",
                'Unsupported value: "DoNotScheduled": supported values: "DoNotSchedule", '
                '"ScheduleAnyway"',
            ),
            (
                "topologySpreadConstraints",
                [
                    {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
                    {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"},
                ],
                "topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}",
                'Duplicate value: "{zone, ScheduleAnyway}"',
            ),
            (
                "topologySpreadConstraints",
                [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "ScheduleAnyway",
                        "minDomains": 2,
                    }
                ],
                "topologySpreadConstraints[0].minDomains",
                "Invalid value: 2: can only use minDomains if whenUnsatisfiable=DoNotSchedule, "
                "not ScheduleAnyway",
            ),
            (
                "topologySpreadConstraints",
                [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "minDomains": 0,
                    }
                ],
                "topologySpreadConstraints[0].minDomains",
                "Invalid value: 0: must be greater than zero",
            ),
            (
                "topologySpreadConstraints",
                [
                    {
                        "maxSkew": 1,
                        "topologyKey": "zone",
                        "whenUnsatisfiable": "DoNotSchedule",
                        "nodeTaintsPolicy": "Honour",
                    }
                ],
                "topologySpreadConstraints[0].nodeTaintsPolicy",
                'Unsupported value: "Honour": supported values: "Honor", "Ignore"',
            ),
            (
                "securityContext",
                {"runAsUser": -1},
                "securityContext.runAsUser",
                "Invalid value: -1: must be between 0 and 2147483647, inclusive",
            ),
            (
                "securityContext",
                {"fsGroupChangePolicy": "Sometimes"},
                "securityContext.fsGroupChangePolicy",
                'Unsupported value: "Sometimes": supported values: "Always", "OnRootMismatch"',
            ),
            (
                "securityContext",
                {"seccompProfile": {"type": "Default"}},
                "securityContext.seccompProfile.type",
                'Unsupported value: "Default": supported values: "Localhost", "RuntimeDefault", '
                '"Unconfined"',
            ),
            (
                "securityContext",
                {"seccompProfile": {"type": "Localhost"}},
                "securityContext.seccompProfile.localhostProfile",
                "Required value: must be set when seccomp type is Localhost",
            ),
            (
                "securityContext",
                {"seccompProfile": {"type": "Localhost", "localhostProfile": "/etc/p.json"}},
                "securityContext.seccompProfile.localhostProfile",
                'Invalid value: "/etc/p.json": must be a relative path',
            ),
            (
                "securityContext",
                {"seccompProfile": {"type": "RuntimeDefault", "localhostProfile": "p.json"}},
                "securityContext.seccompProfile.localhostProfile",
                'Invalid value: {"localhostProfile":"p.json","type":"RuntimeDefault"}: can only '
                "be set when seccomp type is Localhost",
            ),
            (
                "securityContext",
                {
                    "sysctls": [
                        {"name": "net.core.somaxconn", "value": "1024"},
                        {"name": "net.core.somaxconn", "value": "2048"},
                    ]
                },
                "securityContext.sysctls[1].name",
                'Duplicate value: "net.core.somaxconn"',
            ),
            (
                "securityContext",
                {"sysctls": [{"name": "Net.Core", "value": "1"}]},
                "securityContext.sysctls[0].name",
                'Invalid value: "Net.Core": must have at most 253 characters and match regex '
                "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$",
            ),
            (
                "securityContext",
                {"appArmorProfile": {"type": "Localhost"}},
                "securityContext.appArmorProfile.localhostProfile",
                "Required value: must be set when AppArmor type is Localhost",
            ),
            (
                "securityContext",
                {"appArmorProfile": {"type": "complain"}},
                "securityContext.appArmorProfile.type",
                'Unsupported value: "complain": supported values: "Localhost", "RuntimeDefault", '
                '"Unconfined"',
            ),
            (
                "containers",
                container(securityContext={"runAsGroup": 2**31}),
                "containers[0].securityContext.runAsGroup",
                "Invalid value: 2147483648: must be between 0 and 2147483647, inclusive",
            ),
            (
                "containers",
                container(securityContext={"procMount": "Masked"}),
                "containers[0].securityContext.procMount",
                'Unsupported value: "Masked": supported values: "Default", "Unmasked"',
            ),
            (
                "containers",
                container(securityContext={"procMount": "Unmasked"}),
                "containers[0].securityContext.procMount",
                'Invalid value: "Unmasked": `hostUsers` must be false to use `Unmasked`',
            ),
            (
                "containers",
                container(securityContext={"allowPrivilegeEscalation": False, "privileged": True}),
                "containers[0].securityContext",
                'Invalid value: {"allowPrivilegeEscalation":false,"privileged":true}: cannot set '
                "`allowPrivilegeEscalation` to false and `privileged` to true",
            ),
            (
                "containers",
                container(securityContext={"seccompProfile": {}}),
                "containers[0].securityContext.seccompProfile.type",
                "Required value: type is required when seccompProfile is set",
            ),
        ]
    ],
]


@pytest.mark.parametrize(
    ("group", "kind", "obj", "field", "message"),
    REFUSED,
    ids=[f"{row[1]}:{row[3]}" for row in REFUSED],
)
def test_refused_as_kube_apiserver_refuses(
    group: str, kind: str, obj: dict[str, Any], field: str, message: str
) -> None:
    causes = validate(group, kind, obj, None)
    assert {"field": field, "message": message} in [
        {"field": c["field"], "message": c["message"]} for c in causes
    ], causes


UPDATES: list[tuple[str, str, dict[str, Any], dict[str, Any], str, str]] = [
    (
        "apps",
        "Deployment",
        deployment(),
        deployment(spec__selector={"matchLabels": {"app": "llm", "v": "2"}}),
        "spec.selector",
        'Invalid value: {"matchLabels":{"app":"llm","v":"2"}}: field is immutable',
    ),
    (
        "",
        "Service",
        {"spec": {**SERVICE["spec"], "clusterIP": "10.96.0.10"}},
        {"spec": {**SERVICE["spec"], "clusterIP": "10.96.0.11"}},
        "spec.clusterIP",
        'Invalid value: "10.96.0.11": field is immutable',
    ),
    (
        "",
        "Secret",
        {"type": "Opaque", "data": {}},
        {"type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}},
        "type",
        'Invalid value: "kubernetes.io/tls": field is immutable',
    ),
    (
        "",
        "ConfigMap",
        {"immutable": True, "data": {"a": "1"}},
        {"immutable": True, "data": {"a": "2"}},
        "data",
        "Forbidden: field is immutable when `immutable` is set",
    ),
    (
        "batch",
        "Job",
        {"spec": {"template": {"spec": {"containers": [CONTAINER], "restartPolicy": "Never"}}}},
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{**CONTAINER, "image": "busybox"}],
                        "restartPolicy": "Never",
                    }
                }
            }
        },
        "spec.template",
        "field is immutable",
    ),
    (
        "",
        "PersistentVolumeClaim",
        {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
        {"spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}},
        "spec",
        "Forbidden: spec is immutable after creation except resources.requests and "
        "volumeAttributesClassName for bound claims",
    ),
]


@pytest.mark.parametrize(
    ("group", "kind", "old", "new", "field", "message"),
    UPDATES,
    ids=[f"{row[1]}:{row[4]}" for row in UPDATES],
)
def test_immutable_fields(
    group: str, kind: str, old: dict[str, Any], new: dict[str, Any], field: str, message: str
) -> None:
    causes = validate(group, kind, new, old)
    assert any(c["field"] == field and message in c["message"] for c in causes), causes


VALID: list[tuple[str, str, dict[str, Any]]] = [
    ("apps", "Deployment", deployment()),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__containers=container(
                resources={"limits": {"nvidia.com/gpu": "1", "memory": "16Gi"}},
                ports=[{"name": "api", "containerPort": 8000, "protocol": "TCP"}],
                readinessProbe={"httpGet": {"path": "/v1/health/ready", "port": "api"}},
                volumeMounts=[{"name": "cache", "mountPath": "/model-store"}],
                env=[{"name": "NIM_CACHE_PATH", "value": "/model-store"}],
            ),
            spec__template__spec__volumes=[
                {"name": "cache", "persistentVolumeClaim": {"claimName": "llm-pvc"}}
            ],
        ),
    ),
    (
        "apps",
        "Deployment",
        deployment(
            spec__template__spec__securityContext={
                "runAsUser": 1000,
                "runAsGroup": 1000,
                "fsGroup": 2000,
                "fsGroupChangePolicy": "OnRootMismatch",
                "seccompProfile": {"type": "Localhost", "localhostProfile": "profiles/nim.json"},
                "sysctls": [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}],
            },
            spec__template__spec__containers=container(
                securityContext={
                    "allowPrivilegeEscalation": False,
                    "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]},
                    "appArmorProfile": {"type": "RuntimeDefault"},
                }
            ),
            spec__template__spec__affinity={
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "nvidia.com/gpu.present", "operator": "Exists"},
                                    {
                                        "key": "nvidia.com/gpu.count",
                                        "operator": "Gt",
                                        "values": ["1"],
                                    },
                                ]
                            }
                        ]
                    },
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "preference": {
                                "matchExpressions": [
                                    {"key": "gpu", "operator": "In", "values": ["any value ok"]}
                                ]
                            },
                        }
                    ],
                },
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 1,
                            "podAffinityTerm": {
                                "labelSelector": {"matchLabels": {"app": "llm"}},
                                "topologyKey": "kubernetes.io/hostname",
                            },
                        }
                    ]
                },
            },
            spec__template__spec__topologySpreadConstraints=[
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "DoNotSchedule",
                    "minDomains": 2,
                    "labelSelector": {"matchLabels": {"app": "llm"}},
                    "matchLabelKeys": ["pod-template-hash"],
                },
                {
                    "maxSkew": 1,
                    "topologyKey": "topology.kubernetes.io/zone",
                    "whenUnsatisfiable": "ScheduleAnyway",
                },
            ],
        ),
    ),
    (
        "autoscaling",
        "HorizontalPodAutoscaler",
        {
            "spec": {
                **HPA,
                "metrics": [
                    {
                        "type": "Resource",
                        "resource": {
                            "name": "cpu",
                            "target": {"type": "Utilization", "averageUtilization": 80},
                        },
                    },
                    {
                        "type": "Pods",
                        "pods": {
                            "metric": {"name": "gpu_cache_usage_perc"},
                            "target": {"type": "AverageValue", "averageValue": "750m"},
                        },
                    },
                ],
                "behavior": {
                    "scaleDown": {
                        "stabilizationWindowSeconds": 300,
                        "selectPolicy": "Min",
                        "policies": [{"type": "Percent", "value": 10, "periodSeconds": 60}],
                    }
                },
            }
        },
    ),
    ("", "Service", SERVICE),
    ("", "Service", {"spec": {"clusterIP": "None", "type": "ClusterIP"}}),
    ("", "ConfigMap", {"data": {"config.yaml": "a: 1"}}),
    (
        "networking.k8s.io",
        "Ingress",
        {
            "spec": {
                **INGRESS,
                "ingressClassName": "nginx",
                "rules": [{"host": "*.nim.example.com", **INGRESS["rules"][0]}],
                "tls": [{"hosts": ["*.nim.example.com"], "secretName": "nim-tls"}],
            }
        },
    ),
    (
        "",
        "PersistentVolumeClaim",
        {"spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
    ),
]


@pytest.mark.parametrize(("group", "kind", "obj"), VALID, ids=[row[1] for row in VALID])
def test_valid_objects_pass(group: str, kind: str, obj: dict[str, Any]) -> None:
    assert validate(group, kind, obj, None) == []
    assert validate(group, kind, obj, copy.deepcopy(obj)) == []
