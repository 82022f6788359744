"""LLDP frames parsed with scapy (the listener itself runs against real frames in
tests/integration/test_lldp_netns.py)."""

from __future__ import annotations

from scapy.contrib import lldp as L
from scapy.layers.l2 import Ether

from netd.sources.lldp_frames import LldpFrameListener, parse_lldp_frame


def _mgmt(subtype: int, address: bytes) -> L.LLDPDUManagementAddress:
    return L.LLDPDUManagementAddress(
        management_address_subtype=subtype,
        management_address=address,
        interface_numbering_subtype=2,
        interface_number=2,
    )


def _frame(port_subtype: int = 5, with_name: bool = True) -> bytes:
    pkt = (
        Ether(dst="01:80:c2:00:00:0e", src="b8:59:9f:10:00:01", type=0x88CC)
        / L.LLDPDUChassisID(subtype=4, id=bytes.fromhex("b8599f100001"))
        / L.LLDPDUPortID(subtype=port_subtype, id=b"Ethernet24")
        / L.LLDPDUTimeToLive(ttl=120)
    )
    if with_name:
        pkt = pkt / L.LLDPDUSystemName(system_name=b"leaf-r0-p1")
    pkt = (
        pkt
        / L.LLDPDUPortDescription(description=b"gpu-017:ens1f0np0")
        / L.LLDPDUSystemDescription(description=b"SONiC")
        / _mgmt(1, bytes([10, 20, 0, 11]))
        / _mgmt(2, bytes.fromhex("fe80" + "0" * 27 + "1"))
        / L.LLDPDUEndOfLLDPDU()
    )
    return bytes(pkt)


def test_a_switch_frame_becomes_a_neighbour():
    n = parse_lldp_frame(_frame(), "ens1f0np0")
    assert n is not None
    assert (n.interface, n.switch, n.chassis_id, n.switch_port, n.port_id_type) == (
        "ens1f0np0",
        "leaf-r0-p1",
        "b8:59:9f:10:00:01",
        "Ethernet24",
        "ifname",
    )
    assert n.mgmt_addresses == ("10.20.0.11", "fe80::1") and n.mgmt_address == "10.20.0.11"
    assert (n.ttl_s, n.system_descr, n.port_descr, n.source) == (
        120,
        "SONiC",
        "gpu-017:ens1f0np0",
        "lldp-frames",
    )


def test_mac_port_ids_fall_back_to_the_description_and_names_to_the_chassis_id():
    n = parse_lldp_frame(_frame(port_subtype=3, with_name=False), "eth0")
    assert n is not None and n.port_id_type == "mac" and n.switch_port == "gpu-017:ens1f0np0"
    assert n.switch == "b8:59:9f:10:00:01"


def test_garbage_and_other_frames_are_ignored():
    assert parse_lldp_frame(b"", "eth0") is None
    assert parse_lldp_frame(b"\x00" * 60, "eth0") is None
    arp = bytes(Ether(dst="ff:ff:ff:ff:ff:ff", type=0x0806) / (b"\x00" * 28))
    assert parse_lldp_frame(arp, "eth0") is None


def test_neighbours_expire_with_their_ttl():
    now = [100.0]
    listener = LldpFrameListener(["eth0"], clock=lambda: now[0])
    n = parse_lldp_frame(_frame(), "eth0")
    assert n is not None
    listener._latest["eth0"] = (n, 100.0)  # what the receive thread records
    assert listener.neighbors() == (n,)
    now[0] = 221.0
    assert listener.neighbors() == ()
