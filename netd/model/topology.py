"""Frozen values that describe the fabric around a host (model layer: any module may import these).

Topology sources (``netd/sources/lldpcli.py``, ``lldp_frames.py``, ``netlink_links.py``, ``gids.py``,
``topology_file.py``) return these values; :mod:`netd.topology.build` combines them with the snapshot's RDMA
ports into one :class:`Topology`: host port → ToR (leaf) port → ToR → spine, with a rail per port.

Names that join several switches (a bond whose members reach two ToRs, a ToR with several spine
uplinks) are written as one label value with the names sorted and joined by ``+``
(:func:`join_names`), so Prometheus recording rules can still group by a single label.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from netd.model.snapshot import frozen_map

__all__ = [
    "Gid",
    "HostInterface",
    "LldpNeighbor",
    "PortPlacement",
    "SourceNote",
    "StaticFabric",
    "StaticPort",
    "Switch",
    "Topology",
    "join_names",
    "printable",
]


def printable(text: str) -> str:
    """``text`` with every control and format character (C0, DEL, C1, bidi overrides) written as a
    ``\\xNN`` or ``\\uNNNN`` escape. LLDP names come from whatever sends frames on the link: printed
    as they are, an escape sequence in a switch's System Name would drive the terminal of the operator
    running ``netd status`` (clear it, retitle it, hide lines). The same bytes always give the same
    name, so a ToR is still one ToR across hosts."""
    if text.isprintable():  # the common case, at C speed (spaces count as printable)
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c: str) -> str:
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def join_names(names: Iterable[str]) -> str:
    """One label value for several switches: sorted, unique, joined by ``+`` ('' for none)."""
    return "+".join(sorted({n for n in names if n}))


@dataclass(frozen=True, slots=True)
class LldpNeighbor:
    """What one host interface hears over LLDP: normally its ToR (leaf) switch and switch port."""

    interface: str  # the local netdev the frame arrived on
    chassis_name: str | None  # System Name TLV (the switch's hostname)
    chassis_id: str | None  # Chassis ID TLV value (usually a MAC)
    port_id: str | None  # Port ID TLV value
    port_id_type: str | None  # "ifname", "local", "mac", ... (lldpd's names)
    port_descr: str | None
    mgmt_addresses: tuple[str, ...] = ()
    system_descr: str | None = None
    ttl_s: int | None = None
    source: str = "lldpd"  # "lldpd", "lldp-frames", "lldp-file"
    # IEEE 802.3 Maximum Frame Size TLV (802.3 clause 79.3.4): the largest frame, destination address
    # through FCS, the neighbour's port accepts. None when the neighbour does not send it (lldpd on
    # Linux never does: there is no MFS to read from the kernel, only the MTU).
    max_frame_size: int | None = None

    def __post_init__(self) -> None:
        # Every text field came off the wire (or through lldpd, which relays it): see printable().
        for name in ("chassis_name", "chassis_id", "port_id", "port_descr", "system_descr"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, printable(value))
        object.__setattr__(self, "mgmt_addresses", tuple(map(printable, self.mgmt_addresses)))

    @property
    def switch(self) -> str | None:
        """The switch name netd uses: System Name, else the chassis id."""
        return self.chassis_name or self.chassis_id

    @property
    def switch_port(self) -> str | None:
        """The switch's port name: an interface-name Port ID, else the port description, else the id."""
        if self.port_id_type in ("ifname", "local", "ifalias") and self.port_id:
            return self.port_id
        return self.port_descr or self.port_id

    @property
    def mgmt_address(self) -> str | None:
        """The address to reach the switch: IPv4 first, link-local IPv6 last."""
        ranked = sorted(self.mgmt_addresses, key=lambda a: (":" in a, a.lower().startswith("fe80")))
        return ranked[0] if ranked else None


@dataclass(frozen=True, slots=True)
class HostInterface:
    """One netdev as netlink reports it (pyroute2)."""

    name: str
    index: int
    kind: str  # "physical", "bond", "vlan", "veth", "bridge", "dummy", ... (IFLA_INFO_KIND or physical)
    mac: str | None = None
    mtu: int | None = None
    oper_state: str | None = None  # "UP", "DOWN", "LOWERLAYERDOWN", ...
    master: str | None = None  # the bond (or bridge) this interface is enslaved to
    link: str | None = None  # the parent of a VLAN
    vlan_id: int | None = None
    addresses: tuple[str, ...] = ()  # "10.0.0.1/24", "fe80::1/64"


@dataclass(frozen=True, slots=True)
class Gid:
    """One populated GID table entry of an RDMA port."""

    index: int
    gid: str
    type: str  # "RoCE v2", "IB/RoCE v1"
    netdev: str | None


@dataclass(frozen=True, slots=True)
class StaticPort:
    """A host port as a static topology file describes it (what LLDP cannot or did not see)."""

    tor: str | None = None
    tor_port: str | None = None
    rail: int | None = None


@dataclass(frozen=True, slots=True)
class Switch:
    """A ToR (leaf) or spine. ``spines`` are a ToR's uplinks; ``rail`` marks a rail ToR."""

    name: str
    role: str  # "tor" or "spine"
    spines: tuple[str, ...] = ()
    rail: int | None = None
    mgmt_address: str | None = None


@dataclass(frozen=True, slots=True)
class StaticFabric:
    """A parsed static topology file: switches, uplinks, and host ports by host name.

    ``ports[host][key]`` where key is a netdev, an RDMA device, or ``device/port``.
    ``rails_by`` says how to number rails when nothing explicit is known: ``device_index`` (NIC i of
    every host is on rail i, in the order of the host's RDMA device names), or ``none``.
    """

    tors: Mapping[str, Switch] = field(default_factory=frozen_map)
    spines: Mapping[str, Switch] = field(default_factory=frozen_map)
    ports: Mapping[str, Mapping[str, StaticPort]] = field(default_factory=frozen_map)
    rails_by: str = "device_index"
    path: str | None = None


@dataclass(frozen=True, slots=True)
class SourceNote:
    """How one topology source fared at its last refresh (shown in /v1/topology)."""

    source: str
    ok: bool
    detail: str = ""
    items: int = 0


@dataclass(frozen=True, slots=True)
class PortPlacement:
    """One host RDMA port placed in the fabric."""

    host: str
    device: str
    port: int
    netdev: str | None
    state: str | None = None
    link_layer: str | None = None
    rail: int | None = None
    tor: str | None = None  # a ToR name, or several joined by "+" (a bond across an MLAG pair)
    tor_port: str | None = None
    spine: str | None = None  # the ToR's spine uplinks joined by "+"
    placed_by: str = "none"  # "lldp", "static", "lldp+static", "none"
    bond: str | None = None
    members: tuple[str, ...] = ()  # a bond's member interfaces (LLDP is heard on these)
    addresses: tuple[str, ...] = ()
    vlans: tuple[HostInterface, ...] = ()
    gids: tuple[Gid, ...] = ()  # RoCE v2 entries
    neighbors: tuple[LldpNeighbor, ...] = ()

    @property
    def key(self) -> tuple[str, int]:
        return (self.device, self.port)


@dataclass(frozen=True, slots=True)
class Topology:
    """One host's (or, in fabric mode, the cluster's) view of the fabric."""

    generated_at: float
    hosts: tuple[str, ...]
    ports: tuple[PortPlacement, ...]
    tors: Mapping[str, Switch] = field(default_factory=frozen_map)
    spines: Mapping[str, Switch] = field(default_factory=frozen_map)
    interfaces: tuple[HostInterface, ...] = ()
    sources: tuple[SourceNote, ...] = ()
    warnings: tuple[str, ...] = ()

    def placement(self, device: str, port: int, host: str | None = None) -> PortPlacement | None:
        for p in self.ports:
            if p.device == device and p.port == port and (host is None or p.host == host):
                return p
        return None
