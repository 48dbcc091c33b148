"""The object strategy's refusals, worded as kube-apiserver words them (what kubectl prints)."""

from __future__ import annotations

from typing import Any

import pytest

from localcluster.errors import StatusError
from localcluster.registry import Registry
from localcluster.storage import Storage


@pytest.fixture
def storage() -> Storage:
    s = Storage(Registry())
    s.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    return s


def _cm(name: str = "cm", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "default", **meta},
    }


def _refusal(storage: Storage, call: Any, *args: Any, **kw: Any) -> StatusError:
    with pytest.raises(StatusError) as exc:
        call(*args, **kw)
    return exc.value


def test_bad_names_and_metadata_are_422_with_a_cause_per_field(storage: Storage) -> None:
    err = _refusal(storage, storage.create, _cm("Bad_Name"))
    assert err.code == 422
    assert err.message.startswith('ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: ')
    assert "a lowercase RFC 1123 subdomain" in err.message
    owners = [
        {"apiVersion": "v1", "kind": "X", "name": "a", "uid": "1", "controller": True},
        {"apiVersion": "v1", "kind": "X", "name": "b", "uid": "2", "controller": True},
        {"kind": "X", "name": "c", "uid": "3"},
    ]
    err = _refusal(storage, storage.create, _cm(ownerReferences=owners, annotations={"a": 1}))
    causes = {(c["field"], c["message"]) for c in (err.details or {})["causes"]}
    assert causes == {
        ("metadata.annotations", "Invalid value: annotations must be a map of strings"),
        ("metadata.ownerReferences[2].apiVersion", "Required value"),
        (
            "metadata.ownerReferences",
            "Invalid value: Only one reference can have Controller set to true",
        ),
    }
    assert "[" in err.message  # several causes: the aggregate is bracketed


def test_an_object_being_deleted_takes_no_new_finalizer(storage: Storage) -> None:
    storage.create(_cm(finalizers=["example.com/hold"]))
    storage.delete("v1", "ConfigMap", "cm", "default")
    obj = storage.get("v1", "ConfigMap", "cm", "default")
    obj["metadata"]["finalizers"].append("example.com/late")
    err = _refusal(storage, storage.update, obj)
    assert err.code == 422
    assert (err.details or {})["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: no new finalizers can be added if the object is being "
            "deleted, found new finalizers ['example.com/late']",
            "field": "metadata.finalizers",
        }
    ]


def test_delete_refusals(storage: Storage) -> None:
    storage.create(_cm())
    err = _refusal(
        storage, storage.delete, "v1", "ConfigMap", "cm", "default", propagation_policy="Later"
    )
    assert (err.code, err.message) == (
        400,
        'Unsupported value: "Later": supported values: "Orphan", "Background", "Foreground"',
    )
    err = _refusal(storage, storage.delete, "v1", "Namespace", "default")
    assert err.code == 403 and 'namespaces "default" is forbidden' in err.message
    storage.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "going"}})
    storage.delete("v1", "Namespace", "going")
    late = _cm()
    late["metadata"]["namespace"] = "going"
    err = _refusal(storage, storage.create, late)
    assert err.code == 403
    assert "unable to create new content in namespace going because it is being terminated" in (
        err.message
    )


def test_generate_name_and_missing_name(storage: Storage) -> None:
    made = storage.create(_cm(name="", generateName="job-"))
    assert made["metadata"]["name"].startswith("job-") and len(made["metadata"]["name"]) == 9
    nameless = _cm(name="")
    err = _refusal(storage, storage.create, nameless)
    assert err.message == (
        'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    )
