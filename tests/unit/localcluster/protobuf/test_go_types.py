"""Built-in objects decode into their Go types or get kube-apiserver's 400.

A real API server decodes a ConfigMap into Go structs, so ``data: {a: 1}`` is a
400 ``json: cannot unmarshal number into Go struct field ConfigMap.data of type
string``; localcluster must refuse the same bodies with the same words.
"""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.builtin_fields import BuiltinPruner
from localcluster.errors import StatusError

POD_SPEC = ("spec", "template", "spec")


def _deployment(container: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


REFUSED = [
    (
        ("v1", "ConfigMap"),
        {"data": {"a": 1}},
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
        "number into Go struct field ConfigMap.data of type string",
    ),
    (
        ("apps/v1", "Deployment"),
        {"spec": {"replicas": "2"}},
        "json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas "
        "of type int32",
    ),
    (
        ("apps/v1", "Deployment"),
        {"spec": {"replicas": 1.5}},
        "json: cannot unmarshal number 1.5 into Go struct field DeploymentSpec.spec.replicas "
        "of type int32",
    ),
    (
        ("apps/v1", "Deployment"),
        {"spec": {"replicas": 2**31}},
        "cannot unmarshal number 2147483648 into Go struct field DeploymentSpec.spec.replicas",
    ),
    (
        ("apps/v1", "Deployment"),
        _deployment({"name": "a", "image": 3}),
        "json: cannot unmarshal number into Go struct field "
        "Container.spec.template.spec.containers.image of type string",
    ),
    (
        ("apps/v1", "Deployment"),
        {"spec": {"template": {"spec": {"containers": {}}}}},
        "json: cannot unmarshal object into Go struct field PodSpec.spec.template.spec.containers "
        "of type []v1.Container",
    ),
    (
        ("apps/v1", "Deployment"),
        _deployment({"name": "a", "resources": {"limits": {"memory": "16Gx"}}}),
        "quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
    ),
    (
        ("v1", "Secret"),
        {"data": {"token": "not base64!"}},
        "illegal base64 data at input byte 3",
    ),
    (
        ("v1", "Pod"),
        {"spec": {"volumes": [{"name": "x", "configMap": {"name": 5}}]}},
        "Go struct field ConfigMapVolumeSource.spec.volumes.configMap.name of type string",
    ),
    (
        ("v1", "Pod"),
        {"spec": {"automountServiceAccountToken": "false"}},
        "cannot unmarshal string into Go struct field PodSpec.spec.automountServiceAccountToken "
        "of type bool",
    ),
]


@pytest.mark.parametrize(("kind_key", "obj", "message"), REFUSED)
def test_wrong_types_are_refused_in_the_decoders_words(
    kind_key: tuple[str, str], obj: dict[str, Any], message: str
) -> None:
    with pytest.raises(StatusError) as info:
        BuiltinPruner().prune(kind_key, obj)
    assert info.value.code == 400
    assert message in info.value.message


@pytest.mark.parametrize(
    ("kind_key", "obj"),
    [
        (("v1", "Service"), {"spec": {"ports": [{"port": 80, "targetPort": "http"}]}}),
        (("v1", "Service"), {"spec": {"ports": [{"port": 80, "targetPort": 8080}]}}),
        (
            ("apps/v1", "Deployment"),
            _deployment({"name": "a", "resources": {"limits": {"cpu": 2}}}),
        ),
        (("v1", "ConfigMap"), {"data": {"a": "1"}, "binaryData": {"b": "AAE="}}),
        (("v1", "ConfigMap"), {"data": None, "metadata": {"labels": {"x": ""}}}),
    ],
)
def test_values_of_the_right_type_pass(kind_key: tuple[str, str], obj: dict[str, Any]) -> None:
    BuiltinPruner().prune(kind_key, obj)
