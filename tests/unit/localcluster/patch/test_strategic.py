"""Strategic merge patch on built-in kinds, driven by Kubernetes' v1.32 schemas."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from localcluster.patch import (
    PatchError,
    has_strategic_schema,
    strategic_merge_patch,
    strategic_schema,
)

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "d", "labels": {"app": "x"}, "finalizers": ["a", "b"]},
    "spec": {
        "replicas": 1,
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}},
        "template": {
            "metadata": {"labels": {"app": "x"}},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "img:1",
                        "args": ["--a"],
                        "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                        "ports": [{"containerPort": 8000, "name": "api"}],
                    },
                    {"name": "side", "image": "side:1"},
                ],
                "volumes": [{"name": "v", "emptyDir": {}}, {"name": "w", "emptyDir": {}}],
                "tolerations": [{"key": "k", "operator": "Exists"}],
            },
        },
    },
}

KEY = ("apps/v1", "Deployment")


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return obj["spec"]["template"]["spec"]["containers"]  # type: ignore[no-any-return]


def _patch(patch: dict[str, Any]) -> dict[str, Any]:
    before = copy.deepcopy(DEPLOYMENT)
    result = strategic_merge_patch(DEPLOYMENT, patch, KEY)
    assert before == DEPLOYMENT
    return result


def _tpl(spec: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"template": {"spec": spec}}}


def test_containers_merge_by_name() -> None:
    result = _patch(_tpl({"containers": [{"name": "main", "image": "img:2"}]}))
    main, side = _containers(result)
    assert main["image"] == "img:2"
    assert main["args"] == ["--a"]
    assert side == {"name": "side", "image": "side:1"}


def test_new_container_is_appended() -> None:
    result = _patch(_tpl({"containers": [{"name": "extra", "image": "e"}]}))
    assert [c["name"] for c in _containers(result)] == ["main", "side", "extra"]


def test_env_merges_by_name_inside_a_container() -> None:
    result = _patch(_tpl({"containers": [{"name": "main", "env": [{"name": "B", "value": "9"},
                                                                   {"name": "C", "value": "3"}]}]}))
    assert _containers(result)[0]["env"] == [
        {"name": "A", "value": "1"},
        {"name": "B", "value": "9"},
        {"name": "C", "value": "3"},
    ]


def test_patch_delete_directive_removes_an_element() -> None:
    result = _patch(_tpl({"containers": [{"name": "side", "$patch": "delete"}],
                          "volumes": [{"name": "w", "$patch": "delete"}]}))
    assert [c["name"] for c in _containers(result)] == ["main"]
    assert result["spec"]["template"]["spec"]["volumes"] == [{"name": "v", "emptyDir": {}}]


def test_patch_replace_directive_on_a_list() -> None:
    result = _patch(_tpl({"containers": [{"name": "only", "image": "o"}, {"$patch": "replace"}]}))
    assert _containers(result) == [{"name": "only", "image": "o"}]


def test_patch_replace_directive_on_a_map() -> None:
    result = _patch({"spec": {"strategy": {"$patch": "replace", "type": "Recreate"}}})
    assert result["spec"]["strategy"] == {"type": "Recreate"}


def test_patch_delete_directive_on_a_map() -> None:
    result = _patch({"spec": {"template": {"metadata": {"$patch": "delete"}}}})
    assert "metadata" not in result["spec"]["template"]


def test_retain_keys_clears_other_fields() -> None:
    result = _patch({"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}})
    assert result["spec"]["strategy"] == {"type": "Recreate"}


def test_atomic_lists_are_replaced() -> None:
    result = _patch(_tpl({"containers": [{"name": "main", "args": ["--b"]}],
                          "tolerations": [{"key": "z", "operator": "Exists"}]}))
    assert _containers(result)[0]["args"] == ["--b"]
    assert result["spec"]["template"]["spec"]["tolerations"] == [{"key": "z", "operator": "Exists"}]


def test_primitive_merge_list_is_a_union_and_delete_from_primitive_list() -> None:
    result = _patch({"metadata": {"finalizers": ["b", "c"]}})
    assert result["metadata"]["finalizers"] == ["a", "b", "c"]
    result = _patch({"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert result["metadata"]["finalizers"] == ["b"]


def test_set_element_order() -> None:
    result = _patch(_tpl({"$setElementOrder/containers": [{"name": "side"}, {"name": "main"}],
                          "containers": [{"name": "main", "image": "img:3"}]}))
    assert [c["name"] for c in _containers(result)] == ["side", "main"]
    assert _containers(result)[1]["image"] == "img:3"


def test_null_deletes_a_field_and_maps_merge() -> None:
    result = _patch({"metadata": {"labels": {"app": None, "tier": "web"}},
                     "spec": {"replicas": None}})
    assert result["metadata"]["labels"] == {"tier": "web"}
    assert "replicas" not in result["spec"]


def test_ports_merge_by_container_port() -> None:
    result = _patch(_tpl({"containers": [{"name": "main", "ports": [
        {"containerPort": 8000, "name": "http"}, {"containerPort": 9000, "name": "m"}]}]}))
    assert _containers(result)[0]["ports"] == [
        {"containerPort": 8000, "name": "http"},
        {"containerPort": 9000, "name": "m"},
    ]


def test_merge_key_missing_is_an_error() -> None:
    with pytest.raises(PatchError):
        _patch(_tpl({"containers": [{"image": "no-name"}]}))


def test_pod_and_service_schemas_are_known_and_crs_are_not() -> None:
    assert has_strategic_schema("v1", "Pod")
    assert has_strategic_schema("v1", "Service")
    assert not has_strategic_schema("apps.nvidia.com/v1alpha1", "NIMService")
    assert strategic_schema("apps/v1, Kind=Deployment") is not None
    assert strategic_schema("io.k8s.api.core.v1.ConfigMap") is not None


def test_pod_spec_patch_on_a_pod() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "a"}]}}
    result = strategic_merge_patch(pod, {"spec": {"containers": [{"name": "c", "image": "b"}]}},
                                   ("v1", "Pod"))
    assert result["spec"]["containers"] == [{"name": "c", "image": "b"}]


def test_set_element_order_weaves_server_only_elements_back_in_place() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "a"}, {"name": "s"}, {"name": "b"}]}}
    patch = {"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}],
                      "containers": [{"name": "b", "image": "x"}]}}
    result = strategic_merge_patch(pod, patch, ("v1", "Pod"))
    # "s" (not in the patch) keeps its place between "a" and "b".
    assert result["spec"]["containers"] == [{"name": "a"}, {"name": "s"},
                                            {"name": "b", "image": "x"}]
