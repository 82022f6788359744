"""Build and remove the lab's namespaces, veth links, addresses, routes and bottleneck qdiscs.

Switches route (IPv4 forwarding in their namespace): a Linux bridge would not forward the PFC
frames the lab emulates, and routing keeps every hop a real kernel forwarding decision. Each switch
port's egress gets the bottleneck: a TBF root (handle ``<major>:``) at the port's rate over its
byte-limited FIFO. The root handle's major number is unique per lab so the data plane's qdisc
tracepoints can tell this lab's queues from every other qdisc on the machine.

Every veth end runs in NAPI mode (GRO on, TSO off): a veth without NAPI hands each packet to the
per-CPU backlog of whichever CPU sent it, so a sender that migrates between CPUs, or a queue
drained by a timer on one CPU and by an enqueue on another, reorders packets — which an RC receiver
sees as loss (NAKs, go-back-N). In NAPI mode every packet goes through the peer's FIFO ring.

TBF rather than HTB because PFC emulation pauses a port by changing its rate: ``tc qdisc change``
on a TBF keeps the queue and resets the token bucket, whereas an HTB class that sent one packet at a
trickle rate keeps a token debt of (packet size / trickle rate) — many minutes — after the rate is
restored.
"""

from __future__ import annotations

import subprocess

from netd.lab.layout import LabLayout, Node, Port
from netd.lab.netns import NETNS_DIR, ip_batch, kill_pids, list_netns, netns_pids, run, tc_batch

__all__ = ["MTU", "TcShell", "build_fabric", "remove_namespaces", "shape_port", "tbf_cmd"]

MTU = 4200  # as mlx5 RoCE ports are usually configured: a 4096-byte RoCE MTU fits
_SYSCTLS = (
    "net.ipv4.ip_forward=1",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
    "net.ipv6.conf.all.disable_ipv6=1",  # no router solicitations/MLD noise on the lab's links
    "net.ipv6.conf.default.disable_ipv6=1",
)


def build_fabric(layout: LabLayout, qdisc_major: int, buffer_bytes: int) -> None:
    """Create everything; on any failure the caller removes the namespaces (nothing is outside them)."""
    for node in layout.nodes:
        run(["ip", "netns", "add", node.netns])
    for node in layout.nodes:
        sysctls = [s for s in _SYSCTLS if node.kind != "host" or not s.startswith("net.ipv4.ip_forward")]
        run(["ip", "netns", "exec", node.netns, "sysctl", "-q", "-w", *sysctls])
    # veths are created directly inside their namespaces: no name ever appears in the root namespace
    ip_batch(None, [_veth_cmd(link.lower, link.upper) for link in layout.links])
    for node in layout.nodes:
        ip_batch(node.netns, _node_cmds(layout, node))
        for p in layout.ports_of(node):  # NAPI mode: in-order delivery (see above)
            run(["ip", "netns", "exec", node.netns, "ethtool", "-K", p.ifname, "gro", "on", "tso", "off"])
    for node in layout.switches:
        tc_batch(node.netns, [shape_port(p, qdisc_major, buffer_bytes) for p in layout.ports_of(node)])


def _veth_cmd(a: Port, b: Port) -> str:
    return (
        f"link add name {a.ifname} index {a.ifindex} address {a.mac} netns {a.node.netns} mtu {MTU} "
        f"type veth peer name {b.ifname} index {b.ifindex} address {b.mac} netns {b.node.netns} mtu {MTU}"
    )


def _node_cmds(layout: LabLayout, node: Node) -> list[str]:
    cmds = ["link set lo up"]
    for p in layout.ports_of(node):
        peer = layout.port(p.peer_id)
        cmds += [
            f"link set {p.ifname} up",
            f"addr add {p.address}/32 dev {p.ifname}",
            # permanent neighbours: no ARP on the data path, the first packet of a run is not lost
            f"neigh replace {peer.address} lladdr {peer.mac} dev {p.ifname} nud permanent",
        ]
    for dest, gw, dev in layout.routes(node):
        cmds.append(f"route replace {dest} dev {dev}" + (f" via {gw}" if gw else " scope link"))
    return cmds


def tbf_cmd(port: Port, qdisc_major: int, rate_bps: float, buffer_bytes: int, verb: str = "change") -> str:
    """The port's bottleneck at ``rate_bps``. A burst of two frames keeps the shaper smooth at
    1-1000 Mb/s; a paused port (a trickle rate) gets one frame, so at most one packet leaks."""
    burst = MTU if rate_bps < 1e6 else 2 * MTU
    return (
        f"qdisc {verb} dev {port.ifname} root handle {qdisc_major:x}: tbf "
        f"rate {int(rate_bps)}bit burst {burst} limit {buffer_bytes}"
    )


class TcShell:
    """A long-lived ``tc -batch -`` in a namespace: a rate change takes effect in microseconds, where
    forking ``tc`` takes milliseconds (and pyroute2 0.9's TBF encoding drops every packet of a TBF
    changed to a low rate). Errors go to the caller's stderr (the lab daemon's log)."""

    def __init__(self, netns: str) -> None:
        self.netns = netns
        self._proc: subprocess.Popen[str] | None = None

    def send(self, command: str) -> None:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                ["tc", "-n", self.netns, "-force", "-batch", "-"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                text=True,
            )
        assert self._proc.stdin is not None
        self._proc.stdin.write(command + "\n")
        self._proc.stdin.flush()

    def close(self) -> None:
        if self._proc is not None:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
            try:
                self._proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None


def shape_port(port: Port, qdisc_major: int, buffer_bytes: int) -> str:
    return tbf_cmd(port, qdisc_major, port.rate_mbps * 1e6, buffer_bytes, verb="replace")


def remove_namespaces(names: list[str], prefix: str) -> list[str]:
    """Kill every process inside, then delete the namespaces (their veths, qdiscs and tc programs go
    with them). ``names`` from the state file plus everything still matching ``prefix``."""
    doomed = sorted(set(names) | set(list_netns(prefix)))
    kill_pids([pid for ns in doomed for pid in netns_pids(ns)])
    for ns in doomed:
        if (NETNS_DIR / ns).exists():
            run(["ip", "netns", "delete", ns], check=False)
    return doomed
