"""``netd lab bench``: the incast scenario, measured by the lab and by netd, compared.

The lab's ground truth is what crossed the wire, counted by the lab's own taps at the far end of
each link (ebpf/lab_switch.c): CE-marked data arriving at the receiver, CNPs arriving at the
receiver's ToR (sent), CNPs arriving at each sender (handled). netd measures the same three rates the
way it does on a real host: its collector reads each lab host's sysfs-shaped tree
(``<lab>/host<i>``, rendered from the host agents' counters) and its series layer turns counters into
rates; where netd's eBPF probes (netd/sources/bpf*) can load, they run on the receiver's veth too and
their CE and CNP counts are compared as well. Both sides are sampled at the same instants (the lab
renders the trees on request just before each netd tick), every ``tick_s`` over the measurement
window, and ``rate_error`` is the largest relative difference of the window's mean rates.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from netd.config.settings import Config
from netd.errors import LabError
from netd.lab.control import LabClient
from netd.lab.layout import LabLayout
from netd.lab.manage import down as lab_down
from netd.lab.manage import up
from netd.lab.params import lab_params
from netd.lab.runner import Sample, run_scenario
from netd.lab.scenarios import incast
from netd.lab.state import LabState, lab_dir
from netd.lab.summary import summarize

__all__ = ["NetdProbe", "lab_bench", "measure_incast"]

log = logging.getLogger(__name__)


class NetdProbe:
    """netd's measurement pipeline pointed at one lab host: collector (sysfs tree + ethtool capture,
    and optionally the eBPF probes on the host's veth) and series tracker."""

    def __init__(self, state_dir: Path, host: int, netns: str | None = None) -> None:
        from netd.config.bpf import BpfConfig
        from netd.sources.collect import Sampler

        bpf = (
            BpfConfig(
                enabled=True,
                interfaces=(f"{netns}/eth0",),
                directions=("ingress", "egress"),
                tcp_retransmits=False,
                rdma_events=False,
                flow_table_size=0,
                state_file=state_dir / f"bench-bpf-h{host}.json",
            )
            if netns
            else BpfConfig()
        )
        cfg = Config(sysfs_root=state_dir / f"host{host}", fabric="hardware", bpf=bpf)
        self.collector = Sampler.from_config(cfg, cfg.sysfs_root, host=f"lab-h{host}")
        self.probes = False
        if netns:
            from netd.daemon.bpf import start_bpf

            self.collector.bpf = start_bpf(cfg)
            sample = self.collector.bpf.read() if self.collector.bpf else None
            self.probes = bool(sample and any(p.attached for p in sample.probes if p.probe == "roce"))
            if not self.probes:
                reasons = [p.detail for p in sample.probes if p.probe == "roce"] if sample else []
                log.warning("netd's eBPF probes are not available here: %s", "; ".join(reasons) or "unknown")

    def read(self) -> dict[str, float]:
        """Totals of the compared counters now, and the snapshot's monotonic time."""
        snap = self.collector.collect()
        out: dict[str, float] = {"t": snap.monotonic}
        for port in snap.ports:
            for c in port.counters.values():
                if c.name in ("ecn_marked", "cnp_sent", "cnp_handled"):
                    out[c.name] = out.get(c.name, 0) + c.value
        bpf = snap.bpf
        if self.probes and bpf is not None:
            out["probe_ce_rx"] = sum(
                c.packets for c in bpf.roce_classes if c.direction == "ingress" and c.ecn == 3
            )
            out["probe_cnp_tx"] = bpf.roce_events.get(("egress", "cnp"), 0)
        return out

    def close(self) -> None:
        self.collector.close()


def _truth(stats: dict[str, Any], layout: LabLayout, receiver: int, senders: list[int]) -> dict[str, float]:
    ports = stats["ports"]
    return {
        "t": stats["t_ns"] / 1e9,
        "ce_rx": ports[str(layout.host_port(receiver).id)]["in_ce"],
        "cnp_tx": ports[str(layout.host_facing(receiver).id)]["in_cnp"],
        **{f"cnp_rx_h{h}": ports[str(layout.host_port(h).id)]["in_cnp"] for h in senders},
    }


def _rate(a: dict[str, float], b: dict[str, float], key: str) -> float:
    return (b[key] - a[key]) / max(b["t"] - a["t"], 1e-9)


def measure_incast(
    root: Path, name: str, senders: int = 8, duration_s: float = 8.0, probes: bool = True, tick_s: float = 0.5
) -> dict[str, Any]:
    """Run the incast on an up lab with netd measuring alongside; returns the run's summary, netd's
    relative rate errors per compared counter, and whether netd's eBPF probes took part."""
    directory = lab_dir(root, name)
    state = LabState.load(directory)
    if state is None:
        raise LabError(f"lab {name} is not up")
    layout = state.layout
    scenario = incast(layout, senders=senders, duration_s=duration_s)
    hosts = sorted({f.src for f in scenario.flows})
    receiver = scenario.flows[0].dst
    netd = {receiver: NetdProbe(directory, receiver, layout.host_nodes[receiver].netns if probes else None)}
    netd |= {h: NetdProbe(directory, h) for h in hosts}
    marks: list[tuple[dict[str, float], dict[int, dict[str, float]]]] = []
    client = LabClient(directory)
    next_tick = [scenario.warmup_s]

    def on_sample(sample: Sample) -> None:
        if sample.t < next_tick[0]:
            return
        next_tick[0] += tick_s
        client.request("publish")  # render the trees now: netd reads what the agents counted
        readings = {h: p.read() for h, p in netd.items()}
        marks.append((_truth(client.request("stats"), layout, receiver, hosts), readings))

    try:
        result = run_scenario(root, name, scenario, lab_params(layout.link_mbps), on_sample=on_sample)
    finally:
        client.close()
        for p in netd.values():
            p.close()
    if len(marks) < 2:
        raise LabError("the run was too short for two netd ticks; use a longer --duration")
    (ta, na), (tb, nb) = marks[0], marks[-1]
    errors: dict[str, float | None] = {}

    def compare(label: str, netd_rate: float, truth_rate: float) -> None:
        errors[label] = round(abs(netd_rate - truth_rate) / truth_rate, 4) if truth_rate else None

    compare("ecn_marked", _rate(na[receiver], nb[receiver], "ecn_marked"), _rate(ta, tb, "ce_rx"))
    compare("cnp_sent", _rate(na[receiver], nb[receiver], "cnp_sent"), _rate(ta, tb, "cnp_tx"))
    for h in hosts:
        compare(f"cnp_handled_h{h}", _rate(na[h], nb[h], "cnp_handled"), _rate(ta, tb, f"cnp_rx_h{h}"))
    if netd[receiver].probes:
        compare("probe_ce", _rate(na[receiver], nb[receiver], "probe_ce_rx"), _rate(ta, tb, "ce_rx"))
        compare("probe_cnp", _rate(na[receiver], nb[receiver], "probe_cnp_tx"), _rate(ta, tb, "cnp_tx"))
    return {
        "summary": summarize(result),
        "rate_errors": errors,
        "probes": netd[receiver].probes,
        "ticks": len(marks),
    }


def lab_bench(
    root: Path, name: str = "lab", senders: int = 8, duration_s: float = 8.0, keep: bool = False
) -> dict[str, Any]:
    """The benchmark document (brings a default lab up first if there is none, and down afterwards
    unless ``keep``)."""
    created = LabState.load(lab_dir(root, name)) is None
    if created:
        up(root, LabLayout(name))
    try:
        m = measure_incast(root, name, senders, duration_s)
    finally:
        if created and not keep:
            lab_down(root, name)
    s = m["summary"]
    known = [e for e in m["rate_errors"].values() if e is not None]
    return {
        **{
            k: s[k]
            for k in (
                "goodput_gbps",
                "utilization",
                "queue_p50_kb",
                "queue_p99_kb",
                "ce_fraction",
                "cnp_per_s",
                "convergence_s",
                "jain",
            )
        },
        "rate_error": max(known) if known else None,
        "rate_errors": m["rate_errors"],
        "netd_probes": m["probes"],
        "netd_ticks": m["ticks"],
        "senders": senders,
        "duration_s": duration_s,
        "drops": s["drops"],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
