"""The fabric overview: where the congestion is, per ToR, spine and rail, and which ports are worst."""

from __future__ import annotations

from netd.dashboards.fabric_hotspots import findings, top_ports
from netd.dashboards.fabric_queries import (
    ALERTS_FIRING,
    ECN_STEPS,
    JOB,
    LEVEL_MAPPINGS,
    LEVEL_NAMES,
    PAUSE_STEPS,
    PRIO,
    ecn_share,
    pause_share,
)
from netd.dashboards.grafana import Dashboard, Panel, Row, Target, Variable
from netd.dashboards.promql import RATE, lossless, on_netdev, on_port, per_minute, port_loss_events, rate

__all__ = ["fabric_overview"]


def _stat(title: str, description: str, expr: str, unit: str = "none", red: float | None = 1) -> Panel:
    steps = ((red, "red"),) if red is not None else ()
    return Panel(title, description, unit, (Target(expr),), kind="stat", width=4, height=4, thresholds=steps)


def _now() -> Row:
    return Row(
        "Fabric now",
        (
            _stat(
                "Ports reporting",
                "RDMA ports netd reports. Bad: fewer than the fabric has (a host or "
                "its netd is missing: see the netd health dashboard).",
                f"count(netd_port_info{{{JOB}}})",
                red=None,
            ),
            _stat(
                "Ports not ACTIVE",
                "RDMA ports whose state is not ACTIVE. Bad: anything above 0 during "
                "a job: that port carries no RDMA traffic at all.",
                f"count(netd_port_up{{{JOB}}} == 0) or vector(0)",
            ),
            _stat(
                "netd targets down",
                "netd endpoints Prometheus fails to scrape. Bad: above 0, those "
                "hosts' ports are invisible here.",
                f"count(up{{{JOB}}} == 0) or vector(0)",
            ),
            _stat(
                "Firing netd alerts",
                "netd alerts firing now (see the table below). Bad: above 0.",
                f"count({ALERTS_FIRING}) or vector(0)",
            ),
            _stat(
                "Hosts on the emulated fabric",
                "Hosts whose netd serves its emulated fabric (synthetic "
                "counters). Bad: above 0 on a production fabric: that host's RDMA driver is missing.",
                f"count(netd_fabric_emulated{{{JOB}}} == 1) or vector(0)",
            ),
            _stat(
                "Fabric RDMA throughput (received)",
                "RDMA payload received by all host ports, per "
                "second. Bad: a sudden drop during a job while pause time or loss rises below.",
                f"sum(8 * {rate('netd_rdma_rx_bytes_total', RATE, JOB)})",
                unit="bps",
                red=None,
            ),
        ),
    )


def _level_state(level: str) -> Panel:
    name = LEVEL_NAMES[level]
    expr = f"max by ({level}) ({on_port(f'netd_port_congestion_level{{{JOB}}}', (level,))})"
    return Panel(
        f"{name}: congestion level of its worst host port",
        f"netd's congestion level (from its score of ECN marks, CNPs, pause time and loss) of the most "
        f"congested host port under each {name}. ok and busy are normal under load; bad: congested or severe "
        "for minutes (open the top-ports table below).",
        "none",
        (Target(expr, legend=f"{name} {{{{{level}}}}}"),),
        kind="state-timeline",
        mappings=LEVEL_MAPPINGS,
        thresholds=((1, "yellow"), (2, "orange"), (3, "red")),
        max=3,
    )


def _levelpause_share(level: str) -> Panel:
    name = LEVEL_NAMES[level]
    return Panel(
        f"{name}: share of time host ports are paused (received PFC, per priority)",
        f"Average over the {name}'s host ports of the time PFC pause held them (priority $priority). Green "
        "below 2%: normal under load. Yellow: queues reach the PFC threshold often. Bad (red) above 10%: "
        "DCQCN is not keeping up and senders stall (alert NetdTorCongestionSustained for a ToR).",
        "percentunit",
        (
            Target(
                f"avg by ({level}, priority) ({pause_share(RATE)})",
                legend=f"{name} {{{{{level}}}}} prio {{{{priority}}}}",
            ),
        ),
        kind="state-timeline",
        thresholds=PAUSE_STEPS,
        max=1,
    )


def _level_ecn(level: str) -> Panel:
    name = LEVEL_NAMES[level]
    return Panel(
        f"{name}: share of received RoCE packets ECN-marked",
        f"CE-marked packets over all packets received by the {name}'s host ports. Green below 1%: DCQCN "
        f"working normally. Yellow: frequent congestion. Bad (red) above 5% for long: the {name} is "
        "persistently oversubscribed (look at pause time next to it).",
        "percentunit",
        (Target(ecn_share(level, RATE), legend=f"{name} {{{{{level}}}}}"),),
        kind="state-timeline",
        thresholds=ECN_STEPS,
        max=1,
    )


def _levels() -> Row:
    rx_bits = on_port(f"8 * {rate('netd_rdma_rx_bytes_total', RATE, JOB)}")
    rails = Panel(
        "Rail: RDMA throughput received per rail",
        "Received RDMA payload summed per rail. In an all-reduce every rail carries about the same "
        "traffic; bad: one rail well below its siblings (a slow, flapping or misrouted link on that rail).",
        "bps",
        (Target(f"sum by (rail) ({rx_bits})", legend="Rail {{rail}}"),),
        width=24,
    )
    panels = (
        _level_state("tor"),
        _level_state("spine"),
        _levelpause_share("tor"),
        _levelpause_share("spine"),
        _level_ecn("tor"),
        _level_ecn("spine"),
        rails,
    )
    return Row("Congestion per ToR, spine and rail", panels)


def _fabric_wide() -> Row:
    pause = rate("netd_pfc_pause_duration_seconds_total", RATE, JOB, PRIO)
    frames = rate("netd_pfc_pause_frames_total", RATE, JOB, PRIO)
    loss_by_tor = f"sum by (tor) ({on_port(port_loss_events(RATE, JOB))})"
    discards = f"sum by (tor) ({on_netdev(lossless(rate('netd_priority_discards_total', RATE, JOB)))})"
    return Row(
        "PFC, ECN and loss fabric-wide",
        (
            Panel(
                "PFC time paused per priority and direction: fabric average and worst port",
                "Share of time ports were paused (rx: by their switch) or pausing their switch (tx). Bad: "
                "the worst port above 10% for minutes, or above 50% at all (a PFC storm: alert "
                "NetdPfcStorm); "
                "any sustained tx pause from a host NIC (it cannot drain what it receives).",
                "percentunit",
                (
                    Target(
                        f"avg by (priority, direction) ({pause})",
                        legend="average prio {{priority}} {{direction}}",
                    ),
                    Target(
                        f"max by (priority, direction) ({pause})",
                        legend="worst port prio {{priority}} {{direction}}",
                    ),
                ),
                thresholds=((0.1, "orange"), (0.5, "red")),
                max=1,
            ),
            Panel(
                "PFC pause frames per priority and direction, fabric total",
                "Pause frames per second, summed over all ports. Bad: a sudden rise across many ports at "
                "once (congestion spreading); tx pause from host NICs at all.",
                "pps",
                (
                    Target(
                        f"sum by (priority, direction) ({frames})", legend="prio {{priority}} {{direction}}"
                    ),
                ),
            ),
            Panel(
                "ECN marks and CNPs, fabric total",
                "CE-marked packets received (the switches' congestion signal), CNPs sent by notification "
                "points and CNPs handled by reaction points, per second. Bad: marks without CNPs sent (NPs "
                "not responding); any CNPs ignored (DCQCN disabled on the RoCE priority: alert "
                "NetdCnpIgnored).",
                "pps",
                (
                    Target(
                        f"sum({rate('netd_rdma_ecn_marked_packets_total', RATE, JOB)})",
                        legend="ECN-marked received",
                    ),
                    Target(f"sum({rate('netd_rdma_cnp_sent_total', RATE, JOB)})", legend="CNPs sent"),
                    Target(f"sum({rate('netd_rdma_cnp_handled_total', RATE, JOB)})", legend="CNPs handled"),
                    Target(f"sum({rate('netd_rdma_cnp_ignored_total', RATE, JOB)})", legend="CNPs ignored"),
                ),
            ),
            Panel(
                "Loss in the lossless class per ToR",
                "RoCE loss events (out-of-sequence, NAK sequence errors, retransmissions, ACK timeouts) and "
                "packets discarded on PFC priorities, per second. Bad: anything above 0 (alerts "
                "NetdRoceLoss, NetdLosslessClassDiscards).",
                "pps",
                (
                    Target(loss_by_tor, legend="RoCE loss events ToR {{tor}}"),
                    Target(discards, legend="lossless discards ToR {{tor}}"),
                ),
                thresholds=((0.001, "red"),),
            ),
        ),
    )


def _links() -> Row:
    flaps = f"sum by (tor) ({on_netdev(per_minute('netd_link_down_events_total', RATE, JOB))})"
    up = f"sum by (tor) ({on_port(f'netd_port_up{{{JOB}}}')})"
    return Row(
        "Links",
        (
            Panel(
                "Link down events per ToR, per minute",
                "Link losses at the PHY of the ToR's host ports, per minute (averaged over the rate "
                "interval). "
                "Bad: any, during a job (every "
                "RDMA connection on the port stalls); repeated ones on the same ToR are a flapping optic or "
                "cable (alert NetdLinkFlapping; the port is in the alert).",
                "short",
                (Target(flaps, legend="ToR {{tor}}"),),
                thresholds=((0.001, "red"),),  # any event
            ),
            Panel(
                "Host ports ACTIVE per ToR",
                "RDMA ports in state ACTIVE per ToR. Bad: a step down (a link or NIC went down: alert "
                "NetdPortDown).",
                "none",
                (Target(up, legend="ToR {{tor}}"),),
            ),
        ),
    )


def _dcqcn() -> Row:
    distinct = f'count by (name) (count_values by (name) ("value", netd_dcqcn_param{{{JOB}}}))'
    actions = f"sum by (action) ({per_minute('netd_tuner_actions_total', RATE, JOB)})"
    return Row(
        "DCQCN",
        (
            Panel(
                "Distinct values of each DCQCN parameter across the fabric",
                "How many different values each DCQCN knob has over all NICs (1: uniform). netd's tuner "
                "tunes each host for its own traffic, so differences can be intended; bad: a knob with "
                "several values that nobody meant (a host missed a change, a NIC reset to its defaults).",
                "none",
                (Target(distinct, legend="{{name}}", instant=True),),
                kind="bargauge",
                thresholds=((2, "yellow"),),
                height=10,
            ),
            Panel(
                "Tuner decisions and applier results, fabric total per minute",
                "hold / change / rollback decisions and applied / apply_failed / rolled_back / "
                "crash_recovered "
                "results over all hosts. Bad: apply_failed or rollbacks (alerts NetdTunerApplyFailed, "
                "NetdTunerRolledBack); many changes at once across the fabric.",
                "short",
                (Target(actions, legend="{{action}}"),),
                height=10,
            ),
        ),
    )


def fabric_overview() -> Dashboard:
    return Dashboard(
        uid="netd-fabric",
        title="netd / Fabric overview",
        description="Where the RoCE fabric is congested, per ToR, spine and rail, and which ports are worst. "
        "Open during an incident first; click a port for its detail.",
        rows=(
            _now(),
            _levels(),
            Row("Hot spots", top_ports() + findings()),
            _fabric_wide(),
            _links(),
            _dcqcn(),
        ),
        variables=(
            Variable("job", "Job", "label_values(netd_build_info, job)", "Prometheus job(s) scraping netd."),
            Variable(
                "priority",
                "PFC priority",
                'label_values(netd_pfc_pause_frames_total{job=~"$job"}, priority)',
                "Lossless (PFC-enabled) priorities: the NIC lists pause counters only for these.",
            ),
        ),
        annotations=(("netd alerts", ALERTS_FIRING, "{{host}} {{device}}/{{port}} {{priority}} {{tor}}"),),
    )
