"""The packet probes on the running kernel: crafted RoCEv2, PFC and malformed frames across a veth
between two namespaces, with exact counts read back from the maps.

Frames leave ns_a through its veth end (tc egress there) and arrive in ns_b (tc ingress there); the
probes sit on both hooks of both ends, so every frame is counted once per direction. The frames'
destination MAC is nobody's: ns_b's stack drops them before IP, and nothing answers. The probes are
compiled once for the module.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

pytest.importorskip("bcc")
scapy_l2 = pytest.importorskip("scapy.layers.l2")

from scapy.contrib.mac_control import MACControlClassBasedFlowControl, MACControlPause  # noqa: E402
from scapy.contrib.roce import AETH, BTH, CNPPadding  # noqa: E402
from scapy.layers.inet import IP, UDP, IPOption_NOP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import Dot1Q, Ether  # noqa: E402
from scapy.packet import Packet, Raw  # noqa: E402

from netd.model.bpf import BpfSample, FlowRecord  # noqa: E402
from netd.sources.bpf import BpfSettings  # noqa: E402
from netd.sources.bpf_bcc import BccBpfSource  # noqa: E402
from tests.bpf_netns import VethPair  # noqa: E402

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and BPF"),
    pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2"),
]

SRC_MAC, DST_MAC = "02:00:00:aa:00:01", "02:00:00:bb:00:02"  # DST_MAC: no interface has it
RETH = bytes(8) + b"\x00\x00\x12\x34" + (64).to_bytes(4, "big")
V6_A, V6_B = "fd00:bf::1", "fd00:bf::2"


@dataclass
class Sent:
    """What the test sent, and what each direction must therefore count."""

    valid: list[tuple[int, int, int, bool]] = field(default_factory=list)  # (dscp, ecn, length, vlan)
    frames: list[bytes] = field(default_factory=list)

    def add(self, pkt: Packet, dscp: int | None = None, ecn: int = 0, vlan: bool = False) -> None:
        raw = bytes(pkt)
        self.frames.append(raw)
        if dscp is not None:
            self.valid.append((dscp, ecn, len(raw), vlan))


def _v4(lab: VethPair, tos: int, reverse: bool = False, **ip: object) -> Packet:
    src, dst = (lab.ip_b, lab.ip_a) if reverse else (lab.ip_a, lab.ip_b)
    fields: dict[str, object] = {"flags": "DF", **ip}
    return Ether(src=SRC_MAC, dst=DST_MAC) / IP(src=src, dst=dst, tos=tos, **fields)


def _roce(l3: Packet, opcode: int, qp: int, psn: int, body: bytes = b"x" * 64, **bth: object) -> Packet:
    return l3 / UDP(sport=49152, dport=4791) / BTH(opcode=opcode, dqpn=qp, psn=psn, **bth) / Raw(body)


def traffic(lab: VethPair) -> Sent:
    s = Sent()
    for psn in range(100, 110):  # F1: RDMA WRITE ONLY, DSCP 26, ECT(0) then CE
        s.add(_roce(_v4(lab, 26 << 2 | 2), 0x0A, 0x11, psn, RETH + b"w" * 64), 26, 2)
    for psn in range(110, 115):
        s.add(_roce(_v4(lab, 26 << 2 | 3), 0x0A, 0x11, psn, RETH + b"w" * 64), 26, 3)
    for psn in (0, 1, 2, 5, 3):  # F2: SEND ONLY with a gap of two PSNs, then one going back
        s.add(_roce(_v4(lab, 26 << 2 | 2), 0x04, 0x22, psn), 26, 2)
    for _ in range(4):  # CNPs to QP 0x33 of host A (sent "by" B)
        cnp = (
            _v4(lab, 48 << 2 | 2, reverse=True) / UDP(dport=4791) / BTH(opcode=0x81, dqpn=0x33) / CNPPadding()
        )
        s.add(cnp, 48, 2)
    for syndrome in (0x1F, 0x1F, 0x1F, 0x60, 0x60, 0x21, 0x62):  # ACKs, NAK-seq, RNR NAK, remote access NAK
        ack = _v4(lab, 26 << 2 | 2, reverse=True) / UDP(dport=4791) / BTH(opcode=0x11, dqpn=0x44, psn=9)
        s.add(ack / AETH(syndrome=syndrome, msn=1), 26, 2)
    for psn in range(3):  # 802.1Q-tagged SEND ONLY, priority 3
        tagged = (
            Ether(src=SRC_MAC, dst=DST_MAC)
            / Dot1Q(vlan=100, prio=3)
            / IP(src=lab.ip_a, dst=lab.ip_b, tos=0x6A)
        )
        s.add(_roce(tagged, 0x04, 0x55, psn), 26, 2, vlan=True)
    for psn in range(2):  # IPv6, DSCP 46 with CE
        v6 = Ether(src=SRC_MAC, dst=DST_MAC) / IPv6(src=V6_A, dst=V6_B, tc=46 << 2 | 3)
        s.add(_roce(v6, 0x04, 0x66, psn), 46, 3)
    s.add(_roce(_v4(lab, 0x6A, options=[IPOption_NOP()] * 4), 0x04, 0x77, 0), 26, 2)  # IPv4 options
    # Not RoCE: other UDP ports (either way round), and MAC control frames
    for _ in range(5):
        s.add(_v4(lab, 0) / UDP(sport=4791, dport=53) / Raw(b"q" * 40))
    # Rejected UDP/4791, by reason
    whole = bytes(_roce(_v4(lab, 0x6A), 0x04, 0x88, 0))
    s.frames.append(whole[:-30])  # truncated: IP total length beyond the frame
    s.add(_v4(lab, 0x6A) / UDP(dport=4791) / Raw(b"\x04\x00\xff"))  # truncated: no room for a BTH
    s.add(_roce(_v4(lab, 0x6A, chksum=0x1234), 0x04, 0x88, 0))  # bad IPv4 header checksum
    s.add(_roce(_v4(lab, 0x6A, flags="MF"), 0x04, 0x88, 0))  # first fragment
    s.add(
        _v4(lab, 0x6A) / UDP(dport=4791, len=60) / BTH(opcode=0x04, dqpn=0x88) / Raw(b"y" * 64)
    )  # UDP length
    s.add(_roce(_v4(lab, 0x6A), 0x0A, 0x88, 0, b"z" * 8))  # WRITE ONLY without room for its RETH
    s.add(_roce(_v4(lab, 0x6A), 0x04, 0x88, 0, version=1))  # BTH transport version 1
    s.add(_roce(_v4(lab, 0x6A), 0x1A, 0x88, 0))  # an opcode RC does not define
    return s


PFC_DST = "01:80:c2:00:00:01"


def pfc_traffic() -> list[bytes]:
    eth = Ether(src=SRC_MAC, dst=PFC_DST)
    frames = [
        eth
        / MACControlClassBasedFlowControl(
            c3_enabled=1, c3_pause_time=0xFFFF, c5_enabled=1, c5_pause_time=0x1234
        )
    ] * 7
    frames += [eth / MACControlClassBasedFlowControl(c3_enabled=1, c3_pause_time=0)] * 2
    frames += [eth / MACControlPause(pause_time=0x100)] * 3 + [eth / MACControlPause(pause_time=0)]
    frames += [Ether(src=SRC_MAC, dst=PFC_DST, type=0x8808) / Raw(b"\x00\x02" + bytes(44))]  # other opcode
    out = [bytes(f) for f in frames]
    out.append(bytes(Ether(src=SRC_MAC, dst=PFC_DST, type=0x8808) / Raw(b"\x01\x01\x00")))  # malformed
    return out


@dataclass
class Run:
    lab: VethPair
    sent: Sent
    sample: BpfSample
    states: dict[str, str]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    lab = VethPair.create("nbk")
    source = None
    try:
        settings = BpfSettings(
            interfaces=(f"{lab.ns_a}/{lab.dev_a}", f"{lab.ns_b}/{lab.dev_b}"),
            tcp_retransmits=False,
            rdma_events=False,
            flow_scan_interval_s=3600,
            state_file=tmp_path_factory.mktemp("bpf") / "state.json",
        )
        source = BccBpfSource(settings)
        sent = traffic(lab)
        lab.send(sent.frames)
        lab.send(pfc_traffic())
        source.scan()
        yield Run(lab, sent, source.read(), {p: s.state for p, s in source.states.items()})
        source.close()
        source = None
        for ns, dev in ((lab.ns_a, lab.dev_a), (lab.ns_b, lab.dev_b)):
            for hook in ("ingress", "egress"):
                assert "netd_" not in lab.tc_filters(ns, dev, hook), f"a filter is left on {dev} {hook}"
            assert "clsact" not in lab.run(ns, "tc", "qdisc", "show", "dev", dev)
        assert not settings.state_file.exists()
    finally:
        if source is not None:
            source.close()
        lab.close()


def test_all_packet_probes_attach(run: Run) -> None:
    assert run.states == {
        "roce": "attached",
        "pfc": "attached",
        "tcp_retransmits": "disabled",
        "rdma_cm": "disabled",
    }
    detail = run.sample.probe("roce").detail  # type: ignore[union-attr]
    assert (
        f"egress {run.lab.ns_a}/{run.lab.dev_a}" in detail
        and f"ingress {run.lab.ns_b}/{run.lab.dev_b}" in detail
    )


@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_classes_count_exactly_the_valid_roce_frames(run: Run, direction: str) -> None:
    want_packets: Counter[tuple[int, int]] = Counter()
    want_bytes: Counter[tuple[int, int]] = Counter()
    for dscp, ecn, length, vlan in run.sent.valid:
        want_packets[(dscp, ecn)] += 1
        # on ingress the kernel has moved an 802.1Q tag out of the frame before tc runs
        want_bytes[(dscp, ecn)] += length - (4 if vlan and direction == "ingress" else 0)
    got = {(c.dscp, c.ecn): (c.packets, c.bytes) for c in run.sample.roce_classes if c.direction == direction}
    assert got == {k: (want_packets[k], want_bytes[k]) for k in want_packets}


@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_events_and_rejects(run: Run, direction: str) -> None:
    events = {e: v for (d, e), v in run.sample.roce_events.items() if d == direction and v}
    hashing = ("flow_new", "flow_writeback")  # depend on where the (random) addresses hash to
    assert {k: v for k, v in events.items() if k not in hashing} == {
        "cnp": 4,
        "ack": 3,
        "nak_seq": 2,
        "nak_rnr": 1,
        "nak_other": 1,
        "psn_gap": 1,
        "psn_missing": 2,
        "psn_rewind": 1,
        "rej_truncated": 2,
        "rej_ip": 1,
        "rej_fragment": 1,
        "rej_udp_length": 2,
        "rej_bth": 2,
    }


def _flow(run: Run, qp: int, direction: str) -> FlowRecord:
    (flow,) = [f for f in run.sample.flows if f.dest_qp == qp and f.direction == direction]
    return flow


@pytest.mark.parametrize("direction", ["egress", "ingress"])
def test_flow_records(run: Run, direction: str) -> None:
    lab = run.lab
    f1 = _flow(run, 0x11, direction)
    assert (f1.src, f1.dst) == (f"::ffff:{lab.ip_a}", f"::ffff:{lab.ip_b}")
    assert (f1.packets, f1.ce, f1.ect, f1.cnp, f1.naks, f1.psn_gaps, f1.psn_rewinds) == (
        15,
        5,
        10,
        0,
        0,
        0,
        0,
    )
    assert (
        f1.bytes == sum(len(fr) for fr in run.sent.frames[:15]) and f1.last_opcode == 0x0A and f1.dscp == 26
    )
    f2 = _flow(run, 0x22, direction)
    assert (f2.packets, f2.psn_gaps, f2.psn_missing, f2.psn_rewinds) == (5, 1, 2, 1)
    cnp = _flow(run, 0x33, direction)
    assert (cnp.src, cnp.cnp, cnp.packets, cnp.dscp) == (f"::ffff:{lab.ip_b}", 4, 4, 48)
    ack = _flow(run, 0x44, direction)
    assert (ack.packets, ack.acks, ack.naks, ack.nak_seq) == (7, 3, 4, 2)
    v6 = _flow(run, 0x66, direction)
    assert (v6.src, v6.dst, v6.packets, v6.ce) == (V6_A, V6_B, 2, 2)
    assert _flow(run, 0x55, direction).packets == 3 and _flow(run, 0x77, direction).packets == 1
    assert not [f for f in run.sample.flows if f.dest_qp == 0x88], "a rejected frame made a flow"
    assert f1.first_seen is not None and f1.last_seen is not None and f1.first_seen <= f1.last_seen
    assert abs(f1.last_seen - run.sample.flows_scanned_at) < 60  # type: ignore[operator]


def test_flow_table_fill(run: Run) -> None:
    maps = {m.map: m for m in run.sample.maps}
    events = Counter()
    for (_, event), value in run.sample.roce_events.items():
        events[event] += value
    assert len(run.sample.flows) == 14  # 7 flows per direction
    # a flow that lost its cache slot to another was written back to the LRU table, nothing evicted
    assert maps["netd_roce_flows"].entries == events["flow_new"] <= events["flow_writeback"]
    assert (
        maps["netd_roce_flows"].evictions == 0
        and maps["netd_flow_cache"].evictions == events["flow_writeback"]
    )
    assert maps["netd_flow_cache"].entries + events["flow_writeback"] >= 14


def test_pfc_and_pause_frames(run: Run) -> None:
    by_dev = {p.netdev: p for p in run.sample.pfc}
    assert list(by_dev) == [f"{run.lab.ns_b}/{run.lab.dev_b}"]  # only the receiving end saw them
    p = next(iter(by_dev.values()))
    assert (p.pfc_frames, p.pause_frames, p.pause_quanta, p.pause_resumes, p.other_opcode, p.malformed) == (
        9,
        4,
        3 * 0x100,
        1,
        1,
        1,
    )
    assert p.prio_frames == (0, 0, 0, 9, 0, 7, 0, 0)
    assert p.prio_quanta == (0, 0, 0, 7 * 0xFFFF, 0, 7 * 0x1234, 0, 0)
    assert p.prio_resumes == (0, 0, 0, 2, 0, 0, 0, 0)


def test_program_stats_and_no_stats_by_default(run: Run) -> None:
    names = {p.program for p in run.sample.programs}
    assert {"netd_roce_ingress", "netd_roce_egress", "netd_pfc_ingress"} <= names
    if not run.sample.run_stats:
        assert all(p.run_count is None for p in run.sample.programs)


def test_crash_leftovers_are_replaced_and_run_stats(tmp_path: Path) -> None:
    """A source that dies without detaching leaves its filters; the next one replaces them."""
    lab = VethPair.create("nbc")
    state = tmp_path / "state.json"
    # one cache slot per CPU: every change of flow writes the previous one back to the LRU table
    settings = BpfSettings(
        interfaces=(f"{lab.ns_b}/{lab.dev_b}",),
        directions=("ingress",),
        pfc=False,
        tcp_retransmits=False,
        rdma_events=False,
        state_file=state,
        run_stats=True,
        flow_cache_slots=1,
    )
    crashed = second = None
    try:
        crashed = BccBpfSource(settings)
        assert state.exists() and "netd_roce_ingress" in lab.tc_filters(lab.ns_b, lab.dev_b, "ingress")
        for bpf in crashed._objs.values():  # the process "dies": programs stay attached by tc
            bpf.cleanup()
        crashed._objs = {}
        second = BccBpfSource(settings)
        shown = lab.tc_filters(lab.ns_b, lab.dev_b, "ingress")
        assert shown.count("netd_roce_ingress") == 1, shown
        assert second.tc.replaced == [f"ingress on {lab.ns_b}/{lab.dev_b}: netd_roce_ingress"]
        x, y = (bytes(_roce(_v4(lab, 0x6A), 0x04, qp, 0)) for qp in (0x99, 0x9A))
        lab.send([x, x, x, y, y, x])
        second.scan()
        sample = second.read()
        assert [(c.direction, c.packets) for c in sample.roce_classes] == [("ingress", 6)]
        assert sorted((f.dest_qp, f.packets, f.psn_rewinds) for f in sample.flows) == [
            (0x99, 4, 3),
            (0x9A, 2, 1),
        ]  # x re-enters the cache and its PSN state (outside the cache) is kept: PSN 0 again, a rewind
        assert sample.roce_events[("ingress", "flow_writeback")] == 2
        assert sample.roce_events[("ingress", "flow_new")] == 2
        assert sample.run_stats
        (prog,) = [p for p in sample.programs if p.program == "netd_roce_ingress"]
        assert prog.run_count == 6 and prog.run_time_ns and prog.run_time_ns > 0
        second.close()
        second = None
        assert "netd_" not in lab.tc_filters(lab.ns_b, lab.dev_b, "ingress") and not state.exists()
    finally:
        for src in (crashed, second):
            if src is not None:
                src.close()
        lab.close()
