"""`netd bench bpf`: its frames are what they claim (checked with scapy, an independent builder), and the
benchmark runs end to end (shape only: timings are the machine's business)."""

from __future__ import annotations

import json
import os

import pytest

from netd.bench.frames import FRAMES, PFC_FRAMES
from netd.cli import main

scapy_l2 = pytest.importorskip("scapy.layers.l2")
from scapy.contrib.mac_control import MACControlClassBasedFlowControl, MACControlPause  # noqa: E402
from scapy.contrib.roce import BTH  # noqa: E402
from scapy.layers.inet import IP, TCP, UDP  # noqa: E402
from scapy.layers.inet6 import IPv6  # noqa: E402
from scapy.layers.l2 import Dot1Q, Ether  # noqa: E402

OPCODES = {
    "rc_write_only_ect0": 0x0A,
    "rc_write_only_ce": 0x0A,
    "rc_send_only_vlan": 0x04,
    "rc_send_only_ipv6": 0x04,
    "cnp": 0x81,
    "rc_ack": 0x11,
    "rc_nak_psn_seq": 0x11,
}


@pytest.mark.parametrize("name", sorted(FRAMES))
def test_roce_frames_are_well_formed(name: str) -> None:
    pkt = Ether(FRAMES[name])
    if name == "tcp":
        assert TCP in pkt
        return
    assert UDP in pkt and pkt[UDP].len == len(pkt[UDP])
    if IP in pkt:
        rebuilt = IP(bytes(pkt[IP]))
        del rebuilt.chksum
        assert IP(bytes(rebuilt)).chksum == pkt[IP].chksum  # the IPv4 header checksum is right
    if name == "udp_not_roce":
        assert pkt[UDP].dport == 53
        return
    assert pkt[UDP].dport == 4791 and pkt[BTH].opcode == OPCODES[name] and pkt[BTH].version == 0
    assert (Dot1Q in pkt) == name.endswith("vlan") and (IPv6 in pkt) == name.endswith("ipv6")
    assert (pkt[IP].tos & 3 if IP in pkt else pkt[IPv6].tc & 3) == (3 if name.endswith("_ce") else 2)


def test_pfc_frames_are_well_formed() -> None:
    pfc = Ether(PFC_FRAMES["pfc_prio3"])
    assert pfc.dst == "01:80:c2:00:00:01" and pfc[MACControlClassBasedFlowControl].c3_enabled == 1
    assert pfc[MACControlClassBasedFlowControl].c3_pause_time == 0xFFFF
    assert Ether(PFC_FRAMES["pause"])[MACControlPause].pause_time == 0xFFFF


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root for BPF")
def test_bench_runs(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("bcc")
    assert main(["bench", "bpf", "--repeat", "2000", "--rounds", "2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {(p["name"], p["packet"]) for p in doc["programs"]}
    assert rows == {("netd_roce_ingress", f) for f in FRAMES} | {("netd_pfc_ingress", f) for f in PFC_FRAMES}
    for p in doc["programs"]:
        assert p["observes_only"] and p["ns_per_packet"] > 0 and p["empty_ns_per_packet"] > 0
        assert len(p["rounds_ns"]) == 2 and p["overhead_ns"] == p["ns_per_packet"] - p["empty_ns_per_packet"]
    assert doc["target_overhead_ns"] == 25 and doc["repeat"] == 2000


def test_bench_refuses_nonsense(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "bpf", "--repeat", "0"]) == 2
    assert "--repeat and --rounds must be at least 1" in capsys.readouterr().err
