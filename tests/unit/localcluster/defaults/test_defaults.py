"""Built-in kinds read back with kube-apiserver's defaults filled in."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from localcluster.defaults import apply_builtin_defaults


def deployment(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "image": "nvcr.io/nim/x:1.0",
                            "ports": [{"containerPort": 8000}],
                        }
                    ]
                },
            },
            **spec,
        },
    }


def test_deployment_without_replicas_has_one() -> None:
    obj = deployment()
    apply_builtin_defaults("apps", "deployments", obj)
    spec = obj["spec"]
    assert spec["replicas"] == 1
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"},
    }
    assert spec["revisionHistoryLimit"] == 10
    assert spec["progressDeadlineSeconds"] == 600
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Always"
    assert pod["dnsPolicy"] == "ClusterFirst"
    assert pod["terminationGracePeriodSeconds"] == 30
    assert pod["schedulerName"] == "default-scheduler"
    container = pod["containers"][0]
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["ports"][0]["protocol"] == "TCP"
    assert container["terminationMessagePath"] == "/dev/termination-log"
    # what makes a second `kubectl apply` report "unchanged"
    assert spec["template"]["metadata"]["creationTimestamp"] is None


def test_user_values_win_and_defaulting_is_idempotent() -> None:
    obj = deployment(replicas=0, strategy={"type": "Recreate"})
    apply_builtin_defaults("apps", "deployments", obj)
    assert obj["spec"]["replicas"] == 0
    assert obj["spec"]["strategy"] == {"type": "Recreate"}
    again = copy.deepcopy(obj)
    apply_builtin_defaults("apps", "deployments", again)
    assert again == obj


@pytest.mark.parametrize(
    ("image", "policy"),
    [
        ("nginx", "Always"),
        ("nginx:latest", "Always"),
        ("nginx:1.27", "IfNotPresent"),
        ("registry:5000/nginx", "Always"),
        ("nginx@sha256:abc", "IfNotPresent"),
    ],
)
def test_image_pull_policy_follows_the_tag(image: str, policy: str) -> None:
    obj = {"spec": {"containers": [{"name": "c", "image": image}]}}
    apply_builtin_defaults("", "pods", obj)
    assert obj["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_job_defaults() -> None:
    obj: dict[str, Any] = {
        "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": []}}}
    }
    apply_builtin_defaults("batch", "jobs", obj)
    assert obj["spec"]["completions"] == 1
    assert obj["spec"]["parallelism"] == 1
    assert obj["spec"]["backoffLimit"] == 6
    assert obj["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_statefulset_daemonset_pvc_hpa_defaults() -> None:
    sts: dict[str, Any] = {"spec": {"template": {"spec": {"containers": []}}}}
    apply_builtin_defaults("apps", "statefulsets", sts)
    assert sts["spec"]["replicas"] == 1
    assert sts["spec"]["podManagementPolicy"] == "OrderedReady"
    assert sts["spec"]["updateStrategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"partition": 0},
    }
    ds: dict[str, Any] = {"spec": {"template": {"spec": {"containers": []}}}}
    apply_builtin_defaults("apps", "daemonsets", ds)
    assert ds["spec"]["updateStrategy"]["rollingUpdate"] == {"maxUnavailable": 1, "maxSurge": 0}
    claim: dict[str, Any] = {"spec": {}}
    apply_builtin_defaults("", "persistentvolumeclaims", claim)
    assert claim["spec"]["volumeMode"] == "Filesystem"
    hpa: dict[str, Any] = {"spec": {"maxReplicas": 3}}
    apply_builtin_defaults("autoscaling", "horizontalpodautoscalers", hpa)
    assert hpa["spec"]["minReplicas"] == 1


def test_other_kinds_are_untouched() -> None:
    obj = {"data": {"a": "b"}}
    apply_builtin_defaults("", "configmaps", obj)
    assert obj == {"data": {"a": "b"}}


def test_an_hpa_behavior_given_in_part_is_completed_as_kube_apiserver_does() -> None:
    hpa: dict[str, Any] = {
        "spec": {
            "maxReplicas": 3,
            "behavior": {"scaleDown": {"stabilizationWindowSeconds": 60, "policies": []}},
        }
    }
    apply_builtin_defaults("autoscaling", "horizontalpodautoscalers", hpa)
    behavior = hpa["spec"]["behavior"]
    assert behavior["scaleUp"] == {
        "stabilizationWindowSeconds": 0,
        "selectPolicy": "Max",
        "policies": [
            {"type": "Pods", "value": 4, "periodSeconds": 15},
            {"type": "Percent", "value": 100, "periodSeconds": 15},
        ],
    }
    # what was given stays, an explicit empty policy list included (validation refuses it)
    assert behavior["scaleDown"] == {
        "stabilizationWindowSeconds": 60,
        "selectPolicy": "Max",
        "policies": [],
    }
    without: dict[str, Any] = {"spec": {"maxReplicas": 3}}
    apply_builtin_defaults("autoscaling", "horizontalpodautoscalers", without)
    assert "behavior" not in without["spec"]  # no behavior, no defaults
    assert without["spec"]["metrics"] == [  # no metrics: CPU at 80%
        {
            "type": "Resource",
            "resource": {
                "name": "cpu",
                "target": {"type": "Utilization", "averageUtilization": 80},
            },
        }
    ]


def test_a_probe_field_sent_as_zero_is_defaulted_as_unset() -> None:
    # Go's int32 cannot tell 0 from unset: SetDefaults_Probe defaults both (NVIDIA's
    # NVIDIADriver template writes an unset startupProbe.successThreshold as 0).
    obj = deployment()
    container = obj["spec"]["template"]["spec"]["containers"][0]
    container["startupProbe"] = {
        "exec": {"command": ["true"]},
        "successThreshold": 0,
        "timeoutSeconds": 0,
        "periodSeconds": 7,
    }
    apply_builtin_defaults("apps", "deployments", obj)
    probe = container["startupProbe"]
    assert (probe["successThreshold"], probe["timeoutSeconds"]) == (1, 1)
    assert (probe["periodSeconds"], probe["failureThreshold"]) == (7, 3)
