"""PSN tracking whatever CPU sees a packet: RoCEv2 requests sent by several processes at once, each
moving to another CPU before every packet, through a veth between two namespaces.

Each sender is a real process with a UDP socket in ns_a; before each packet it pins itself to the
next CPU, so every flow's packets cross the tc egress hook (and, NAPI delivering in order, the peer's
ingress hook) on every CPU in turn, while the other senders do the same. A probe that kept PSN state
per CPU reports a gap at nearly every migration; netd's keeps it in one map shared by all CPUs.

Lossless run: zero gaps and zero rewinds in both directions. Lossy run: a tc u32 filter placed after
netd's on the egress hook drops known PSNs of known QPs, so egress (which saw every packet) still
reports none, and ingress reports exactly the gaps and missing PSNs that were dropped.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("bcc")

from bcc import BPF

from netd.model.bpf import FlowRecord
from netd.sources.bpf import BpfSettings
from netd.sources.bpf_bcc import BccBpfSource
from netd.sources.bpf_tc import Interface, TcAttacher
from tests.bpf_netns import VethPair

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and BPF"),
    pytest.mark.skipif(not all(shutil.which(t) for t in ("ip", "tc", "ethtool")), reason="needs iproute2"),
]

PACKETS = 2000
QPS = (0x100, 0x101, 0x102, 0x103)
OP_WRITE_MIDDLE = 0x07  # RC RDMA WRITE middle: BTH, payload, ICRC


def send(dst: str, qp: int, count: int) -> None:
    """One RC requester: PSNs 0..count-1 of ``qp`` to ``dst``, on a different CPU before each packet
    (runs in its own process, inside the sending namespace)."""
    cpus = sorted(os.sched_getaffinity(0))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = bytes(64 + 4)  # payload and ICRC (not checked by the probe)
    for psn in range(count):
        os.sched_setaffinity(0, {cpus[psn % len(cpus)]})
        bth = bytes([OP_WRITE_MIDDLE, 0, 0xFF, 0xFF]) + qp.to_bytes(4, "big") + psn.to_bytes(4, "big")
        sock.sendto(bth + payload, (dst, 4791))
        if psn % 16 == 15:
            time.sleep(0.001)  # the veth's NAPI ring holds 256 frames: never overflow it


def _send_all(lab: VethPair) -> None:
    code = (
        "import sys; from tests.sources.test_bpf_psn_cpus import send; "
        "send(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [
        subprocess.Popen(
            ["ip", "netns", "exec", lab.ns_a, sys.executable, "-c", code, lab.ip_b, str(qp), str(PACKETS)],
            env=env,
        )
        for qp in QPS
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[VethPair, BccBpfSource]]:
    pair = VethPair.create("npc")
    source = None
    try:
        # NAPI mode (GRO on): the receiving end delivers in order whichever CPU sent, as the lab does
        pair.run(pair.ns_b, "ethtool", "-K", pair.dev_b, "gro", "on")
        source = BccBpfSource(
            BpfSettings(
                interfaces=(f"{pair.ns_a}/{pair.dev_a}", f"{pair.ns_b}/{pair.dev_b}"),
                pfc=False,
                tcp_retransmits=False,
                rdma_events=False,
                flow_scan_interval_s=3600,
                state_file=tmp_path / "state.json",
            )
        )
        yield pair, source
    finally:
        if source is not None:
            source.close()
        pair.close()


def _flows(source: BccBpfSource, direction: str) -> dict[int, FlowRecord]:
    source.scan()
    return {f.dest_qp: f for f in source.read().flows if f.direction == direction and f.dest_qp in QPS}


def _drops(lab: VethPair) -> int:
    stats = lab.run(lab.ns_a, "cat", f"/sys/class/net/{lab.dev_a}/statistics/tx_dropped")
    return int(stats)


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_no_false_gaps_when_every_packet_changes_cpu(lab: tuple[VethPair, BccBpfSource]) -> None:
    pair, source = lab
    _send_all(pair)
    assert _drops(pair) == 0, "the veth dropped frames: the run was not lossless"
    for direction in ("egress", "ingress"):
        got = {
            qp: (f.packets, f.psn_gaps, f.psn_missing, f.psn_rewinds)
            for qp, f in _flows(source, direction).items()
        }
        assert got == {qp: (PACKETS, 0, 0, 0) for qp in QPS}, direction
    events = source.read().roce_events
    assert not any(events.get((d, e)) for d in ("egress", "ingress") for e in ("psn_gap", "psn_rewind"))


# QP -> PSNs the wire drops; consecutive PSNs are one gap (the last PSN would be no gap: nothing follows)
DROPS = {0x101: (500, 1000, 1001, 1998), 0x103: (1, 2, 3, 4, 5, 1500)}


def _gaps(psns: tuple[int, ...]) -> int:
    return sum(1 for i, p in enumerate(psns) if i == 0 or psns[i - 1] != p - 1)


# The wire's loss: a tc program after netd's on the sender's egress drops these (QP, PSN) pairs.
DROPPER = r"""
#include <uapi/linux/bpf.h>
#include <uapi/linux/pkt_cls.h>
BPF_HASH(drops, u64, u8, 64);
int drop_known(struct __sk_buff *skb)
{
    u8 h[54]; /* Ethernet, IPv4 without options, UDP, BTH */
    if (bpf_skb_load_bytes(skb, 0, h, sizeof(h)) < 0 || h[12] != 0x08 || h[13] != 0 || h[14] != 0x45 ||
        h[23] != 17 || h[36] != 0x12 || h[37] != 0xb7)
        return TC_ACT_UNSPEC;
    u64 key = (u64)h[47] << 40 | (u64)h[48] << 32 | (u64)h[49] << 24 | h[51] << 16 | h[52] << 8 | h[53];
    return drops.lookup(&key) ? TC_ACT_SHOT : TC_ACT_UNSPEC;
}
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_exact_gaps_when_known_packets_are_dropped(
    lab: tuple[VethPair, BccBpfSource], tmp_path: Path
) -> None:
    pair, source = lab
    dropper = BPF(text=DROPPER.encode())
    attacher = TcAttacher(tmp_path / "dropper.json")
    try:
        for qp, psns in DROPS.items():
            for psn in psns:
                dropper[b"drops"][ctypes.c_uint64(qp << 24 | psn)] = ctypes.c_uint8(1)
        fd = dropper.load_func(b"drop_known", BPF.SCHED_CLS).fd
        # prio 30000 runs after netd's filter (0x4e44), which passes every packet on
        attacher.attach(Interface(pair.dev_a, pair.ns_a), "egress", fd, "drop_known", 30000)
        _send_all(pair)
    finally:
        attacher.detach_all()
        dropper.cleanup()
    assert _drops(pair) == 0, "the veth itself dropped frames"
    egress, ingress = _flows(source, "egress"), _flows(source, "ingress")
    assert {qp: (f.packets, f.psn_gaps, f.psn_rewinds) for qp, f in egress.items()} == {
        qp: (PACKETS, 0, 0) for qp in QPS
    }
    want = {
        qp: (PACKETS - len(DROPS.get(qp, ())), _gaps(DROPS.get(qp, ())), len(DROPS.get(qp, ())), 0)
        for qp in QPS
    }
    got = {qp: (f.packets, f.psn_gaps, f.psn_missing, f.psn_rewinds) for qp, f in ingress.items()}
    assert got == want
