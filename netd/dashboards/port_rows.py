"""Port detail rows built on netd's derived signals: its congestion score and its anomaly findings.

Also home of the port detail dashboard's selectors, shared with :mod:`netd.dashboards.port_detail`.
"""

from __future__ import annotations

from netd.dashboards.fabric_queries import LEVEL_MAPPINGS, SCORE_STEPS
from netd.dashboards.grafana import Panel, Row, Target
from netd.dashboards.promql import RATE, rate

__all__ = [
    "FINDING_COLUMNS",
    "HOST",
    "NETDEV",
    "PORT",
    "PORT_LEGEND",
    "PRIO",
    "PRIO_LEGEND",
    "dcqcn_row",
    "findings_row",
    "rate_targets",
    "score_row",
]

PORT = 'instance="$instance", device=~"$device", port=~"$port"'
NETDEV = 'instance="$instance", netdev=~"$netdev"'
HOST = 'instance="$instance"'
PRIO = 'priority=~"$priority"'
PORT_LEGEND = "{{device}}/{{port}}"
PRIO_LEGEND = "{{netdev}} prio {{priority}} {{direction}}"
# Columns of a findings table (netd_anomaly_active), shared with the fabric overview.
FINDING_COLUMNS = {
    "kind": "Kind",
    "severity": "Severity",
    "device": "Device",
    "port": "Port",
    "netdev": "Netdev",
    "priority": "Priority",
    "Value": "Findings",
}


def rate_targets(
    metrics: tuple[tuple[str, str], ...], sel: str = PORT, suffix: str = PORT_LEGEND
) -> tuple[Target, ...]:
    """One target per (metric, legend prefix), rate per second over $__rate_interval."""
    return tuple(Target(rate(m, RATE, sel), legend=f"{label} {suffix}") for m, label in metrics)


def score_row() -> Row:
    return Row(
        "netd's congestion score",
        (
            Panel(
                "Congestion score per port",
                "netd's congestion score in [0, 1], smoothed: ECN-marked share, CNPs per packet, time paused "
                "and "
                "loss per packet, weighted together. Busy from 0.25, congested from 0.5, severe from 0.8. "
                "Bad: congested or severe for minutes.",
                "none",
                (Target(f"netd_port_congestion_score{{{PORT}}}", legend=PORT_LEGEND),),
                thresholds=SCORE_STEPS,
                max=1,
                decimals=2,
                width=8,
            ),
            Panel(
                "Congestion level per port",
                "The score's level, with hysteresis so it does not flap at a boundary. Bad: congested or "
                "severe; the same port there again and again (a hot receiver).",
                "none",
                (Target(f"netd_port_congestion_level{{{PORT}}}", legend=PORT_LEGEND),),
                kind="state-timeline",
                mappings=LEVEL_MAPPINGS,
                thresholds=((1, "yellow"), (2, "orange"), (3, "red")),
                max=3,
                width=8,
            ),
            Panel(
                "PFC storm flag per port",
                "netd's storm flag: the port paused almost continuously (90% of the time or more). Bad: "
                "STORM "
                "at all (alert NetdPfcStorm; runbook: PFC storm).",
                "none",
                (Target(f"netd_port_pfc_stormed{{{PORT}}}", legend=PORT_LEGEND),),
                kind="state-timeline",
                mappings=(("0", "no", "green"), ("1", "STORM", "red")),
                thresholds=((1, "red"),),
                width=8,
            ),
            Panel(
                "Inputs of the congestion score per port",
                "The score's inputs over the last tick: share of received packets CE-marked, CNPs per "
                "packet, "
                "share of time paused, losses per packet. Bad: the pause or loss input rising (DCQCN no "
                "longer "
                "absorbs the congestion); ECN marks without CNPs.",
                "percentunit",
                (Target(f"netd_port_congestion_signal{{{PORT}}}", legend=f"{{{{signal}}}} {PORT_LEGEND}"),),
                width=24,
            ),
        ),
    )


def dcqcn_row() -> Row:
    params = 'netd_dcqcn_param{instance="$instance", device=~"$device"}'
    return Row(
        "DCQCN parameters",
        (
            Panel(
                "DCQCN parameters in force per device",
                "Each DCQCN knob as last read from the NIC (mlx5 cc_params names, device units), and how "
                "often "
                "it changed over the time range (the tuner or an operator wrote it). Bad: values that differ "
                "between the ports of one host without a reason; a knob changing again and again (a tuner "
                "oscillating); CNP priority not the one your switches give CNPs.",
                "none",
                (
                    Target(params, instant=True),
                    Target(f"changes({params}[$__range])", instant=True),
                ),
                kind="table",
                width=24,
                height=10,
                columns={
                    "device": "Device",
                    "name": "Parameter",
                    "Value #A": "In force",
                    "Value #B": "Changes",
                },
                sort_by="Changes",
            ),
        ),
    )


def findings_row() -> Row:
    active = f"netd_anomaly_active{{{HOST}}}"
    tcp = rate("netd_bpf_tcp_retransmits_total", RATE, HOST)
    return Row(
        "Anomalies and host events",
        (
            Panel(
                "Active anomalies on this host",
                "Findings netd's detectors hold open for this host now (evidence and explanation: GET "
                "/v1/anomalies on the host). Bad: any critical finding (alert NetdAnomalyCritical).",
                "none",
                (Target(active, instant=True, sparse="rows only while netd holds a finding"),),
                kind="table",
                width=16,
                columns=FINDING_COLUMNS,
            ),
            Panel(
                "TCP retransmissions on this host (eBPF)",
                "Kernel TCP retransmissions per second (NCCL's bootstrap and socket traffic, not RDMA), from "
                "netd's eBPF tracepoint probe; per connection: GET /v1/flows. Bad: a sustained rate during a "
                "job (a lossy path on the TCP side, or a bad host NIC).",
                "short",
                (Target(tcp, legend="TCP retransmits", requires="bpf"),),
                width=8,
            ),
        ),
    )
