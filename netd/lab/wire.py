"""What a captured frame says, decoded from the bytes alone: RoCEv2 headers, ICRC validity, and the
wire properties the lab promises (no PSN gaps when nothing was lost, CNPs spaced by the notification
point's interval, no burst above the line rate).

The ICRC check is written from the IBTA specification (vol. 1 section 7.8.1, the ICRC; annex A17,
RoCEv2, which fixes the pseudo-header), independently of the host agent's C (netd/lab/csrc/roce_icrc.h),
and is validated in tests on a CNP captured from a ConnectX-4 Lx NIC. RoCEv2 ICRC: CRC-32 (IEEE 802.3
polynomial, as ``zlib.crc32``) over 8 bytes of ones (for the LRH RoCE has not), the IP header and UDP
header with the fields routers may change replaced by ones (IPv4: TOS, TTL, header checksum; IPv6:
traffic class, flow label, hop limit; UDP checksum), the BTH with its byte 4 (FECN, BECN, reserved)
replaced by ones, and the rest of the packet up to the ICRC, which follows least significant byte first.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = [
    "OP_CNP",
    "RoceFrame",
    "cnp_min_spacing_s",
    "decode",
    "icrc_of",
    "max_burst_over_rate_bytes",
    "psn_gaps",
]

ROCE_PORT = 4791
OP_CNP = 0x81
_BECN = 0x40
_RESPONSES = range(0x0D, 0x13)  # RC read responses and acknowledgements: no request PSN sequence


@dataclass(frozen=True)
class RoceFrame:
    """One RoCEv2 frame as captured (``t``: capture time in seconds; ``outgoing``: sent by the host)."""

    t: float
    outgoing: bool
    src: str
    dst: str
    opcode: int
    becn: bool
    dest_qp: int
    psn: int
    ecn: int
    wire_bytes: int  # the frame as captured: Ethernet header included, FCS excluded
    icrc_ok: bool


def icrc_of(ip_and_rest: bytes, icrc_at: int) -> bytes:
    """The ICRC bytes a packet starting at its IP header must carry at offset ``icrc_at``."""
    p = bytearray(ip_and_rest[:icrc_at])
    if p[0] >> 4 == 4:
        ihl = (p[0] & 0x0F) * 4
        p[1] = 0xFF  # TOS: DSCP and ECN
        p[8] = 0xFF  # TTL
        p[10:12] = b"\xff\xff"  # header checksum
        udp = ihl
    else:
        p[0] |= 0x0F  # traffic class (its high nibble shares byte 0 with the version)
        p[1:4] = b"\xff\xff\xff"  # the rest of the traffic class, and the flow label
        p[7] = 0xFF  # hop limit
        udp = 40
    p[udp + 6 : udp + 8] = b"\xff\xff"  # UDP checksum
    p[udp + 8 + 4] = 0xFF  # BTH byte 4: FECN, BECN, reserved
    return struct.pack("<I", zlib.crc32(b"\xff" * 8 + bytes(p)))


def decode(frame: bytes, t: float = 0.0, outgoing: bool = False) -> RoceFrame | None:
    """The RoCEv2 frame (Ethernet, one optional 802.1Q tag, IPv4 or IPv6, UDP/4791, BTH), or None."""
    l3, ethertype = 14, frame[12:14]
    if ethertype in (b"\x81\x00", b"\x88\xa8"):
        l3, ethertype = 18, frame[16:18]
    if ethertype == b"\x08\x00" and len(frame) >= l3 + 20:
        ip_len = struct.unpack_from("!H", frame, l3 + 2)[0]
        l4, proto, tclass = l3 + (frame[l3] & 0x0F) * 4, frame[l3 + 9], frame[l3 + 1]
        src, dst = _v4(frame[l3 + 12 : l3 + 16]), _v4(frame[l3 + 16 : l3 + 20])
    elif ethertype == b"\x86\xdd" and len(frame) >= l3 + 40:
        ip_len = 40 + struct.unpack_from("!H", frame, l3 + 4)[0]
        l4, proto = l3 + 40, frame[l3 + 6]
        tclass = (struct.unpack_from("!I", frame, l3)[0] >> 20) & 0xFF
        src, dst = frame[l3 + 8 : l3 + 24].hex(), frame[l3 + 24 : l3 + 40].hex()
    else:
        return None
    end = l3 + ip_len
    if proto != 17 or end > len(frame) or end < l4 + 8 + 12 + 4:
        return None
    if struct.unpack_from("!H", frame, l4 + 2)[0] != ROCE_PORT:
        return None
    bth = l4 + 8
    return RoceFrame(
        t=t,
        outgoing=outgoing,
        src=src,
        dst=dst,
        opcode=frame[bth],
        becn=bool(frame[bth + 4] & _BECN),
        dest_qp=int.from_bytes(frame[bth + 5 : bth + 8], "big"),
        psn=int.from_bytes(frame[bth + 9 : bth + 12], "big"),
        ecn=tclass & 3,
        wire_bytes=len(frame),
        icrc_ok=icrc_of(frame[l3:end], end - l3 - 4) == frame[end - 4 : end],
    )


def _v4(b: bytes) -> str:
    return ".".join(str(x) for x in b)


def _requests(frames: Iterable[RoceFrame]) -> dict[tuple[str, str, int], list[int]]:
    flows: dict[tuple[str, str, int], list[int]] = {}
    for f in frames:
        if f.opcode < 0x20 and f.opcode not in _RESPONSES:  # RC requests
            flows.setdefault((f.src, f.dst, f.dest_qp), []).append(f.psn)
    return flows


def psn_gaps(frames: Iterable[RoceFrame]) -> int:
    """Requests whose PSN skipped ahead of the one after the previous request of their flow, in capture
    order: what a correct tracker at the capture point must report."""
    gaps = 0
    for psns in _requests(frames).values():
        for prev, psn in zip(psns, psns[1:], strict=False):
            delta = (psn - prev - 1) & 0xFFFFFF
            gaps += 1 if 0 < delta < 0x800000 else 0
    return gaps


def cnp_min_spacing_s(frames: Iterable[RoceFrame]) -> float | None:
    """The smallest time between two CNPs to the same QP from the same host (None: no two)."""
    last: dict[tuple[str, str, int], float] = {}
    best: float | None = None
    for f in frames:
        if f.opcode != OP_CNP:
            continue
        key = (f.src, f.dst, f.dest_qp)
        if key in last:
            gap = f.t - last[key]
            best = gap if best is None else min(best, gap)
        last[key] = f.t
    return best


def max_burst_over_rate_bytes(frames: Iterable[tuple[float, int]], rate_bps: float) -> float:
    """The most bytes a sequence of departures ``(time, frame bytes)`` ever put on the wire ahead of
    a link of ``rate_bps``: the backlog of a fluid queue drained at that rate, just before each frame
    is added (0 for a sender that never exceeds the rate, whatever its frame sizes)."""
    backlog, worst, prev = 0.0, 0.0, None
    for t, size in sorted(frames):
        if prev is not None:
            backlog = max(0.0, backlog - (t - prev) * rate_bps / 8)
            worst = max(worst, backlog)
        backlog += size
        prev = t
    return worst
