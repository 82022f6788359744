"""The cluster's fabric as scheduler tiers: each host under one ToR group, each ToR group under one
spine group, and (where a host sits on a single rail) its rail.

A host whose RDMA ports reach several ToRs — every host of a rail-optimized fabric, where NIC *i*
is cabled to rail *i*'s ToR — is placed under the *group* of those ToRs (their names joined by
``+``, :func:`~netd.model.topology.join_names`). Hosts with the same group share every ToR, so for
a scheduler they are as close as the hosts of one ToR. Likewise a ToR group's spines. This keeps
the tiers a tree, which Kueue's Topology and Volcano's HyperNodes both require.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from netd.model.snapshot import frozen_map
from netd.model.topology import Topology, join_names

__all__ = ["HostTier", "Tiers", "fabric_tiers"]


@dataclass(frozen=True, slots=True)
class HostTier:
    host: str
    tor: str | None  # a ToR, or the ToR group "a+b"; None when nothing placed the host
    spine: str | None  # the spines above that ToR group, joined
    rail: int | None  # the host's rail when all its placed ports are on one


@dataclass(frozen=True, slots=True)
class Tiers:
    hosts: tuple[HostTier, ...]
    tors: Mapping[str, tuple[str, ...]] = field(default_factory=frozen_map)  # ToR group -> hosts
    spines: Mapping[str, tuple[str, ...]] = field(default_factory=frozen_map)  # spine group -> ToR groups
    unplaced: tuple[str, ...] = ()  # hosts with no ToR: no label, no HyperNode


def fabric_tiers(topology: Topology) -> Tiers:
    tors_of: dict[str, set[str]] = defaultdict(set)
    rails_of: dict[str, set[int | None]] = defaultdict(set)
    for p in topology.ports:
        for t in (p.tor or "").split("+"):
            if t:
                tors_of[p.host].add(t)
        rails_of[p.host].add(p.rail)
    hosts: list[HostTier] = []
    by_tor: dict[str, list[str]] = defaultdict(list)
    spine_of_group: dict[str, str | None] = {}
    for host in sorted(set(topology.hosts) | set(tors_of)):
        group = join_names(tors_of.get(host, ()))
        if not group:
            hosts.append(HostTier(host, None, None, None))
            continue
        if group not in spine_of_group:
            uplinks = (s for t in tors_of[host] if t in topology.tors for s in topology.tors[t].spines)
            spine_of_group[group] = join_names(uplinks) or None
        rails = rails_of[host]
        rail = next(iter(rails)) if len(rails) == 1 else None
        hosts.append(HostTier(host, group, spine_of_group[group], rail))
        by_tor[group].append(host)
    by_spine: dict[str, list[str]] = defaultdict(list)
    for group, spine in sorted(spine_of_group.items()):
        if spine:
            by_spine[spine].append(group)
    return Tiers(
        hosts=tuple(hosts),
        tors={t: tuple(h) for t, h in sorted(by_tor.items())},
        spines={s: tuple(g) for s, g in sorted(by_spine.items())},
        unplaced=tuple(h.host for h in hosts if h.tor is None),
    )
