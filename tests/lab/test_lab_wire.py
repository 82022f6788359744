"""The lab's packets as a real NIC (and Wireshark) would judge them, from captures decoded independently
(netd.lab.wire): a 6-sender incast (two flows from the captured sender, which both start at line
rate) runs while the receiver's and one sender's interfaces are captured, and netd's eBPF RoCE probe
watches the receiver's veth. Against the host agent as it was before issue 19, the ICRC, BECN, CNP
interval and line-rate tests fail.

* every RoCEv2 frame carries a valid ICRC; every CNP has BECN set and goes to a QP of a flow the
  destination host really sends to the receiver;
* CNPs to one QP leave no closer than the notification point's interval;
* a sender never puts more on its link than its line rate allows beyond the shaper's small bucket,
  also at flow start (the burst that the old 5 ms credit allowed was ~66 KB);
* the probe's PSN gaps equal the gaps in the capture of the same interface (none on a lossless run).
"""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from netd.lab.capture import Capture, Captured
from netd.lab.layout import LabLayout
from netd.lab.manage import down, up
from netd.lab.params import lab_params
from netd.lab.runner import RunResult, run_scenario
from netd.lab.scenarios import incast
from netd.lab.state import LabState
from netd.lab.wire import OP_CNP, cnp_min_spacing_s, max_burst_over_rate_bytes, psn_gaps
from netd.model.bpf import BpfSample
from netd.sources.bpf import BpfSettings
from netd.sources.bpf_bcc import BccBpfSource
from netd.sources.bpf_tc import Interface, TcAttacher
from tests.lab.marks import LAB

pytestmark = [*LAB, pytest.mark.slow]

RECEIVER, SENDER = 0, 1
BUCKET_BYTES = 2500  # LINK_BUCKET_BYTES in netd/lab/csrc/lab_host.c


class Run:
    def __init__(
        self,
        state: LabState,
        result: RunResult,
        caps: dict[int, Captured],
        before: BpfSample,
        after: BpfSample,
        root: Path,
        source: BccBpfSource,
    ) -> None:
        self.state, self.result, self.caps, self.before, self.after = state, result, caps, before, after
        self.root, self.source = root, source

    def probe_gaps(self, direction: str) -> int:
        return _delta(self.before, self.after, (direction, "psn_gap"))


def _delta(before: BpfSample, after: BpfSample, key: tuple[str, str]) -> int:
    return after.roce_events.get(key, 0) - before.roce_events.get(key, 0)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    root = tmp_path_factory.mktemp("labwire")
    name = f"w{secrets.token_hex(3)}"
    source = None
    caps: dict[int, Capture] = {}
    try:
        state, _ = up(root, LabLayout(name))
        layout = state.layout
        source = BccBpfSource(
            BpfSettings(
                interfaces=(f"{layout.host_nodes[RECEIVER].netns}/eth0",),
                pfc=False,
                tcp_retransmits=False,
                rdma_events=False,
                flow_scan_interval_s=3600,
                state_file=root / "bpf.json",
            )
        )
        for h in (RECEIVER, SENDER):
            caps[h] = Capture(layout.host_nodes[h].netns, "eth0")
        before = source.read()
        result = run_scenario(
            root, name, incast(layout, senders=6, duration_s=3.0), lab_params(layout.link_mbps)
        )
        after = source.read()
        captured = {h: caps.pop(h).stop() for h in (RECEIVER, SENDER)}
        yield Run(state, result, captured, before, after, root, source)
    finally:
        for c in caps.values():  # after a failure only
            c.kill()
        if source is not None:
            source.close()
        down(root, name)


def test_captures_are_complete(run: Run) -> None:
    for host, cap in run.caps.items():
        assert cap.dropped == 0 and len(cap.frames) > 1000, host


def test_every_frame_has_a_valid_icrc(run: Run) -> None:
    for host, cap in run.caps.items():
        bad = [f for f in cap.frames if not f.icrc_ok]
        assert not bad, (host, len(bad), bad[:3])


def test_cnps_have_becn_and_go_to_the_senders_qps(run: Run) -> None:
    layout = run.state.layout
    qps = {(layout.host_address(f.src), qp) for f, qp in zip(run.result.flows, run.result.qpns, strict=True)}
    sent = [f for f in run.caps[RECEIVER].frames if f.outgoing and f.opcode == OP_CNP]
    received = [f for f in run.caps[SENDER].frames if not f.outgoing and f.opcode == OP_CNP]
    assert sent and received
    assert all(f.becn for f in sent + received)
    assert {(f.dst, f.dest_qp) for f in sent} <= qps


def test_cnps_respect_the_minimum_interval(run: Run) -> None:
    spacing = cnp_min_spacing_s([f for f in run.caps[RECEIVER].frames if f.outgoing])
    assert spacing is not None and spacing >= run.result.params.np_min_time_between_cnps / 1e6


def test_line_rate_holds_from_the_first_byte(run: Run) -> None:
    data = [(f.t, f.wire_bytes) for f in run.caps[SENDER].frames if f.outgoing and f.opcode != OP_CNP]
    biggest = max(size for _, size in data)
    # the bucket, the frame that spends it, and slack for the tap's timestamps, which lag each
    # departure by a varying delay (hundreds of microseconds on a loaded machine: a few frames)
    assert max_burst_over_rate_bytes(data, run.state.layout.link_mbps * 1e6) <= BUCKET_BYTES + 4 * biggest


def test_probe_psn_gaps_match_the_wire(run: Run) -> None:
    if not run.after.probe("roce").attached:  # type: ignore[union-attr]
        pytest.skip("netd's RoCE probe did not attach here")
    frames = run.caps[RECEIVER].frames
    assert run.probe_gaps("ingress") == psn_gaps([f for f in frames if not f.outgoing])
    assert run.probe_gaps("egress") == psn_gaps([f for f in frames if f.outgoing])
    assert run.probe_gaps("ingress") == 0  # PFC kept the run lossless


# Fault injection: a tc program on the receiver's ingress, before netd's probe (tc priority 100 <
# 0x4e44), drops each listed (source address, PSN) once; the retransmission after the NAK passes.
DROP_ONCE = r"""
#include <uapi/linux/bpf.h>
#include <uapi/linux/pkt_cls.h>
BPF_HASH(drops, u64, u8, 64);
int drop_once(struct __sk_buff *skb)
{
    u8 h[54]; /* Ethernet, IPv4 without options, UDP, BTH */
    if (bpf_skb_load_bytes(skb, 0, h, sizeof(h)) < 0 || h[12] != 0x08 || h[13] != 0 || h[14] != 0x45 ||
        h[23] != 17 || h[36] != 0x12 || h[37] != 0xb7)
        return TC_ACT_UNSPEC;
    u64 key = (u64)h[26] << 48 | (u64)h[27] << 40 | (u64)h[28] << 32 | (u64)h[29] << 24 | h[51] << 16 |
              h[52] << 8 | h[53];
    if (!drops.lookup(&key))
        return TC_ACT_UNSPEC;
    drops.delete(&key);
    return TC_ACT_SHOT;
}
"""
DROPPED_PSNS = (300, 1100, 1900)  # far apart: each go-back-N has ended before the next drop


def test_probe_counts_exactly_the_packets_the_lab_drops(run: Run) -> None:
    import ctypes

    from bcc import BPF

    if not run.after.probe("roce").attached:  # type: ignore[union-attr]
        pytest.skip("netd's RoCE probe did not attach here")
    layout = run.state.layout
    src = int.from_bytes(socket.inet_aton(layout.host_address(SENDER)), "big")
    dropper = BPF(text=DROP_ONCE.encode())
    attacher = TcAttacher(run.root / "dropper.json")
    try:
        for psn in DROPPED_PSNS:
            dropper[b"drops"][ctypes.c_uint64(src << 24 | psn)] = ctypes.c_uint8(1)
        fd = dropper.load_func(b"drop_once", BPF.SCHED_CLS).fd
        attacher.attach(Interface("eth0", layout.host_nodes[RECEIVER].netns), "ingress", fd, "drop_once", 100)
        before = run.source.read()
        run_scenario(
            run.root, run.state.name, incast(layout, senders=3, duration_s=2.0), lab_params(layout.link_mbps)
        )
        after = run.source.read()
        left = len(dropper[b"drops"])
    finally:
        attacher.detach_all()
        dropper.cleanup()
    assert left == 0, "a listed PSN was never sent"
    gaps, missing = (_delta(before, after, ("ingress", k)) for k in ("psn_gap", "psn_missing"))
    assert (gaps, missing) == (len(DROPPED_PSNS), len(DROPPED_PSNS))
    assert _delta(before, after, ("ingress", "psn_rewind")) >= len(DROPPED_PSNS)  # each go-back-N
