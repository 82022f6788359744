"""`netd run` with the eBPF probes in a pair of namespaces: `netd flows` shows the live top flows,
SIGTERM detaches everything, and a daemon killed with SIGKILL leaves filters that the next one
replaces (one filter per hook, never two)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("bcc")

from scapy.contrib.roce import BTH
from scapy.layers.inet import IP, UDP
from scapy.layers.l2 import Ether
from scapy.packet import Raw

from tests.bpf_netns import VethPair
from tests.processes import Child, wait_ready

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for namespaces and BPF"),
    pytest.mark.skipif(shutil.which("ip") is None, reason="needs iproute2"),
]


def _frames(lab: VethPair) -> list[bytes]:
    def roce(tos: int, qp: int, psn: int) -> bytes:
        ip = IP(src=lab.ip_a, dst=lab.ip_b, tos=tos, flags="DF")
        eth = Ether(src="02:00:00:aa:00:01", dst="02:00:00:bb:00:02")
        return bytes(
            eth / ip / UDP(sport=49152, dport=4791) / BTH(opcode=0x04, dqpn=qp, psn=psn) / Raw(b"d" * 256)
        )

    congested = [roce(26 << 2 | (3 if psn % 2 else 2), 0x11, psn) for psn in range(20)]  # half CE
    victim = [roce(26 << 2 | 2, 0x22, psn) for psn in (0, 1, 4, 5, 9)]  # two gaps
    return congested + victim


class Daemon:
    def __init__(self, tmp_path: Path, port: int, lab: VethPair) -> None:
        self.url = f"http://127.0.0.1:{port}"
        self.listen = f"127.0.0.1:{port}"
        self.env = {
            **os.environ,
            "NETD_EMULATOR_STATE_DIR": str(tmp_path / "emu"),
            "NETD_SYSFS_ROOT": str(tmp_path),
            "NETD_TOPOLOGY_ENABLED": "false",
            "NETD_BPF_ENABLED": "true",
            "NETD_BPF_INTERFACES": f"{lab.ns_a}/{lab.dev_a},{lab.ns_b}/{lab.dev_b}",
            "NETD_BPF_STATE_FILE": str(tmp_path / "bpf.json"),
            "NETD_BPF_FLOW_SCAN_INTERVAL": "0.5",
            "NETD_BPF_TCP_RETRANSMITS": "false",  # the packet probes are this test's subject
        }
        self.proc = Child(
            [sys.executable, "-m", "netd", "run", "--listen", self.listen, "--interval", "0.5"], env=self.env
        )
        try:
            wait_ready(self.url, self.proc, timeout_s=90)
        except AssertionError:
            self.stop(signal.SIGKILL)
            raise

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return self.proc.returncode, self.proc.stderr_text()

    def flows(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "netd", "flows", "--listen", self.listen, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
        )


@pytest.fixture
def lab() -> Iterator[VethPair]:
    pair = VethPair.create("nbd")
    try:
        yield pair
    finally:
        pair.close()


def _filters(lab: VethPair) -> list[str]:
    """netd's filters on the four hooks, by name (tc prints each filter's name after its flowid)."""
    text = "".join(
        lab.tc_filters(ns, dev, hook)
        for ns, dev in ((lab.ns_a, lab.dev_a), (lab.ns_b, lab.dev_b))
        for hook in ("ingress", "egress")
    )
    return re.findall(r"flowid :1 (netd_\w+)", text)


def test_live_flows_detach_and_crash_recovery(lab: VethPair, tmp_path: Path, free_port: int) -> None:
    first = Daemon(tmp_path, free_port, lab)
    try:
        assert (
            sorted(_filters(lab))
            == ["netd_pfc_ingress"] * 2 + ["netd_roce_egress"] * 2 + ["netd_roce_ingress"] * 2
        )
        lab.send(_frames(lab))
        deadline, doc = time.monotonic() + 20, {}
        while time.monotonic() < deadline:  # until a flow-table scan has seen them
            doc = httpx.get(first.url + "/v1/flows", timeout=5).json()
            if len(doc["congested"]) == 2 and doc["victims"]:
                break
            time.sleep(0.3)
        done = first.flows("--json", "--direction", "ingress")
        assert done.returncode == 0, done.stderr
        assert [f["dest_qp"] for f in json.loads(done.stdout)["congested"]] == [0x11]
        congested = [(f["dest_qp"], f["direction"], f["ce"]) for f in doc["congested"]]
        assert sorted(congested) == [(0x11, "egress", 10), (0x11, "ingress", 10)]
        assert {(f["dest_qp"], f["psn_gaps"], f["psn_missing"]) for f in doc["victims"]} == {(0x22, 2, 5)}
        text = first.flows("--top", "5")
        assert text.returncode == 0 and "Top congested flows" in text.stdout and lab.ip_b in text.stdout
        assert "0x11" in text.stdout.split("Top victim")[0] and "0x22" in text.stdout.split("Top victim")[1]
        metrics = httpx.get(first.url + "/metrics", timeout=5).text
        assert 'netd_bpf_probe_up{probe="roce"} 1.0' in metrics
        assert 'netd_bpf_roce_packets_total{direction="ingress",dscp="26",ecn="ce"} 10.0' in metrics
    finally:
        code, err = first.stop(signal.SIGKILL)  # a crash: nothing detaches
    assert len(_filters(lab)) == 6, "the kernel keeps the tc filters of a dead process"

    second = Daemon(tmp_path, free_port, lab)
    try:
        assert (
            sorted(_filters(lab))
            == ["netd_pfc_ingress"] * 2 + ["netd_roce_egress"] * 2 + ["netd_roce_ingress"] * 2
        )
    finally:
        code, err = second.stop(signal.SIGTERM)
    assert code == 0, err
    assert "stale netd filter" in err
    assert "eBPF probes: roce attached (tc), pfc attached (tc), tcp_retransmits disabled" in err  # the banner
    assert _filters(lab) == [] and not (tmp_path / "bpf.json").exists()
    for ns, dev in ((lab.ns_a, lab.dev_a), (lab.ns_b, lab.dev_b)):
        assert "clsact" not in lab.run(ns, "tc", "qdisc", "show", "dev", dev)
