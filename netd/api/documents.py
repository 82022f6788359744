"""Topology and congestion values to the JSON documents of /v1/topology and /v1/congestion."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, TypeVar

from netd.congestion.scorer import ScopeScore
from netd.model.topology import HostInterface, LldpNeighbor, PortPlacement, Topology

__all__ = ["congestion_item", "page", "placement_doc", "topology_summary"]

T = TypeVar("T")


def page(items: Sequence[T], offset: int, limit: int) -> tuple[list[T], dict[str, Any]]:
    """One page of ``items`` and its envelope fields (total, offset, limit, next_offset)."""
    chunk = list(items[offset : offset + limit])
    following = offset + limit if offset + limit < len(items) else None
    return chunk, {"total": len(items), "offset": offset, "limit": limit, "next_offset": following}


def _interface(i: HostInterface) -> dict[str, Any]:
    d = asdict(i)
    d["addresses"] = list(i.addresses)
    return d


def _neighbor(n: LldpNeighbor) -> dict[str, Any]:
    return {
        "interface": n.interface,
        "switch": n.switch,
        "switch_port": n.switch_port,
        "mgmt_address": n.mgmt_address,
        "chassis_id": n.chassis_id,
        "port_id": n.port_id,
        "port_id_type": n.port_id_type,
        "system_descr": n.system_descr,
        "ttl_s": n.ttl_s,
        "max_frame_size": n.max_frame_size,
        "source": n.source,
    }


def placement_doc(p: PortPlacement) -> dict[str, Any]:
    return {
        "host": p.host,
        "device": p.device,
        "port": p.port,
        "netdev": p.netdev,
        "state": p.state,
        "link_layer": p.link_layer,
        "rail": p.rail,
        "tor": p.tor,
        "tor_port": p.tor_port,
        "spine": p.spine,
        "placed_by": p.placed_by,
        "bond": p.bond,
        "members": list(p.members),
        "addresses": list(p.addresses),
        "vlans": [_interface(v) for v in p.vlans],
        "gids": [asdict(g) for g in p.gids],
        "neighbors": [_neighbor(n) for n in p.neighbors],
    }


def topology_summary(t: Topology) -> dict[str, Any]:
    """Hosts, ToRs, spines and rails (everything but the paged port list)."""
    hosts_of: dict[str, set[str]] = {}
    ports_of: dict[str, int] = {}
    rails: dict[int, tuple[set[str], list[int]]] = {}
    for p in t.ports:
        for tor in (p.tor or "").split("+"):
            if tor:
                hosts_of.setdefault(tor, set()).add(p.host)
                ports_of[tor] = ports_of.get(tor, 0) + 1
        if p.rail is not None:
            tors, count = rails.setdefault(p.rail, (set(), [0]))
            tors.update(x for x in (p.tor or "").split("+") if x)
            count[0] += 1
    tors_of_spine: dict[str, list[str]] = {}
    for switch in t.tors.values():
        for s in switch.spines:
            tors_of_spine.setdefault(s, []).append(switch.name)
    return {
        "hosts": list(t.hosts),
        "tors": [
            {
                "name": s.name,
                "spines": list(s.spines),
                "rail": s.rail,
                "mgmt_address": s.mgmt_address,
                "hosts": sorted(hosts_of.get(s.name, ())),
                "ports": ports_of.get(s.name, 0),
            }
            for s in sorted(t.tors.values(), key=lambda s: s.name)
        ],
        "spines": [
            {"name": s.name, "tors": sorted(tors_of_spine.get(s.name, ())), "mgmt_address": s.mgmt_address}
            for s in sorted(t.spines.values(), key=lambda s: s.name)
        ],
        "rails": [
            {"rail": r, "tors": sorted(tors), "ports": count[0]} for r, (tors, count) in sorted(rails.items())
        ],
        "interfaces": [_interface(i) for i in t.interfaces],
        "sources": [asdict(s) for s in t.sources],
        "warnings": list(t.warnings),
    }


def congestion_item(s: ScopeScore) -> dict[str, Any]:
    return {
        "scope": s.scope,
        "name": s.name,
        "score": round(s.score, 6),
        "smoothed": round(s.smoothed, 6),
        "level": s.level,
        "since": s.since,
        "up": s.up,
        "stormed": s.stormed,
        "labels": dict(s.labels),
        "signals": dict(s.signals),
        "contributions": {k: round(v, 6) for k, v in s.contributions.items()},
        "members": list(s.members),
    }
