"""The lab's host trees carry QoS state with one host misconfigured on purpose (trust mode and PFC
priority): the fabric audit over them gives exactly one finding, naming that host. The trees are the
lab's own (HostPublisher over agent shared memory, as labd builds them); no namespaces are needed."""

from __future__ import annotations

from pathlib import Path

from netd.config.qos import QosConfig
from netd.lab.layout import LabLayout
from netd.lab.publish import HostPublisher
from netd.lab.qos import render_lab_qos
from netd.lab.shm import HostShm
from netd.qos.fabric import FabricQos, from_emulated_trees


def test_one_misconfigured_lab_host_is_exactly_one_finding(tmp_path: Path) -> None:
    layout = LabLayout(name="qostest", hosts=4, tors=2)
    publishers = []
    for i in range(layout.hosts):
        HostShm(tmp_path / f"host{i}.shm", create=True).close()
        publishers.append(HostPublisher(tmp_path / f"host{i}", tmp_path / f"host{i}.shm", layout.link_mbps))
        render_lab_qos(tmp_path / f"host{i}", i, layout.hosts)
    try:
        roots = {f"h{i}": (tmp_path / f"host{i}", f"tor{layout.tor_of(i)}") for i in range(layout.hosts)}
        # two hosts per ToR cannot have a majority: the lab is audited fabric-wide
        result = FabricQos(from_emulated_trees(roots), QosConfig(scope="fabric"), origin="lab").current()
        per_tor = FabricQos(from_emulated_trees(roots), QosConfig(), origin="lab").current()
    finally:
        for p in publishers:
            p.close()
    assert result is not None and per_tor is not None
    (finding,) = result.findings
    assert finding.host == "h3"
    assert {d.setting for d in finding.differences} == {"trust", "dscp_prio", "pfc", "prio_buffer"}
    assert all(d.basis == "majority of the fabric (3/4 ports)" for d in finding.differences)
    # per ToR, tor1 (h2, h3) splits 1:1 on those settings: undecided, never a guessed finding
    assert per_tor.findings == ()
    assert "tor1: no majority for pfc (1 x '3', 1 x '4')" in per_tor.undecided
