"""Prometheus families for the eBPF probes (``netd_bpf_*``), from the tick's :class:`BpfSample`.

Aggregates only: direction, DSCP, ECN codepoint, priority, netdev, kind. Flows, QPs and addresses
never become labels (docs/metrics.md); they are served by GET /v1/flows. Counters are totals since the
probes were loaded (a daemon restart resets them, which Prometheus handles as a counter reset).
A probe that is not attached exports nothing but its state.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from netd.model.bpf import BpfSample

__all__ = ["bpf_families"]

ECN_NAMES = ("not_ect", "ect1", "ect0", "ce")
ACK_KINDS = {"ack": "ack", "nak_seq": "nak_seq", "nak_rnr": "nak_rnr", "nak_other": "nak_other"}
REJECT_KINDS = ("truncated", "ip", "fragment", "udp_length", "bth")
QP_KINDS = {"qp_create": "create", "qp_create_fail": "create_failed", "qp_destroy": "destroy"}


def _counter(name: str, doc: str, labels: list[str]) -> CounterMetricFamily:
    return CounterMetricFamily(name, doc, labels=labels)


def bpf_families(bpf: BpfSample | None) -> Iterator[Metric]:
    if bpf is None:
        return
    families = [
        *_probe_families(bpf),
        *_roce_families(bpf),
        *_pfc_families(bpf),
        *_event_families(bpf),
        *_self_families(bpf),
    ]
    yield from (f for f in families if f.samples)


def _probe_families(bpf: BpfSample) -> Iterator[Metric]:
    up = GaugeMetricFamily("netd_bpf_probe_up", "1 when the eBPF probe is attached.", labels=["probe"])
    info = GaugeMetricFamily(
        "netd_bpf_probe_info",
        "eBPF probe state (attached, skipped, failed, disabled) and attach point.",
        labels=["probe", "state", "attach"],
    )
    for p in bpf.probes:
        up.add_metric([p.probe], 1 if p.attached else 0)
        info.add_metric([p.probe, p.state, p.attach or ""], 1)
    yield from (up, info)


def _roce_families(bpf: BpfSample) -> Iterator[Metric]:
    labels = ["direction", "dscp", "ecn"]
    packets = _counter("netd_bpf_roce_packets", "RoCEv2 packets seen by the tc probe.", labels)
    nbytes = _counter("netd_bpf_roce_bytes", "RoCEv2 frame bytes seen by the tc probe.", labels)
    for c in bpf.roce_classes:
        key = [c.direction, str(c.dscp), ECN_NAMES[c.ecn & 3]]
        packets.add_metric(key, c.packets)
        nbytes.add_metric(key, c.bytes)
    yield from (packets, nbytes)
    if not bpf.roce_events:
        return
    d = ["direction"]
    cnp = _counter("netd_bpf_roce_cnp", "CNPs seen (egress: sent by this host; ingress: received).", d)
    acks = _counter("netd_bpf_roce_acks", "RC/XRC acknowledgements by AETH syndrome.", [*d, "kind"])
    gaps = _counter("netd_bpf_roce_psn_gaps", "Requests whose PSN skipped ahead of the expected one.", d)
    missing = _counter("netd_bpf_roce_psn_missing", "PSNs skipped over by those gaps.", d)
    rewinds = _counter("netd_bpf_roce_psn_rewinds", "Requests whose PSN went back (retransmission).", d)
    rejected = _counter(
        "netd_bpf_roce_rejected_packets", "UDP/4791 packets not counted as RoCEv2, by reason.", [*d, "kind"]
    )
    lost = _counter("netd_bpf_flow_records_lost", "Flow counts the full flow table could not take.", d)
    for (direction, event), value in sorted(bpf.roce_events.items()):
        if event == "cnp":
            cnp.add_metric([direction], value)
        elif event in ACK_KINDS:
            acks.add_metric([direction, ACK_KINDS[event]], value)
        elif event == "psn_gap":
            gaps.add_metric([direction], value)
        elif event == "psn_missing":
            missing.add_metric([direction], value)
        elif event == "psn_rewind":
            rewinds.add_metric([direction], value)
        elif event.startswith("rej_") and event[4:] in REJECT_KINDS:
            rejected.add_metric([direction, event[4:]], value)
        elif event == "flow_lost":
            lost.add_metric([direction], value)
    yield from (cnp, acks, gaps, missing, rewinds, rejected, lost)


def _pfc_families(bpf: BpfSample) -> Iterator[Metric]:
    frames = _counter(
        "netd_bpf_mac_control_frames",
        "MAC control frames received (kind: pause, pfc, other_opcode, malformed), as the kernel saw them.",
        ["netdev", "kind"],
    )
    pquanta = _counter("netd_bpf_pause_quanta", "Summed 802.3x pause_time (512 bit times each).", ["netdev"])
    presume = _counter("netd_bpf_pause_resume_frames", "802.3x PAUSE frames with pause_time 0.", ["netdev"])
    prio = ["netdev", "priority"]
    pfc = _counter("netd_bpf_pfc_frames", "PFC frames with the priority's class-enable bit set.", prio)
    quanta = _counter("netd_bpf_pfc_pause_quanta", "Summed PFC pause times (512 bit times each).", prio)
    resume = _counter("netd_bpf_pfc_resume_frames", "PFC frames releasing the priority (time 0).", prio)
    for p in bpf.pfc:
        for kind, value in (
            ("pause", p.pause_frames),
            ("pfc", p.pfc_frames),
            ("other_opcode", p.other_opcode),
            ("malformed", p.malformed),
        ):
            frames.add_metric([p.netdev, kind], value)
        pquanta.add_metric([p.netdev], p.pause_quanta)
        presume.add_metric([p.netdev], p.pause_resumes)
        for i in range(len(p.prio_frames)):
            pfc.add_metric([p.netdev, str(i)], p.prio_frames[i])
            quanta.add_metric([p.netdev, str(i)], p.prio_quanta[i])
            resume.add_metric([p.netdev, str(i)], p.prio_resumes[i])
    yield from (frames, pquanta, presume, pfc, quanta, resume)


def _event_families(bpf: BpfSample) -> Iterator[Metric]:
    tcp = _counter("netd_bpf_tcp_retransmits", "TCP retransmissions (per endpoint: GET /v1/flows).", [])
    if bpf.tcp_retransmits is not None:
        tcp.add_metric([], bpf.tcp_retransmits)
    cm = _counter("netd_bpf_rdma_cm_events", "RDMA CM events delivered to consumers.", ["kind"])
    for kind, value in sorted(bpf.rdma_cm_events.items()):
        cm.add_metric([kind], value)
    errors = _counter("netd_bpf_rdma_cm_event_errors", "RDMA CM events with a non-zero status.", [])
    qp = _counter("netd_bpf_rdma_qp_events", "QPs created through the RDMA CM, failed, destroyed.", ["kind"])
    for name, value in sorted(bpf.rdma_events.items()):
        if name == "cm_errors":
            errors.add_metric([], value)
        elif name in QP_KINDS:
            qp.add_metric([QP_KINDS[name]], value)
    yield from (tcp, cm, errors, qp)


def _self_families(bpf: BpfSample) -> Iterator[Metric]:
    enabled = GaugeMetricFamily(
        "netd_bpf_run_stats_enabled", "1 while the kernel accumulates BPF program run statistics."
    )
    enabled.add_metric([], 1 if bpf.run_stats else 0)
    runs = _counter(
        "netd_bpf_program_runs", "Times the program ran (while run statistics are on).", ["program"]
    )
    seconds = _counter(
        "netd_bpf_program_run_seconds", "Time spent in the program (while statistics are on).", ["program"]
    )
    for p in bpf.programs:
        if p.run_count is not None and p.run_time_ns is not None:
            runs.add_metric([p.program], p.run_count)
            seconds.add_metric([p.program], p.run_time_ns / 1e9)
    entries = GaugeMetricFamily("netd_bpf_map_entries", "Entries in use in the BPF map.", labels=["map"])
    capacity = GaugeMetricFamily("netd_bpf_map_capacity", "Entries the BPF map can hold.", labels=["map"])
    evictions = _counter(
        "netd_bpf_map_evictions",
        "Entries the map dropped or handed over to make room (LRU evictions; flow-cache write-backs).",
        ["map"],
    )
    for m in bpf.maps:
        entries.add_metric([m.map], m.entries)
        capacity.add_metric([m.map], m.capacity)
        if m.evictions is not None:
            evictions.add_metric([m.map], m.evictions)
    yield from (enabled, runs, seconds, entries, capacity, evictions)
