"""Representative frames for `netd bench bpf`, built with struct (the tests build theirs with scapy, an
independent implementation, and check these against it).

RoCEv2: Ethernet [802.1Q] / IPv4 or IPv6 / UDP 4791 / BTH [/ RETH | AETH] / payload / ICRC. The
ICRC is four zero bytes, since the probes do not verify it; the IPv4 header checksum is real (they do).
"""

from __future__ import annotations

import struct

__all__ = ["FRAMES", "PFC_FRAMES", "bth", "ipv4_frame"]

SRC_MAC, DST_MAC = bytes.fromhex("020000000001"), bytes.fromhex("020000000002")
ROCE_PORT = 4791


def _ipv4_checksum(header: bytes) -> int:
    total = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def bth(opcode: int, dest_qp: int, psn: int) -> bytes:
    return struct.pack("!BBHII", opcode, 0, 0xFFFF, dest_qp & 0xFFFFFF, psn & 0xFFFFFF)


def _udp(payload: bytes, dport: int = ROCE_PORT) -> bytes:
    return struct.pack("!HHHH", 49152, dport, 8 + len(payload), 0) + payload


def ipv4_frame(l4: bytes, tos: int = 0x02, proto: int = 17, vlan: int | None = None) -> bytes:
    header = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        tos,
        20 + len(l4),
        1,
        0x4000,
        64,
        proto,
        0,
        bytes([10, 0, 0, 1]),
        bytes([10, 0, 0, 2]),
    )
    header = header[:10] + struct.pack("!H", _ipv4_checksum(header)) + header[12:]
    return _ether(0x0800, vlan) + header + l4


def _ipv6_frame(l4: bytes, tclass: int = 0x02) -> bytes:
    first = (6 << 28) | (tclass << 20)
    header = struct.pack("!IHBB16s16s", first, len(l4), 17, 64, bytes(15) + b"\x01", bytes(15) + b"\x02")
    return _ether(0x86DD, None) + header + l4


def _ether(ethertype: int, vlan: int | None) -> bytes:
    tag = b"" if vlan is None else struct.pack("!HH", 0x8100, vlan)
    return DST_MAC + SRC_MAC + tag + struct.pack("!H", ethertype)


ICRC = b"\0\0\0\0"
RETH = struct.pack("!QII", 0x1000, 0x1234, 1024)
PAYLOAD = bytes(1024)

# name -> frame, for the RoCEv2 parser (the last ones are not RoCE: the parser's cost to pass them by)
FRAMES: dict[str, bytes] = {
    "rc_write_only_ect0": ipv4_frame(_udp(bth(0x0A, 0x11, 5) + RETH + PAYLOAD + ICRC), tos=0x02),
    "rc_write_only_ce": ipv4_frame(_udp(bth(0x0A, 0x11, 5) + RETH + PAYLOAD + ICRC), tos=0x03),
    "rc_send_only_vlan": ipv4_frame(_udp(bth(0x04, 0x12, 9) + PAYLOAD + ICRC), vlan=5),
    "rc_send_only_ipv6": _ipv6_frame(_udp(bth(0x04, 0x13, 9) + PAYLOAD + ICRC)),
    "cnp": ipv4_frame(_udp(bth(0x81, 0x14, 0) + bytes(16) + ICRC), tos=0x02),
    "rc_ack": ipv4_frame(_udp(bth(0x11, 0x15, 7) + struct.pack("!I", 0x1F << 24) + ICRC), tos=0x02),
    "rc_nak_psn_seq": ipv4_frame(_udp(bth(0x11, 0x15, 7) + struct.pack("!I", 0x60 << 24) + ICRC), tos=0x02),
    "udp_not_roce": ipv4_frame(_udp(PAYLOAD, dport=53), tos=0),
    "tcp": ipv4_frame(struct.pack("!HHIIBBHHH", 40000, 80, 1, 0, 0x50, 0x10, 512, 0, 0) + PAYLOAD, 0, 6),
}


def _mac_control(opcode: int, body: bytes) -> bytes:
    frame = bytes.fromhex("0180c2000001") + SRC_MAC + struct.pack("!HH", 0x8808, opcode) + body
    return frame.ljust(60, b"\0")


# name -> frame, for the PFC/pause counter
PFC_FRAMES: dict[str, bytes] = {
    "pfc_prio3": _mac_control(0x0101, struct.pack("!H8H", 0x08, 0, 0, 0, 0xFFFF, 0, 0, 0, 0)),
    "pause": _mac_control(0x0001, struct.pack("!H", 0xFFFF)),
    "udp_not_mac_control": FRAMES["udp_not_roce"],
}
