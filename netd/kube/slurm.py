"""Slurm's ``topology.conf`` for the tree plugin (``TopologyPlugin=topology/tree``): the same tiers
for clusters that are not Kubernetes. Leaf switches list their nodes, spine switches their leaves
(slurm.conf(5) and topology.conf(5): ``SwitchName=... Nodes=...`` / ``Switches=...``)."""

from __future__ import annotations

import re

from netd.kube.tiers import Tiers

__all__ = ["slurm_name", "slurm_topology"]


def slurm_name(name: str) -> str:
    """A switch name Slurm parses: its lists split on ',' and hostlist brackets; keep [A-Za-z0-9_.-]."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


def slurm_topology(t: Tiers, source: str) -> str:
    lines = [f"# topology.conf for Slurm's topology/tree plugin, written by netd from {source}"]
    if t.unplaced:
        lines.append(f"# not placed under any switch (no LLDP or file data): {','.join(t.unplaced)}")
    for spine, groups in t.spines.items():
        lines.append(f"SwitchName={slurm_name(spine)} Switches={','.join(slurm_name(g) for g in groups)}")
    for group, hosts in t.tors.items():
        lines.append(f"SwitchName={slurm_name(group)} Nodes={','.join(hosts)}")
    return "\n".join(lines) + "\n"
