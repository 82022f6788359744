"""netd.lab.wire against real packets and an independent implementation: a CNP captured from a
ConnectX-4 Lx NIC, scapy's RoCE layer (its own ICRC code), and the host agent's C (roce_icrc.h)."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from netd.lab.agent_build import CSRC
from netd.lab.wire import (
    OP_CNP,
    cnp_min_spacing_s,
    decode,
    icrc_of,
    max_burst_over_rate_bytes,
    psn_gaps,
)

# A CNP captured on a ConnectX-4 Lx (published with scapy's RoCE tests, test/contrib/roce.uts): BTH
# byte 4 is 0x40 (BECN), DestQP 0x000118, UDP checksum 0, ICRC 82 fd 00 2a.
CONNECTX_CNP = bytes.fromhex(
    "e41d2dab2bc27cfe90643b32080045c2003c718c400040119161 0a0011010a001201"
    "000012b700280000 8100ffff40000118 00000000 00000000000000000000000000000000 82fd002a".replace(" ", "")
)


def test_a_real_connectx_cnp_is_valid_and_has_becn() -> None:
    f = decode(CONNECTX_CNP)
    assert f is not None
    assert (f.opcode, f.becn, f.dest_qp, f.psn, f.src, f.dst) == (
        OP_CNP,
        True,
        0x118,
        0,
        "10.0.17.1",
        "10.0.18.1",
    )
    assert f.icrc_ok and f.ecn == 2 and f.wire_bytes == 74


@pytest.mark.parametrize(
    ("offset", "value"),
    [(15, 0x03), (22, 0x01), (24, 0x12), (25, 0x34), (40, 0xAB), (41, 0xCD), (46, 0x80)],
    ids=["ecn-ce", "ttl", "ip-checksum-hi", "ip-checksum-lo", "udp-checksum-hi", "udp-checksum-lo", "fecn"],
)
def test_fields_routers_change_are_masked(offset: int, value: int) -> None:
    frame = bytearray(CONNECTX_CNP)
    frame[offset] = value
    assert decode(bytes(frame)).icrc_ok  # type: ignore[union-attr]


@pytest.mark.parametrize("offset", [16, 18, 26, 30, 34, 36, 38, 42, 47, 49, 51, 60, 69])
def test_any_other_byte_breaks_the_icrc(offset: int) -> None:
    frame = bytearray(CONNECTX_CNP)
    frame[offset] ^= 0x01
    f = decode(bytes(frame))
    assert f is None or not f.icrc_ok  # (a changed port or length may also make it no RoCE at all)


@pytest.mark.slow
def test_agrees_with_scapys_independent_icrc() -> None:
    roce = pytest.importorskip("scapy.contrib.roce")
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    rng = random.Random(19)
    for i in range(60):
        l3 = (
            IP(
                src="10.77.1.2",
                dst="10.77.0.2",
                tos=rng.randrange(256),
                ttl=rng.randrange(1, 256),
                id=i,
                flags="DF",
            )
            if i % 2
            else IPv6(src="fd00::1", dst="fd00::2", tc=rng.randrange(256), fl=rng.randrange(1 << 20))
        )
        pkt = (
            Ether(src="02:00:00:00:00:01", dst="02:00:00:00:00:02")  # (no ARP lookup)
            / l3
            / UDP(sport=rng.randrange(1024, 65536), dport=4791)
            / roce.BTH(opcode=rng.choice([0x06, 0x07, 0x08, 0x11, 0x81]), dqpn=rng.randrange(1 << 24), psn=i)
            / Raw(bytes(rng.randrange(256) for _ in range(rng.randrange(4, 300))))
        )
        f = decode(bytes(pkt))
        assert f is not None and f.icrc_ok, pkt.summary()


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_the_host_agents_c_icrc_matches(tmp_path: Path) -> None:
    """roce_icrc.h (what the agent puts on the wire) against the Python, on random headers."""
    src = tmp_path / "icrc.c"
    src.write_text(
        '#include <stdio.h>\n#include "roce_icrc.h"\n'
        "int main(void) {\n  icrc_init();\n  unsigned char ip[20], udp[8], tp[2048], out[4];\n  size_t n;\n"
        "  while (fread(ip, 1, 20, stdin) == 20 && fread(udp, 1, 8, stdin) == 8 &&\n"
        "         fread(&n, sizeof(n), 1, stdin) == 1 && fread(tp, 1, n, stdin) == n) {\n"
        "    roce_icrc_v4(ip, udp, tp, n, out);\n    fwrite(out, 1, 4, stdout);\n  }\n  return 0;\n}\n"
    )
    exe = tmp_path / "icrc"
    subprocess.run(["gcc", "-O2", "-Wall", "-I", str(CSRC), "-o", str(exe), str(src)], check=True)
    rng = random.Random(4791)
    cases, feed = [], b""
    for _ in range(100):
        n = rng.randrange(12, 2048)
        tp = bytes(rng.randrange(256) for _ in range(n))
        ip = bytes([0x45]) + bytes(rng.randrange(256) for _ in range(19))
        udp = bytes(rng.randrange(256) for _ in range(8))
        cases.append((ip + udp + tp, 28 + n))
        feed += ip + udp + n.to_bytes(8, "little") + tp
    out = subprocess.run([str(exe)], input=feed, capture_output=True, check=True).stdout
    assert [out[i * 4 : i * 4 + 4] for i in range(len(cases))] == [icrc_of(p, at) for p, at in cases]


def _frame(t: float, psn: int, opcode: int = 0x07, qp: int = 5, size: int = 100) -> object:
    base = decode(CONNECTX_CNP)
    assert base is not None
    return base.__class__(t, True, "a", "b", opcode, False, qp, psn, 0, size, True)


def test_psn_gaps_count_skips_of_requests_per_flow() -> None:
    frames = [_frame(0, p) for p in (0, 1, 2, 5, 6, 3, 4, 5, 9)]  # gaps at 5 and 9; 3 is a rewind
    frames += [_frame(0, p, qp=6) for p in (10, 11, 12)]  # another flow, in order
    frames += [_frame(0, p, opcode=0x11) for p in (0, 7)]  # ACKs carry no request sequence
    assert psn_gaps(frames) == 2  # type: ignore[arg-type]
    assert psn_gaps([_frame(0, 0xFFFFFF), _frame(0, 0)]) == 0  # type: ignore[list-item]  # PSNs wrap


def test_cnp_spacing_is_per_qp() -> None:
    cnps = [_frame(t, 0, OP_CNP, qp) for t, qp in ((0.0, 1), (0.001, 2), (0.004, 1), (0.0065, 2), (0.009, 1))]
    assert cnp_min_spacing_s(cnps) == pytest.approx(0.004)  # type: ignore[arg-type]
    assert cnp_min_spacing_s([_frame(0.0, 0, OP_CNP)]) is None  # type: ignore[list-item]


def test_burst_over_rate() -> None:
    # 1000-byte frames at 8 Mb/s take 1 ms each: paced exactly, there is never a backlog
    assert max_burst_over_rate_bytes([(i * 0.001, 1000) for i in range(10)], 8e6) == 0
    # five back to back, then paced: 4000 bytes ahead of the link just before the fifth
    burst = [(0.0, 1000)] * 5 + [(0.001 * i, 1000) for i in range(5, 10)]
    assert max_burst_over_rate_bytes(burst, 8e6) == pytest.approx(4000)
