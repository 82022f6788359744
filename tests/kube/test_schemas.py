"""The schema checks themselves catch what the API server would refuse (else a pass proves nothing)."""

from __future__ import annotations

import copy

import jsonschema
import kubernetes_validate
import pytest

from tests.kube.schemas import check

HN = {
    "apiVersion": "topology.volcano.sh/v1alpha1",
    "kind": "HyperNode",
    "metadata": {"name": "netd-tor-a"},
    "spec": {"tier": 1, "members": [{"type": "Node", "selector": {"exactMatch": {"name": "host-a"}}}]},
}
TOPO = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "Topology",
    "metadata": {"name": "netd-roce"},
    "spec": {"levels": [{"nodeLabel": "netd.io/spine"}, {"nodeLabel": "kubernetes.io/hostname"}]},
}


def _broken(obj, path, value):
    out = copy.deepcopy(obj)
    *head, last = path
    target = out
    for k in head:
        target = target[k]
    target[last] = value
    return out


def test_valid_objects_pass():
    check(HN)
    check(TOPO)
    check({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"netd.io/tor": "t1"}}})


@pytest.mark.parametrize(
    "path, value",
    [
        (("spec", "tier"), -1),
        (("spec", "members"), []),
        (("spec", "members", 0, "type"), "Pod"),
        (("spec", "members", 0, "selector"), {}),
        (("spec", "members", 0, "selector"), {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "a"}}),
        (("spec", "members", 0, "selector", "exactMatch", "name"), "Host_A"),
        (("metadata", "name"), "netd-tor-A+B"),
    ],
)
def test_hypernode_rules_are_enforced(path, value):
    with pytest.raises(jsonschema.ValidationError):
        check(_broken(HN, path, value))


def test_kueue_rules_are_enforced():
    with pytest.raises(jsonschema.ValidationError):
        check(_broken(TOPO, ("spec", "levels"), []))
    with pytest.raises(jsonschema.ValidationError):
        check(_broken(TOPO, ("spec", "levels"), [{"nodeLabel": "a"}, {"nodeLabel": "a"}]))
    with pytest.raises(AssertionError):
        check(
            _broken(TOPO, ("spec", "levels"), [{"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "a"}])
        )


def test_core_schema_and_label_rules_are_enforced():
    with pytest.raises(kubernetes_validate.ValidationError):
        check({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {"taints": "x"}})
    with pytest.raises(AssertionError):
        check(
            {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"netd.io/tor": "a+b"}}}
        )
    with pytest.raises(AssertionError):
        check(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n1", "labels": {"netd.io/tor": "x" * 64}},
            }
        )
