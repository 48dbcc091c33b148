"""Kind.namespace_labels: what the skeleton merges into a namespace, and what it leaves."""

from __future__ import annotations

from controllers.reconciler import NamespaceLabels

PSA = {"pod-security.kubernetes.io/enforce": "privileged"}
MONITORING = "openshift.io/cluster-monitoring"


def test_labels_are_set_and_defaults_only_where_absent() -> None:
    want = NamespaceLabels("gpu-operator", PSA, defaults={MONITORING: "true"})
    assert want.missing({}) == {**PSA, MONITORING: "true"}
    # a user's value for a default is kept; a wrong value of a label is corrected
    have = {"pod-security.kubernetes.io/enforce": "baseline", MONITORING: "false"}
    assert want.missing(have) == PSA
    # a namespace that carries them all needs no patch
    assert want.missing({**PSA, MONITORING: "false", "other": "x"}) == {}
