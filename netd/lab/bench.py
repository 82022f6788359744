"""``netd lab bench``: the incast scenario, measured by the lab and by netd, compared.

The lab's ground truth is what crossed the wire, counted by the lab's own taps at the far end of
each link (ebpf/lab_switch.c): CE-marked data arriving at the receiver, CNPs arriving at the
receiver's ToR (sent), CNPs arriving at each sender (handled). netd measures the same three rates the
way it does on a real host: its collector reads each lab host's sysfs-shaped tree
(``<lab>/host<i>``, rendered from the host agents' counters) and its series layer turns counters into
rates; where netd's eBPF probes (netd/sources/bpf*) can load, they run on the receiver's veth too and
their CE and CNP counts are compared as well. netd ticks every ``tick_s`` during the run, on a thread
of its own so the DCQCN controller's loop never waits for it (the lab renders the trees on request
just before each tick), and both sides' counter totals are read once before the traffic starts and
once after it has stopped and drained: ``rate_error`` is the largest relative difference of the two
sides' totals over that same window (differences of totals, not of rates computed with each side's
own clock, which measured their timing skew as error).

The wire itself is checked from captures (netd.lab.capture, decoded by netd.lab.wire independently of
the agents) on the receiver's interface and on the first sender's: the fraction of RoCEv2 frames with a
valid ICRC, of CNPs with BECN, the smallest spacing of CNPs to one QP, the largest burst a sender put
on its link above the line rate, and ``psn_gaps_false``: how far netd's PSN gap count (its eBPF probe on
the receiver's veth) is from the gaps in the capture of the same interface.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from netd.config.settings import Config
from netd.errors import LabError
from netd.lab.capture import Capture, Captured
from netd.lab.control import LabClient
from netd.lab.layout import LabLayout
from netd.lab.manage import down as lab_down
from netd.lab.manage import up
from netd.lab.params import lab_params
from netd.lab.realtime import normal_priority
from netd.lab.runner import Sample, run_scenario
from netd.lab.scenarios import incast
from netd.lab.state import LabState, lab_dir
from netd.lab.summary import summarize
from netd.lab.wire import OP_CNP, cnp_min_spacing_s, max_burst_over_rate_bytes, psn_gaps

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
                if c.name in ("ecn_marked", "cnp_sent", "cnp_handled", "cnp_ignored"):
                    out[c.name] = out.get(c.name, 0) + c.value
        # every CNP that arrives is handled or ignored (one for a QP that no longer sends, e.g. in
        # flight when the scenario stopped its flows): together they are the arrivals the tap counts
        out["cnp_received"] = out.get("cnp_handled", 0) + out.get("cnp_ignored", 0)
        bpf = snap.bpf
        if self.probes and bpf is not None:
            out["probe_ce_rx"] = sum(
                c.packets for c in bpf.roce_classes if c.direction == "ingress" and c.ecn == 3
            )
            out["probe_cnp_tx"] = bpf.roce_events.get(("egress", "cnp"), 0)
            out["probe_psn_gaps"] = sum(bpf.roce_events.get((d, "psn_gap"), 0) for d in ("ingress", "egress"))
        return out

    def close(self) -> None:
        self.collector.close()


Mark = tuple[dict[str, float], dict[int, dict[str, float]]]  # (lab's taps, netd per host)
DRAIN_S = 0.3  # after the flows stop: the last packets and CNPs arrive and are counted


def _truth(stats: dict[str, Any], layout: LabLayout, receiver: int, senders: list[int]) -> dict[str, float]:
    ports = stats["ports"]
    return {
        "t": stats["t_ns"] / 1e9,
        "ce_rx": ports[str(layout.host_port(receiver).id)]["in_ce"],
        "cnp_tx": ports[str(layout.host_facing(receiver).id)]["in_cnp"],
        **{f"cnp_rx_h{h}": ports[str(layout.host_port(h).id)]["in_cnp"] for h in senders},
    }


def _mark(
    client: LabClient, netd: dict[int, NetdProbe], layout: LabLayout, receiver: int, senders: list[int]
) -> Mark:
    client.request("publish")  # render the trees now: netd reads what the agents counted
    readings = {h: p.read() for h, p in netd.items()}
    return _truth(client.request("stats"), layout, receiver, senders), readings


def wire_report(caps: dict[int, Captured], receiver: int, link_bps: float) -> dict[str, Any]:
    """What the captures say about the lab's packets (docstring of this module)."""
    frames = [f for c in caps.values() for f in c.frames]
    cnps = [f for f in frames if f.opcode == OP_CNP]
    sent = [
        f for h, c in caps.items() if h != receiver for f in c.frames if f.outgoing and f.opcode != OP_CNP
    ]
    at_receiver = caps[receiver].frames
    spacing = cnp_min_spacing_s([f for f in at_receiver if f.outgoing])
    return {
        "frames": len(frames),
        "capture_dropped": sum(c.dropped for c in caps.values()),
        "icrc_valid_fraction": round(sum(f.icrc_ok for f in frames) / len(frames), 6) if frames else None,
        "becn_fraction": round(sum(f.becn for f in cnps) / len(cnps), 6) if cnps else None,
        "cnp_min_interval_ms": round(spacing * 1e3, 3) if spacing is not None else None,
        "max_burst_over_line_rate_kb": round(
            max_burst_over_rate_bytes([(f.t, f.wire_bytes) for f in sent], link_bps) / 1e3, 2
        ),
        "wire_psn_gaps": psn_gaps(at_receiver),
    }


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
    client = LabClient(directory)
    next_tick = [scenario.warmup_s]
    # netd ticks on a thread of its own: the sample callback runs in the DCQCN controller's loop,
    # which must not wait for netd's pipeline (a tick is several ms, longer than a cut period). The
    # thread is created from that real-time loop, so it leaves the real-time scheduler first: netd's
    # work must not preempt the host agents either.
    netd_thread = ThreadPoolExecutor(1, thread_name_prefix="netd-tick", initializer=normal_priority)
    ticks: list[Future[Mark]] = []

    def on_sample(sample: Sample) -> None:
        if sample.t < next_tick[0]:
            return
        next_tick[0] += tick_s
        ticks.append(netd_thread.submit(_mark, client, netd, layout, receiver, hosts))

    caps: dict[int, Capture] = {}
    try:
        for h in (receiver, hosts[0]):
            caps[h] = Capture(layout.host_nodes[h].netns, "eth0")
        ta, na = _mark(client, netd, layout, receiver, hosts)
        result = run_scenario(root, name, scenario, lab_params(layout.link_mbps), on_sample=on_sample)
        for tick in ticks:
            tick.result()  # a tick that failed fails the measurement
        time.sleep(DRAIN_S)
        tb, nb = _mark(client, netd, layout, receiver, hosts)
        captured = {h: c.stop() for h, c in caps.items()}
        caps = {}
    finally:
        netd_thread.shutdown(cancel_futures=True)
        for c in caps.values():  # only after a failure: the run's captures were stopped above
            c.kill()
        client.close()
        for p in netd.values():
            p.close()
    if len(ticks) < 2:
        raise LabError("the run was too short for two netd ticks; use a longer --duration")
    errors: dict[str, float | None] = {}

    def compare(label: str, key: str, truth_key: str, host: int) -> None:
        """Relative difference of the two sides' totals over the same window."""
        got, truth = nb[host][key] - na[host][key], tb[truth_key] - ta[truth_key]
        errors[label] = round(abs(got - truth) / truth, 4) if truth else None

    compare("ecn_marked", "ecn_marked", "ce_rx", receiver)
    compare("cnp_sent", "cnp_sent", "cnp_tx", receiver)
    for h in hosts:
        compare(f"cnp_received_h{h}", "cnp_received", f"cnp_rx_h{h}", h)
    wire = wire_report(captured, receiver, layout.link_mbps * 1e6)
    if netd[receiver].probes:
        compare("probe_ce", "probe_ce_rx", "ce_rx", receiver)
        compare("probe_cnp", "probe_cnp_tx", "cnp_tx", receiver)
        probe_gaps = nb[receiver]["probe_psn_gaps"] - na[receiver]["probe_psn_gaps"]
        wire["psn_gaps_false"] = int(abs(probe_gaps - wire["wire_psn_gaps"]))
    else:
        wire["psn_gaps_false"] = None
    return {
        "summary": summarize(result),
        "rate_errors": errors,
        "probes": netd[receiver].probes,
        "ticks": len(ticks),
        "wire": wire,
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
        **{
            k: m["wire"][k]
            for k in (
                "psn_gaps_false",
                "icrc_valid_fraction",
                "becn_fraction",
                "max_burst_over_line_rate_kb",
                "cnp_min_interval_ms",
                "capture_dropped",
            )
        },
        "controller": s["controller"],
        "netd_probes": m["probes"],
        "netd_ticks": m["ticks"],
        "senders": senders,
        "duration_s": duration_s,
        "drops": s["drops"],
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
