"""LLDP frames parsed with scapy (the listener itself runs against real frames in
tests/integration/test_lldp_netns.py)."""

from __future__ import annotations

import pytest
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


def _frame(port_subtype: int = 5, with_name: bool = True, name: bytes = b"leaf-r0-p1") -> bytes:
    pkt = (
        Ether(dst="01:80:c2:00:00:0e", src="b8:59:9f:10:00:01", type=0x88CC)
        / L.LLDPDUChassisID(subtype=4, id=bytes.fromhex("b8599f100001"))
        / L.LLDPDUPortID(subtype=port_subtype, id=b"Ethernet24")
        / L.LLDPDUTimeToLive(ttl=120)
    )
    if with_name:
        pkt = pkt / L.LLDPDUSystemName(system_name=name)
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


def _with_tlvs(*tlvs: str) -> bytes:
    """A switch frame laid out byte by byte (IEEE 802.1AB: type in 7 bits, length in 9), with ``tlvs``
    (hex) between the mandatory TLVs and End of LLDPDU."""
    header = "0180c200000e" + "b8599f100001" + "88cc"
    chassis = "0207" + "04" + "b8599f100001"  # type 1, length 7: subtype 4 (MAC address)
    port = "040b" + "05" + b"Ethernet24".hex()  # type 2, length 11: subtype 5 (interface name)
    ttl = "0602" + "0078"  # type 3, length 2: 120 s
    return bytes.fromhex(header + chassis + port + ttl + "".join(tlvs) + "0000")


# type 127 (organizationally specific) + length 6: 0xfe06; then the OUI, the subtype and the value.
PVID_8021 = "fe060080c2010064"  # IEEE 802.1 (00-80-C2) subtype 1, Port VLAN ID 100: not a frame size
MFS_8023 = "fe0600120f042400"  # IEEE 802.3 (00-12-0F) subtype 4, Maximum Frame Size 0x2400 = 9216


def test_the_8023_maximum_frame_size_tlv_is_read():
    n = parse_lldp_frame(_with_tlvs(PVID_8021, MFS_8023), "ens1f0np0")
    assert n is not None and n.max_frame_size == 9216 and n.switch_port == "Ethernet24"


def test_no_maximum_frame_size_tlv_is_none_not_zero():
    n = parse_lldp_frame(_with_tlvs(PVID_8021), "ens1f0np0")
    assert n is not None and n.max_frame_size is None
    plain = parse_lldp_frame(_frame(), "ens1f0np0")
    assert plain is not None and plain.max_frame_size is None


# What a terminal would do with them: clear the screen, retitle the window, ring, return to the line's
# start (and overwrite it), reverse the text that follows.
HOSTILE = [
    (b"leaf\x1b[2J\x1b[H", "leaf\\x1b[2J\\x1b[H"),
    (b"leaf\x1b]0;owned\x07", "leaf\\x1b]0;owned\\x07"),
    (b"leaf-r0-p1\rgood-switch", "leaf-r0-p1\\x0dgood-switch"),
    ("leaf\u202e1p-0r".encode(), "leaf\\u202e1p-0r"),
    ("leaf-\u4ea4\u6362\u673a".encode(), "leaf-\u4ea4\u6362\u673a"),  # printable non-ASCII stays
]


@pytest.mark.parametrize(("sent", "named"), HOSTILE)
def test_control_characters_in_a_switch_name_are_escaped(sent: bytes, named: str) -> None:
    # Anything on the link can send LLDP: its System Name reaches netd status, the anomaly tables and
    # every label. The same bytes must give the same name on every host (one ToR stays one ToR).
    n = parse_lldp_frame(_frame(name=sent), "ens1f0np0")
    assert n is not None and n.switch == named and named.isprintable()
    again = parse_lldp_frame(_frame(name=sent), "ens1f1np1")
    assert again is not None and again.switch == n.switch
