"""The fabric model: host RDMA port → ToR (leaf) port → ToR → spine, with a rail per port. Pure.

:func:`build_topology` combines what the topology sources found (LLDP neighbours, netlink interfaces,
GID tables, the static topology file) with the RDMA ports of the latest snapshot:

* **ToR and ToR port** come from LLDP, heard on the port's netdev, or on a bond's member interfaces
  (a RoCE LAG: LLDP runs per member, and an MLAG pair gives two ToRs, joined as ``torA+torB``).
  A port LLDP does not place is taken from the static file (key: netdev, ``device/port`` or device).
  When both know the port and disagree, LLDP wins (it is what the cable says) and a warning is kept.
* **Spines** are the ToR's uplinks from the static file (LLDP on a host cannot see them).
* **Rail**: the static file's port entry, else the ToR's ``rail`` (a rail ToR), else, with
  ``rails: device_index`` (the default), the port's index among the host's RDMA ports in natural
  order (NIC i of every host is on rail i: the rail-optimised convention).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from netd.model.snapshot import PortSample, frozen_map
from netd.model.topology import (
    Gid,
    HostInterface,
    LldpNeighbor,
    PortPlacement,
    SourceNote,
    StaticFabric,
    StaticPort,
    Switch,
    Topology,
    join_names,
)

__all__ = ["build_topology", "natural_key", "rail_index"]


def natural_key(text: str) -> tuple[object, ...]:
    """Sort key where mlx5_2 comes before mlx5_10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", text))


def rail_index(ports: Sequence[PortSample]) -> dict[tuple[str, int], int]:
    """NIC i on rail i: each port's position among the host's RDMA ports in natural order."""
    keys = sorted({p.key for p in ports}, key=lambda k: (natural_key(k[0]), k[1]))
    return {k: i for i, k in enumerate(keys)}


def _static_port(static: StaticFabric | None, host: str, p: PortSample) -> StaticPort | None:
    if static is None:
        return None
    entries = static.ports.get(host)
    if not entries:
        return None
    for key in (p.netdev, f"{p.device}/{p.port}", p.device):
        if key and key in entries:
            return entries[key]
    return None


def _spines_of(tor: str | None, tors: Mapping[str, Switch]) -> str | None:
    if not tor:
        return None
    names = [s for t in tor.split("+") if t in tors for s in tors[t].spines]
    return join_names(names) or None


def _place(
    host: str,
    p: PortSample,
    by_name: Mapping[str, HostInterface],
    interfaces: Sequence[HostInterface],
    heard: Mapping[str, list[LldpNeighbor]],
    static: StaticFabric | None,
    tors: Mapping[str, Switch],
    default_rail: int | None,
    gids: tuple[Gid, ...],
    warnings: list[str],
) -> PortPlacement:
    netdev = p.netdev
    iface = by_name.get(netdev) if netdev else None
    members = tuple(i.name for i in interfaces if netdev and i.master == netdev) if iface else ()
    bond = netdev if iface is not None and iface.kind == "bond" else (iface.master if iface else None)
    listen_on = members if iface is not None and iface.kind == "bond" and members else (netdev,)
    neighbors = tuple(n for name in listen_on if name for n in heard.get(name, ()))
    lldp_tor = join_names(n.switch or "" for n in neighbors) or None
    lldp_port = "+".join(sorted({n.switch_port for n in neighbors if n.switch_port})) or None
    sp = _static_port(static, host, p)
    tor, tor_port, placed_by = lldp_tor, lldp_port, "lldp" if lldp_tor else "none"
    if sp is not None and sp.tor:
        if lldp_tor is None:
            tor, tor_port, placed_by = sp.tor, sp.tor_port, "static"
        elif sp.tor != lldp_tor:
            warnings.append(
                f"{host} {p.device}/{p.port} ({netdev}): LLDP sees ToR {lldp_tor}, the topology file "
                f"says {sp.tor}; using LLDP (check the cabling or the file)"
            )
        else:
            placed_by = "lldp+static"
    if tor is None:
        warnings.append(
            f"{host} {p.device}/{p.port} ({netdev}): no ToR known "
            "(no LLDP neighbour, not in the topology file)"
        )
    rail = sp.rail if sp is not None and sp.rail is not None else None
    if rail is None and tor and tor in tors:
        rail = tors[tor].rail
    if rail is None:
        rail = default_rail
    vlan_parents = {netdev, bond} - {None}
    return PortPlacement(
        host=host,
        device=p.device,
        port=p.port,
        netdev=netdev,
        state=p.state,
        link_layer=p.link_layer,
        rail=rail,
        tor=tor,
        tor_port=tor_port,
        spine=_spines_of(tor, tors),
        placed_by=placed_by,
        bond=bond,
        members=members,
        addresses=iface.addresses if iface else (),
        vlans=tuple(i for i in interfaces if i.kind == "vlan" and i.link in vlan_parents),
        gids=gids,
        neighbors=neighbors,
    )


def _switches(static: StaticFabric | None, neighbors: Iterable[LldpNeighbor]) -> dict[str, Switch]:
    tors: dict[str, Switch] = dict(static.tors) if static is not None else {}
    for n in neighbors:
        name = n.switch
        if not name:
            continue
        known = tors.get(name)
        if known is None:
            tors[name] = Switch(name, "tor", mgmt_address=n.mgmt_address)
        elif known.mgmt_address is None and n.mgmt_address:
            tors[name] = Switch(name, "tor", known.spines, known.rail, n.mgmt_address)
    return tors


def build_topology(
    host: str,
    ports: Sequence[PortSample],
    *,
    neighbors: Sequence[LldpNeighbor] = (),
    interfaces: Sequence[HostInterface] = (),
    static: StaticFabric | None = None,
    gids: Mapping[tuple[str, int], tuple[Gid, ...]] | None = None,
    sources: Sequence[SourceNote] = (),
    now: float = 0.0,
) -> Topology:
    by_name = {i.name: i for i in interfaces}
    heard: dict[str, list[LldpNeighbor]] = {}
    for n in neighbors:
        heard.setdefault(n.interface, []).append(n)
    tors = _switches(static, neighbors)
    rails = rail_index(ports) if static is None or static.rails_by == "device_index" else {}
    warnings: list[str] = []
    placed = tuple(
        _place(
            host,
            p,
            by_name,
            interfaces,
            heard,
            static,
            tors,
            rails.get(p.key),
            (gids or {}).get(p.key, ()),
            warnings,
        )
        for p in sorted(ports, key=lambda p: (natural_key(p.device), p.port))
    )
    spines = dict(static.spines) if static is not None else {}
    for t in tors.values():
        for s in t.spines:
            spines.setdefault(s, Switch(s, "spine"))
    return Topology(
        generated_at=now,
        hosts=(host,),
        ports=placed,
        tors=frozen_map(tors),
        spines=frozen_map(spines),
        interfaces=tuple(i for i in interfaces if i.kind != "loopback"),
        sources=tuple(sources),
        warnings=tuple(warnings),
    )
