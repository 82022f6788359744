"""The lab's shape as plain values: nodes, links, names, addresses, MACs, interface indexes.

Pure (no system calls), so every name the lab will create is known before anything is created and
``netd lab down`` can recompute them from the state file. Conventions:

* namespaces ``ndl-<lab>-h<i>``, ``ndl-<lab>-tor<t>``, ``ndl-<lab>-spine`` (the sweep prefix is
  ``ndl-<lab>-``); hosts attach to ToRs in contiguous blocks, every ToR to the one spine;
* interfaces: a host's ``eth0``; a switch's ``swp1..`` towards the tier below (hosts, or ToRs on the
  spine) and ``uplink`` towards the spine;
* every veth end gets an explicit interface index ``IFINDEX_BASE + port id``, unique inside the lab, so
  the data-plane programs can key per-port state by ``skb->ifindex`` although ports live in different
  namespaces (where the kernel would otherwise reuse small indexes);
* addresses live only inside the lab's namespaces: host ``10.77.<t+1>.<10+i>/32`` behind its ToR's
  ``10.77.<t+1>.1`` (one unnumbered address on every downlink), ToR-spine links ``10.77.0.<2t>/31``.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from functools import cached_property

__all__ = [
    "IFINDEX_BASE",
    "MAX_PORTS",
    "NS_PREFIX",
    "LabLayout",
    "Link",
    "Node",
    "Port",
    "check_lab_name",
]

NS_PREFIX = "ndl-"
IFINDEX_BASE = 100
MAX_PORTS = 128  # the data plane's per-port arrays (passed to ebpf/lab_switch.c as -DMAX_PORTS)
MAX_HOSTS = 32
_NAME = re.compile(r"^[a-z][a-z0-9]{0,11}$")


def check_lab_name(name: str) -> str:
    if not _NAME.match(name):
        raise ValueError(f"lab name {name!r}: use 1-12 lower-case letters and digits, starting with a letter")
    return name


@dataclass(frozen=True, slots=True)
class Node:
    name: str  # short: h0, tor1, spine
    kind: str  # "host" | "tor" | "spine"
    index: int  # host i, tor t, 0 for the spine
    netns: str


@dataclass(frozen=True, slots=True)
class Port:
    id: int  # unique in the lab; ifindex = IFINDEX_BASE + id
    node: Node
    ifname: str
    mac: str
    address: str  # IPv4 without prefix length
    rate_mbps: float  # egress bottleneck of a switch port; line rate of a host port
    peer_id: int

    @property
    def ifindex(self) -> int:
        return IFINDEX_BASE + self.id

    @property
    def is_switch(self) -> bool:
        return self.node.kind != "host"


@dataclass(frozen=True, slots=True)
class Link:
    lower: Port  # the host end, or the ToR end of an uplink
    upper: Port  # the switch end facing ``lower``


@dataclass(frozen=True)
class LabLayout:
    name: str
    hosts: int = 4
    tors: int = 2
    link_mbps: float = 100.0
    oversubscription: float = 1.0  # ToR downlink capacity / uplink capacity

    def __post_init__(self) -> None:
        check_lab_name(self.name)
        if not 1 <= self.tors <= 8:
            raise ValueError(f"--tors {self.tors}: choose 1..8")
        if not max(2, self.tors) <= self.hosts <= MAX_HOSTS:
            raise ValueError(
                f"--hosts {self.hosts}: choose {max(2, self.tors)}..{MAX_HOSTS} (at least one per ToR)"
            )
        if not 1 <= self.link_mbps <= 10_000:
            raise ValueError(f"--rate {self.link_mbps} Mb/s: choose 1..10000")
        if self.oversubscription < 1:
            raise ValueError("oversubscription must be >= 1")
        if len(self.ports) > MAX_PORTS:
            raise ValueError(f"{len(self.ports)} ports exceed the data plane's {MAX_PORTS}")

    # -- nodes ---------------------------------------------------------------------------------
    @property
    def prefix(self) -> str:
        return f"{NS_PREFIX}{self.name}-"

    def _node(self, short: str, kind: str, index: int) -> Node:
        return Node(short, kind, index, f"{self.prefix}{short}")

    def tor_of(self, host: int) -> int:
        return host * self.tors // self.hosts

    def hosts_under(self, tor: int) -> list[int]:
        return [h for h in range(self.hosts) if self.tor_of(h) == tor]

    @cached_property
    def host_nodes(self) -> tuple[Node, ...]:
        return tuple(self._node(f"h{i}", "host", i) for i in range(self.hosts))

    @cached_property
    def tor_nodes(self) -> tuple[Node, ...]:
        return tuple(self._node(f"tor{t}", "tor", t) for t in range(self.tors))

    @cached_property
    def spine_node(self) -> Node | None:
        return self._node("spine", "spine", 0) if self.tors > 1 else None

    @property
    def nodes(self) -> tuple[Node, ...]:
        spine = (self.spine_node,) if self.spine_node else ()
        return self.host_nodes + self.tor_nodes + spine

    @property
    def switches(self) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind != "host")

    # -- links and ports -----------------------------------------------------------------------
    def uplink_mbps(self, tor: int) -> float:
        return self.link_mbps * len(self.hosts_under(tor)) / self.oversubscription

    def host_address(self, host: int) -> str:
        return f"10.77.{self.tor_of(host) + 1}.{10 + host}"

    def _mac(self, port_id: int) -> str:
        lab = zlib.crc32(self.name.encode()) & 0xFF
        return f"02:6c:{lab:02x}:00:{port_id >> 8:02x}:{port_id & 0xFF:02x}"

    @cached_property
    def links(self) -> tuple[Link, ...]:
        links: list[Link] = []

        def pair(lo: tuple[Node, str, str, float], up: tuple[Node, str, str, float]) -> None:
            lo_id, up_id = 2 * len(links), 2 * len(links) + 1
            lower = Port(lo_id, lo[0], lo[1], self._mac(lo_id), lo[2], lo[3], up_id)
            upper = Port(up_id, up[0], up[1], self._mac(up_id), up[2], up[3], lo_id)
            links.append(Link(lower, upper))

        for t, tor in enumerate(self.tor_nodes):
            for k, h in enumerate(self.hosts_under(t)):
                host = self.host_nodes[h]
                pair(
                    (host, "eth0", self.host_address(h), self.link_mbps),
                    (tor, f"swp{k + 1}", f"10.77.{t + 1}.1", self.link_mbps),
                )
        if self.spine_node is not None:
            for t, tor in enumerate(self.tor_nodes):
                rate = self.uplink_mbps(t)
                pair(
                    (tor, "uplink", f"10.77.0.{2 * t + 1}", rate),
                    (self.spine_node, f"swp{t + 1}", f"10.77.0.{2 * t}", rate),
                )
        return tuple(links)

    @cached_property
    def ports(self) -> tuple[Port, ...]:
        return tuple(p for link in self.links for p in (link.lower, link.upper))

    def port(self, port_id: int) -> Port:
        return self.ports[port_id]

    def ports_of(self, node: Node) -> list[Port]:
        return [p for p in self.ports if p.node == node]

    def host_port(self, host: int) -> Port:
        return next(p for p in self.ports if p.node.kind == "host" and p.node.index == host)

    def host_facing(self, host: int) -> Port:
        """The ToR port whose egress queue feeds ``host``: the incast bottleneck."""
        return self.port(self.host_port(host).peer_id)

    def find_port(self, node_name: str, ifname: str) -> Port:
        for p in self.ports:
            if p.node.name == node_name and p.ifname == ifname:
                return p
        raise KeyError(f"no port {node_name}/{ifname} in lab {self.name}")

    def routes(self, node: Node) -> list[tuple[str, str | None, str]]:
        """(destination, gateway or None, device) for one node; all within 10.77.0.0/16."""
        if node.kind == "host":
            port = self.ports_of(node)[0]
            gw = self.port(port.peer_id).address
            return [(f"{gw}/32", None, "eth0"), ("10.77.0.0/16", gw, "eth0")]
        out: list[tuple[str, str | None, str]] = []
        for p in self.ports_of(node):
            peer = self.port(p.peer_id)
            if peer.node.kind == "host":
                out.append((f"{peer.address}/32", None, p.ifname))
            elif node.kind == "tor":  # the uplink: everything else via the spine
                out.append((f"{peer.address}/32", None, p.ifname))
                out.append(("10.77.0.0/16", peer.address, p.ifname))
            else:  # spine: each ToR's /24 via that ToR
                out.append((f"{peer.address}/32", None, p.ifname))
                out.append((f"10.77.{peer.node.index + 1}.0/24", peer.address, p.ifname))
        return out

    def describe(self) -> dict[str, object]:
        return {
            "name": self.name,
            "hosts": self.hosts,
            "tors": self.tors,
            "link_mbps": self.link_mbps,
            "oversubscription": self.oversubscription,
        }
