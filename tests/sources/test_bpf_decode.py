"""Decoding the probes' maps from raw bytes (per-CPU sums, the two-level flow table), the tick clock,
and the attach-point planning, all without a kernel."""

from __future__ import annotations

import ctypes
import ipaddress
import struct
from dataclasses import replace
from pathlib import Path

import pytest

from netd.sources.bpf_clock import JiffiesClock, read_timer_list
from netd.sources.bpf_layout import ROCE_EVENTS, ClassVal, FlowKey, FlowSlot, FlowVal, PfcVal, TcpKey, TcpVal
from netd.sources.bpf_maps import (
    decode_classes,
    decode_events,
    decode_flows,
    decode_pfc,
    decode_tcp,
    gid_text,
)
from netd.sources.bpf_probes import Environment, plan_rdma, plan_tcp

NCPU = 2


def raw(*items: ctypes.Structure | int) -> bytes:
    return b"".join(struct.pack("<Q", x) if isinstance(x, int) else bytes(x) for x in items)


def test_classes_sum_cpus_and_skip_empty_slots() -> None:
    values = [ClassVal() for _ in range(512 * NCPU)]
    slot = (1 << 8) | (26 << 2) | 3  # egress, DSCP 26, CE
    values[slot * NCPU] = ClassVal(3, 300)
    values[slot * NCPU + 1] = ClassVal(2, 200)
    values[(46 << 2) * NCPU + 1] = ClassVal(1, 64)  # ingress, DSCP 46, Not-ECT, on CPU 1
    got = decode_classes(raw(*values), NCPU)
    assert [(c.direction, c.dscp, c.ecn, c.packets, c.bytes) for c in got] == [
        ("ingress", 46, 0, 1, 64),
        ("egress", 26, 3, 5, 500),
    ]


def test_events_per_direction() -> None:
    n = len(ROCE_EVENTS)
    values = [0] * (2 * n * NCPU)
    values[ROCE_EVENTS.index("cnp") * NCPU] = 4
    values[(n + ROCE_EVENTS.index("rej_bth")) * NCPU + 1] = 2
    got = decode_events(raw(*values), NCPU, ROCE_EVENTS, per_direction=True)
    assert got[("ingress", "cnp")] == 4 and got[("egress", "rej_bth")] == 2 and len(got) == 2 * n


def _key(src: str, dst: str, qp: int, d: int) -> FlowKey:
    k = FlowKey(dest_qp=qp, dir=d, used=1)
    k.src[:] = list(ipaddress.IPv6Address(src).packed)
    k.dst[:] = list(ipaddress.IPv6Address(dst).packed)
    return k


def test_flows_add_cache_slots_on_every_cpu_to_the_lru_record() -> None:
    a, b = "::ffff:10.0.0.1", "::ffff:10.0.0.2"
    f1, f2 = _key(a, b, 0x11, 0), _key(b, a, 0x22, 1)
    slots = [FlowSlot() for _ in range(4 * NCPU)]  # 4 slots, 2 CPUs
    slots[0] = FlowSlot(
        f1, FlowVal(packets=3, bytes=300, ce=1, first_jiffies=110, last_jiffies=150, dscp=26, opcode=4)
    )
    slots[1] = FlowSlot(
        f1, FlowVal(packets=2, bytes=200, psn_gaps=1, first_jiffies=120, last_jiffies=170, dscp=24, opcode=10)
    )
    slots[5] = FlowSlot(
        f2, FlowVal(packets=1, bytes=64, cnp=1, first_jiffies=200, last_jiffies=200, opcode=0x81)
    )
    hash_keys = raw(f1)
    hash_vals = raw(
        FlowVal(packets=10, bytes=1000, ce=4, naks=2, first_jiffies=100, last_jiffies=140, dscp=26)
    )
    flows = decode_flows(raw(*slots), NCPU, hash_keys, hash_vals, lambda j: j / 10)
    by_qp = {f.dest_qp: f for f in flows}
    one = by_qp[0x11]
    assert (one.src, one.dst, one.direction) == ("::ffff:10.0.0.1", "::ffff:10.0.0.2", "ingress")
    assert (one.packets, one.bytes, one.ce, one.naks, one.psn_gaps) == (15, 1500, 5, 2, 1)
    assert (one.first_seen, one.last_seen, one.dscp, one.last_opcode) == (10.0, 17.0, 24, 10)  # newest entry
    two = by_qp[0x22]
    assert (two.direction, two.cnp, two.packets, two.last_opcode) == ("egress", 1, 1, 0x81)
    assert decode_flows(b"", NCPU, b"", b"", lambda j: None) == ()


def test_gid_text() -> None:
    assert gid_text(ipaddress.IPv6Address("::ffff:10.1.2.3").packed) == "::ffff:10.1.2.3"
    assert gid_text(ipaddress.IPv6Address("fd00::7").packed) == "fd00::7"


def test_pfc_slots() -> None:
    slots = [PfcVal() for _ in range(4 * NCPU)]
    slots[2 * NCPU] = PfcVal(ifindex=6, pfc_frames=3, pause_frames=1, pause_quanta=256)
    slots[2 * NCPU].prio_frames[3] = 3
    slots[2 * NCPU + 1] = PfcVal(ifindex=6, pfc_frames=1)
    slots[2 * NCPU + 1].prio_frames[3] = 1
    slots[2 * NCPU + 1].prio_xon[3] = 1
    (p,) = decode_pfc(raw(*slots), NCPU, {6: "lab/eth0"})
    assert (p.netdev, p.pfc_frames, p.pause_frames, p.pause_quanta) == ("lab/eth0", 4, 1, 256)
    assert p.prio_frames[3] == 4 and p.prio_resumes[3] == 1 and sum(p.prio_frames) == 4


def test_tcp_endpoints_sorted_by_retransmits() -> None:
    k1, k2 = TcpKey(dport=5000, family=2), TcpKey(dport=443, family=10)
    k1.daddr[:] = list(ipaddress.IPv6Address("::ffff:10.0.0.9").packed)
    k2.daddr[:] = list(ipaddress.IPv6Address("fd00::9").packed)
    vals = raw(
        TcpVal(retransmits=2, first_jiffies=5, last_jiffies=9, state=1), TcpVal(retransmits=7, state=4)
    )
    got = decode_tcp(raw(k1, k2), vals, lambda j: None if j == 0 else float(j))
    assert [(e.address, e.port, e.family, e.retransmits, e.state) for e in got] == [
        ("fd00::9", 443, "ipv6", 7, "FIN_WAIT1"),
        ("10.0.0.9", 5000, "ipv4", 2, "ESTABLISHED"),
    ]
    assert (got[1].first_seen, got[1].last_seen, got[0].first_seen) == (5.0, 9.0, None)


def test_timer_list_parsing(tmp_path: Path) -> None:
    f = tmp_path / "timer_list"
    f.write_text(
        "Timer List Version: v0.10\nnow at 5000000000 nsecs\n\n" + "x\n" * 2000 + "jiffies: 4295000000\n"
    )
    assert read_timer_list(f) == (5_000_000_000, 4_295_000_000)
    (tmp_path / "empty").write_text("nothing here\n")
    assert read_timer_list(tmp_path / "empty") is None and read_timer_list(tmp_path / "missing") is None


def test_jiffies_clock_converts_and_measures_hz() -> None:
    samples = iter([(1_000_000_000, 1000), (1_200_000_000, 1050), (2_000_000_000, 1250)])
    clock = JiffiesClock(sample=lambda: next(samples), hz=None, sleep=lambda s: None)
    assert clock.available and clock.hz == 250  # 50 ticks in 0.2 s, rounded to a rate Linux offers
    to_wall = clock.converter()  # anchored at (2.0 s, 1250)
    assert to_wall(0) is None
    assert to_wall(1250) - to_wall(1000) == pytest.approx(1.0)  # type: ignore[operator]
    assert JiffiesClock(sample=lambda: None, hz=250).converter()(5) is None


class StubBtf:
    def __init__(self, funcs: set[str] = frozenset(), tp_args: int | None = 3, sock: bool = True) -> None:
        self.funcs, self.tp_args, self.sock = funcs, tp_args, sock

    def has_func(self, name: str) -> bool:
        return name in self.funcs

    def tracepoint_args(self, name: str) -> int | None:
        return self.tp_args

    def member_offset(self, struct_name: str, member: str) -> int | None:
        if not self.sock:
            return None
        offsets = {"__sk_common": 0, "skc_family": 16, "skc_state": 18, "skc_dport": 12, "skc_daddr": 0}
        return offsets.get(member)


def _env(tmp_path: Path | None, btf: StubBtf | None, kfunc: bool = True) -> Environment:
    return Environment(True, "root", True, "", True, "", btf, tmp_path, kfunc)  # type: ignore[arg-type]


def _tracefs(tmp_path: Path, fields: str) -> Path:
    d = tmp_path / "events" / "tcp" / "tcp_retransmit_skb"
    d.mkdir(parents=True)
    (d / "format").write_text(f"name: tcp_retransmit_skb\nformat:\n{fields}\n")
    return tmp_path


def test_tcp_plan_prefers_the_tracepoint_then_raw_then_fexit(tmp_path: Path) -> None:
    env = _env(
        _tracefs(tmp_path, "\tfield:int err;\toffset:76;\tsize:4;\tsigned:1;"),
        StubBtf({"__tcp_retransmit_skb"}),
    )
    plans = plan_tcp(env)
    assert [p.mode for p in plans.candidates] == ["tracepoint", "raw_tracepoint", "fexit"]
    assert "-DNETD_TCP_TP_HAS_ERR=1" in plans.candidates[0].cflags
    raw_flags = plans.candidates[1].cflags
    assert "-DNETD_SKC_FAMILY=16" in raw_flags and "-DNETD_SKC_V6_DADDR=-1" in raw_flags  # no IPv6 field
    assert [p.mode for p in plan_tcp(env, "fexit").candidates] == ["fexit"]


def test_tcp_plan_without_tracefs_or_btf_says_why(tmp_path: Path) -> None:
    plans = plan_tcp(_env(None, StubBtf(tp_args=2)))
    assert [p.mode for p in plans.candidates] == ["raw_tracepoint"]  # no fexit target, no tracefs
    assert "-DNETD_TCP_TP_HAS_ERR=0" in plans.candidates[0].cflags
    assert any("tracefs is not mounted" in w for w in plans.unavailable)
    assert any("no function __tcp_retransmit_skb" in w for w in plans.unavailable)
    nothing = plan_tcp(_env(None, None))
    assert nothing.candidates == () and "no kernel BTF" in nothing.detail
    no_sock = plan_tcp(_env(None, StubBtf({"__tcp_retransmit_skb"}, sock=False), kfunc=False))
    assert (
        no_sock.candidates == () and "struct sock lacks" in no_sock.detail and "trampolines" in no_sock.detail
    )


def test_rdma_plan(tmp_path: Path) -> None:
    assert plan_rdma(_env(None, None)).present == ()
    assert "tracefs is not mounted" in plan_rdma(_env(None, None)).detail
    (tmp_path / "events").mkdir()
    assert "no rdma_cma tracepoints" in plan_rdma(_env(tmp_path, None)).detail
    d = tmp_path / "events" / "rdma_cma" / "cm_qp_create"
    d.mkdir(parents=True)
    (d / "format").write_text("name: cm_qp_create\n")
    plan = plan_rdma(_env(tmp_path, None))
    assert plan.present == ("cm_qp_create",) and plan.cflags == ("-DNETD_RDMA_CM_QP_CREATE=1",)


def test_environment_problems_block_loading() -> None:
    env = _env(None, None)
    assert env.can_load
    assert not replace(env, problems=("needs root",)).can_load
