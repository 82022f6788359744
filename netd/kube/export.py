"""`netd fabric export`'s documents: the fabric's tiers in each scheduler's own format."""

from __future__ import annotations

from typing import Any

import yaml

from netd.config.kube import KubeConfig
from netd.kube.objects import hypernodes, kueue_topology, node_labels
from netd.kube.slurm import slurm_topology
from netd.kube.tiers import Tiers

__all__ = ["FORMATS", "export_objects", "render"]

FORMATS = ("hypernodes", "node-labels", "slurm")
# libyaml's emitter when PyYAML was built with it: the pure-Python one took 3 s of the 4096-host
# export's 3.2 s (docs/benchmarks.md)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def export_objects(t: Tiers, cfg: KubeConfig, fmt: str) -> list[dict[str, Any]]:
    """The Kubernetes objects of a format: HyperNodes, or Node label patches and Kueue's Topology."""
    if fmt == "hypernodes":
        return hypernodes(t, cfg)
    if fmt == "node-labels":
        return [*node_labels(t, cfg), kueue_topology(cfg)]
    raise ValueError(f"{fmt} is not a Kubernetes format")


def render(t: Tiers, cfg: KubeConfig, fmt: str, source: str) -> str:
    """The text to print: a YAML stream for `kubectl apply --server-side -f -`, or topology.conf."""
    if fmt == "slurm":
        return slurm_topology(t, source)
    head = f"# netd fabric export --format {fmt}, from {source}\n"
    objs = export_objects(t, cfg, fmt)
    return head + yaml.dump_all(objs, Dumper=_DUMPER, sort_keys=False, explicit_start=True)
