"""The published rules every object netd emits must satisfy, independent of netd's own code.

Core objects (Node, ...) go through ``kubernetes-validate``'s copy of the Kubernetes OpenAPI
schemas; HyperNode, Kueue Topology, PrometheusRule and ServiceMonitor through the JSON Schemas in
tests/fixtures/schemas (written from the published API types; each file's ``$comment`` says which).
Label keys and values are checked against the regular expressions of k8s.io/apimachinery
``pkg/util/validation`` (IsQualifiedName, IsValidLabelValue), restated from that source, not
imported from netd.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "schemas"
K8S_VERSION = "1.37.0"

# k8s.io/apimachinery/pkg/util/validation/validation.go
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")  # at most 63
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")  # at most 63
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")  # <= 253


@cache
def _schema(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def check_label(key: str, value: str) -> None:
    prefix, _, name = key.rpartition("/")
    assert not prefix or (len(prefix) <= 253 and DNS1123_SUBDOMAIN.match(prefix)), key
    assert len(name) <= 63 and QUALIFIED_NAME.match(name), key
    assert len(value) <= 63 and LABEL_VALUE.match(value), (key, value)


def check(obj: dict[str, Any]) -> None:
    """Raise AssertionError (or a schema error) unless ``obj`` is valid for its kind."""
    kind = obj["kind"]
    for k, v in obj.get("metadata", {}).get("labels", {}).items():
        check_label(k, v)
    if kind == "HyperNode":
        jsonschema.validate(obj, _schema("hypernode-v1alpha1.json"))
    elif kind in ("PrometheusRule", "ServiceMonitor"):
        jsonschema.validate(obj, _schema(f"{kind.lower()}-v1.json"))
    elif kind == "Topology":
        jsonschema.validate(obj, _schema("kueue-topology-v1beta1.json"))
        labels = [level["nodeLabel"] for level in obj["spec"]["levels"]]
        hostname = "kubernetes.io/hostname"  # Kueue's CEL rule: only at the lowest level
        assert hostname not in labels or labels[-1] == hostname
    else:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    if kind == "Node":
        name = obj["metadata"]["name"]
        assert len(name) <= 253 and DNS1123_SUBDOMAIN.match(name), name
