"""Kubernetes objects from the fabric's tiers: Node label patches, the Kueue ``Topology`` that names
those labels as levels, and Volcano ``HyperNode`` objects (tier 1: a ToR group with its hosts,
tier 2: a spine group with its ToR groups).

Every object is a plain dict in the shape the API server takes for server-side apply (``kubectl
apply --server-side -f`` or :mod:`netd.kube.service`). Published schemas these follow: Node and
its labels from the Kubernetes OpenAPI; ``topology.volcano.sh/v1alpha1`` HyperNode from
volcano-sh/apis ``pkg/apis/topology/v1alpha1/hypernode_types.go``; ``kueue.x-k8s.io/v1beta1``
Topology from kubernetes-sigs/kueue ``apis/kueue/v1beta1/topology_types.go``.
"""

from __future__ import annotations

from typing import Any

from netd.config.kube import KubeConfig
from netd.kube.names import SUBDOMAIN, label_value, object_name
from netd.kube.tiers import Tiers

__all__ = ["HOSTNAME_LABEL", "MANAGED_BY", "hypernodes", "kueue_topology", "node_labels", "node_name"]

MANAGED_BY = {"app.kubernetes.io/managed-by": "netd"}  # how the publisher finds its own HyperNodes
HOSTNAME_LABEL = "kubernetes.io/hostname"  # kubelet sets it on every node; Kueue's lowest level


def node_name(host: str) -> str | None:
    """The Kubernetes node of a netd host: kubelet names a node after its hostname, lower-cased."""
    name = host.lower()
    return name if len(name) <= 253 and SUBDOMAIN.match(name) else None


def node_labels(t: Tiers, cfg: KubeConfig) -> list[dict[str, Any]]:
    """One Node apply patch per placed host with its spine, ToR and (single) rail labels."""
    out = []
    for h in t.hosts:
        name = node_name(h.host)
        if h.tor is None or name is None:
            continue
        labels = {cfg.tor_label: label_value(h.tor)}
        if h.spine:
            labels[cfg.spine_label] = label_value(h.spine)
        if h.rail is not None:
            labels[cfg.rail_label] = str(h.rail)
        out.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}})
    return out


def kueue_topology(cfg: KubeConfig) -> dict[str, Any]:
    """Kueue's Topology: levels from the top (spine) down to the host (``kubernetes.io/hostname``
    may only be the lowest level). The rail is not a level: rails do not nest under ToRs."""
    levels = [cfg.spine_label, cfg.tor_label, HOSTNAME_LABEL]
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Topology",
        "metadata": {"name": cfg.kueue_topology, "labels": dict(MANAGED_BY)},
        "spec": {"levels": [{"nodeLabel": label} for label in levels]},
    }


def _hypernode(name: str, tier: int, tier_name: str, kind: str, members: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "spec": {
            "tier": tier,
            "tierName": tier_name,
            "members": [{"type": kind, "selector": {"exactMatch": {"name": m}}} for m in members],
        },
    }


def hypernodes(t: Tiers, cfg: KubeConfig) -> list[dict[str, Any]]:
    """Tier 1 per ToR group (members: its nodes), tier 2 per spine group (members: tier-1 names).
    A group with no valid node name gets no HyperNode (Volcano requires at least one member)."""
    tor_names: dict[str, str] = {}
    out = []
    for group, hosts in t.tors.items():
        members = sorted({n for n in map(node_name, hosts) if n is not None})
        if members:
            tor_names[group] = object_name("netd-tor", group)
            out.append(_hypernode(tor_names[group], 1, cfg.tor_tier_name, "Node", members))
    for spine, groups in t.spines.items():
        members = sorted(tor_names[g] for g in groups if g in tor_names)
        if members:
            out.append(
                _hypernode(object_name("netd-spine", spine), 2, cfg.spine_tier_name, "HyperNode", members)
            )
    return out
