"""Fabric topologies: host NIC ports, switches, directed links, and ECMP shortest-path routing.

Node ``i < n_ports`` is host NIC port ``i`` (a host with two NICs is two nodes); switches follow.
Every cable is two directed :class:`Link` objects, each with its own speed and propagation delay, and
every link leaving a switch has an egress queue per priority in the simulator. Routing is
shortest-path with ECMP: where several next hops are equally short, a flow's key is hashed at that
switch to pick one, so one flow stays on one path (no reordering) and different flows spread, as a
switch hashing the 5-tuple does.

Builders: :func:`single_bottleneck`, :func:`leaf_spine` (two-tier Clos, ECMP over spines) and
:func:`rail_optimised` (NIC r of every host on rail leaf r, spines between rails).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Link", "Topology", "leaf_spine", "rail_optimised", "single_bottleneck"]

_MASK = (1 << 64) - 1


def _mix(*values: int) -> int:
    """splitmix64 over the values: a cheap, well-spread, deterministic ECMP hash."""
    h = 0x9E3779B97F4A7C15
    for v in values:
        h = (h ^ (v & _MASK)) * 0xBF58476D1CE4E5B9 & _MASK
        h = (h ^ (h >> 31)) * 0x94D049BB133111EB & _MASK
        h ^= h >> 29
    return h


@dataclass(frozen=True, slots=True)
class Link:
    src: int
    dst: int
    gbps: float
    delay_us: float


class Topology:
    """Nodes, directed links and routing. ``port_labels[i]`` is host port i's (host, port) name."""

    def __init__(
        self,
        name: str,
        port_labels: Sequence[tuple[int, int]],
        n_switches: int,
        links: Sequence[Link],
        seed: int = 0,
    ) -> None:
        self.name = name
        self.port_labels = tuple(port_labels)
        self.n_ports = len(self.port_labels)
        self.n_nodes = self.n_ports + n_switches
        self.links = tuple(links)
        self.seed = seed
        self._out: list[list[int]] = [[] for _ in range(self.n_nodes)]
        self._into: list[list[int]] = [[] for _ in range(self.n_nodes)]
        for i, link in enumerate(self.links):
            if not (0 <= link.src < self.n_nodes and 0 <= link.dst < self.n_nodes) or link.src == link.dst:
                raise ValueError(f"link {i} {link} does not join two distinct nodes")
            if not (link.gbps > 0 and link.delay_us >= 0):
                raise ValueError(f"link {i} needs gbps > 0 and delay_us >= 0, got {link}")
            self._out[link.src].append(i)
            self._into[link.dst].append(i)
        for port in range(self.n_ports):
            if len(self._out[port]) != 1 or len(self._into[port]) != 1:
                raise ValueError(f"host port {port} must have exactly one link each way")
        self._dist: dict[int, list[int]] = {}

    def uplink(self, port: int) -> int:
        """The link a host port sends on."""
        return self._out[port][0]

    def downlink(self, port: int) -> int:
        """The link a host port receives on."""
        return self._into[port][0]

    def port_gbps(self, port: int) -> float:
        return self.links[self.uplink(port)].gbps

    def _distances(self, dst: int) -> list[int]:
        """Hops from every node to ``dst`` (BFS over reversed links); hosts never forward."""
        if dst not in self._dist:
            inf = self.n_nodes + 1
            dist = [inf] * self.n_nodes
            dist[dst] = 0
            todo = deque([dst])
            while todo:
                node = todo.popleft()
                for i in self._into[node]:
                    prev = self.links[i].src
                    if dist[prev] == inf:
                        dist[prev] = dist[node] + 1
                        if prev >= self.n_ports:  # a host port is a path's end, never a transit
                            todo.append(prev)
            self._dist[dst] = dist
        return self._dist[dst]

    def max_switch_hops(self) -> int:
        """The most switches any host-to-host path crosses (the simulator's hop_max)."""
        worst = 1
        for dst in range(self.n_ports):
            dist = self._distances(dst)
            reachable = [d for d in dist[: self.n_ports] if 0 < d <= self.n_nodes]
            worst = max(worst, max(reachable, default=2) - 1)
        return worst

    def path(self, src: int, dst: int, key: int = 0) -> tuple[int, ...]:
        """Link ids from host port ``src`` to host port ``dst``; ECMP picks by ``key`` (per flow)."""
        if not (0 <= src < self.n_ports and 0 <= dst < self.n_ports) or src == dst:
            raise ValueError(f"no path from port {src} to port {dst} ({self.n_ports} host ports)")
        dist = self._distances(dst)
        if dist[src] > self.n_nodes:
            raise ValueError(f"port {dst} is unreachable from port {src}")
        hops: list[int] = []
        node = src
        while node != dst:
            best = [i for i in self._out[node] if dist[self.links[i].dst] == dist[node] - 1]
            chosen = best[_mix(self.seed, key, src, dst, node) % len(best)] if len(best) > 1 else best[0]
            hops.append(chosen)
            node = self.links[chosen].dst
        return tuple(hops)

    def __repr__(self) -> str:
        return f"Topology({self.name!r}, {self.n_ports} host ports, {len(self.links)} links)"


def _cable(links: list[Link], a: int, b: int, gbps: float, delay_us: float) -> None:
    links.append(Link(a, b, gbps, delay_us))
    links.append(Link(b, a, gbps, delay_us))


def single_bottleneck(
    senders: int, gbps: float = 200.0, bottleneck_gbps: float | None = None, delay_us: float = 1.0
) -> Topology:
    """One switch; port 0 receives on a link of ``bottleneck_gbps`` (default ``gbps``), ports 1..N send."""
    if senders < 1:
        raise ValueError(f"senders={senders} must be >= 1")
    switch = senders + 1
    links: list[Link] = []
    _cable(links, 0, switch, bottleneck_gbps or gbps, delay_us)
    for port in range(1, senders + 1):
        _cable(links, port, switch, gbps, delay_us)
    return Topology(f"single-bottleneck-{senders}", [(h, 0) for h in range(senders + 1)], 1, links)


def leaf_spine(
    leaves: int = 2,
    spines: int = 1,
    hosts_per_leaf: int = 4,
    ports_per_host: int = 1,
    host_gbps: float | Sequence[float] = 200.0,
    uplink_gbps: float | None = None,
    oversubscription: float = 1.0,
    host_delay_us: float = 1.0,
    fabric_delay_us: float = 1.0,
    seed: int = 0,
) -> Topology:
    """Two-tier Clos. Host port (h, p) is port ``h * ports_per_host + p``; host h sits on leaf
    ``h // hosts_per_leaf``. ``host_gbps`` may list one speed per host (a mixed-speed fabric). Each leaf
    has one uplink to every spine; their speed defaults to the leaf's host capacity divided by the
    spines and by ``oversubscription`` (1.0 = non-blocking)."""
    if min(leaves, spines, hosts_per_leaf, ports_per_host) < 1 or oversubscription <= 0:
        raise ValueError("leaves, spines, hosts_per_leaf, ports_per_host must be >= 1")
    n_hosts = leaves * hosts_per_leaf
    speeds = [float(host_gbps)] * n_hosts if isinstance(host_gbps, int | float) else list(host_gbps)
    if len(speeds) != n_hosts:
        raise ValueError(f"host_gbps lists {len(speeds)} speeds for {n_hosts} hosts")
    n_ports = n_hosts * ports_per_host
    leaf0, spine0 = n_ports, n_ports + leaves
    links: list[Link] = []
    labels = [(h, p) for h in range(n_hosts) for p in range(ports_per_host)]
    for port, (h, _) in enumerate(labels):
        _cable(links, port, leaf0 + h // hosts_per_leaf, speeds[h], host_delay_us)
    for leaf in range(leaves):
        hosts = range(leaf * hosts_per_leaf, (leaf + 1) * hosts_per_leaf)
        capacity = sum(speeds[h] for h in hosts) * ports_per_host
        up = uplink_gbps or capacity / spines / oversubscription
        for spine in range(spines):
            _cable(links, leaf0 + leaf, spine0 + spine, up, fabric_delay_us)
    name = f"leaf-spine-{leaves}x{spines}x{hosts_per_leaf}"
    return Topology(name, labels, leaves + spines, links, seed)


def rail_optimised(
    hosts: int = 8,
    rails: int = 4,
    hosts_per_pod: int = 8,
    spines: int = 2,
    gbps: float = 200.0,
    uplink_gbps: float | None = None,
    delay_us: float = 1.0,
    seed: int = 0,
) -> Topology:
    """NIC r of every host in a pod connects to that pod's rail-r leaf, so same-rail traffic inside a
    pod crosses one switch; cross-rail or cross-pod traffic goes through a spine. Port (h, r) is
    ``h * rails + r``."""
    if min(hosts, rails, hosts_per_pod, spines) < 1:
        raise ValueError("hosts, rails, hosts_per_pod, spines must be >= 1")
    pods = -(-hosts // hosts_per_pod)
    n_ports = hosts * rails
    leaf0 = n_ports
    spine0 = leaf0 + pods * rails
    links: list[Link] = []
    labels = [(h, r) for h in range(hosts) for r in range(rails)]
    for port, (h, r) in enumerate(labels):
        _cable(links, port, leaf0 + (h // hosts_per_pod) * rails + r, gbps, delay_us)
    up = uplink_gbps or hosts_per_pod * gbps / spines
    for leaf in range(pods * rails):
        for spine in range(spines):
            _cable(links, leaf0 + leaf, spine0 + spine, up, delay_us)
    name = f"rail-{hosts}x{rails}"
    return Topology(name, labels, pods * rails + spines, links, seed)
