"""``mtu_mismatch``: a port whose MTU makes frames its LLDP neighbour's port will not accept.

The neighbour says what it accepts in the IEEE 802.3 Maximum Frame Size TLV (802.3 clause 79.3.4),
a frame counted from the destination address through the FCS. The host's MTU counts the payload
only, so the largest frame it sends is::

    MTU + 14 (destination, source, EtherType) + 4 (FCS)            = MTU + 18   untagged
    MTU + 14 + 4 (802.1Q tag) + 4                                  = MTU + 22   tagged

The tag is counted when the port trusts PCP: the priority then rides in the 802.1Q tag, so every RoCE
frame carries one. Under DSCP trust RoCE frames go untagged (a VLAN netdev on top would add the tag;
its MTU is checked through its own RDMA port, if it has one).

What it costs RoCE: the RDMA core gives a RoCE port the largest IB MTU (4096, 2048, 1024, 512, 256)
that fits in the netdev MTU less 96 bytes of headers (``iboe_get_mtu``, include/rdma/ib_addr.h: GRH
40 + UDP 8 + BTH 12 + XRC 4 + AtomicETH 28 + ICRC 4), so a RoCE MTU of 4096 needs an MTU of at least
4192, hence frames of 4210 bytes untagged or 4214 tagged through every switch port on the path. A
switch drops a frame longer than it accepts; RDMA sees it as loss (retransmits, then a stalled QP).

A neighbour that does not send the TLV (lldpd on Linux never does) says nothing: no finding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from netd.model.config_finding import ConfigFinding
from netd.model.topology import LldpNeighbor
from netd.sources.qos import PortQos

__all__ = ["ROCE_HEADERS", "frame_overhead", "mtu_mismatches", "roce_mtu"]

ETHERNET_HEADER = 14  # destination, source, EtherType
FCS = 4
VLAN_TAG = 4
ROCE_HEADERS = 40 + 8 + 12 + 4 + 28 + 4  # what iboe_get_mtu takes off the netdev MTU
IB_MTUS = (4096, 2048, 1024, 512, 256)


def frame_overhead(p: PortQos) -> int:
    """Bytes a frame adds to the MTU on this port: 18, or 22 when the priority rides in a VLAN tag."""
    return ETHERNET_HEADER + FCS + (VLAN_TAG if p.trust == "pcp" else 0)


def roce_mtu(mtu: int) -> int:
    """The RoCE (IB) MTU the RDMA core derives from a netdev MTU (0 when not even 256 fits)."""
    return next((ib for ib in IB_MTUS if mtu - ROCE_HEADERS >= ib), 0)


def _finding(p: PortQos, n: LldpNeighbor, mtu: int, mfs: int) -> ConfigFinding:
    overhead = frame_overhead(p)
    fits = mfs - overhead
    where = f"{n.switch or 'the neighbour'} port {n.switch_port or '?'}"
    heard = "" if n.interface == p.netdev else f" (heard on {n.interface})"
    return ConfigFinding(
        "mtu_mismatch",
        p.device,
        p.port,
        p.netdev,
        None,
        f"{p.netdev}: MTU {mtu} sends frames of up to {mtu + overhead} bytes (MTU + {overhead}) but {where}"
        f"{heard} accepts at most {mfs} (LLDP Maximum Frame Size); the switch drops the larger RoCE packets "
        f"(RoCE MTU {roce_mtu(mtu)} at this MTU, {roce_mtu(fits)} at the {fits} that fits)",
        f"ip link set dev {p.netdev} mtu {fits}   # or raise the MTU of {where} to carry "
        f"{mtu + overhead}-byte frames",
        subject=n.interface,
    )


def mtu_mismatches(
    ports: Sequence[PortQos], neighbors: Mapping[str, Sequence[LldpNeighbor]]
) -> Iterable[ConfigFinding]:
    """One finding per port and neighbour whose Maximum Frame Size is below the port's largest frame.

    ``neighbors``: netdev -> what LLDP heard on it (on a bond: on its members)."""
    for p in ports:
        if p.mtu is None or p.netdev is None:
            continue
        for n in neighbors.get(p.netdev, ()):
            if n.max_frame_size is not None and p.mtu + frame_overhead(p) > n.max_frame_size:
                yield _finding(p, n, p.mtu, n.max_frame_size)
