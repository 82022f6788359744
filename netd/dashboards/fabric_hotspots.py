"""The fabric overview's hot spots: the worst ports by score, pause and loss; netd's findings; alerts."""

from __future__ import annotations

from netd.dashboards.fabric_queries import (
    ALERTS_FIRING,
    IDENTITY,
    JOB,
    PAUSE_STEPS,
    PORT_COLUMNS,
    PORT_DETAIL,
    RANGE,
    SCORE_STEPS,
    ecn_share,
    pause_share,
)
from netd.dashboards.grafana import Link, Panel, Target
from netd.dashboards.port_rows import FINDING_COLUMNS
from netd.dashboards.promql import RATE, on_port, port_loss_events, rate

__all__ = ["findings", "top_ports"]


def top_ports() -> tuple[Panel, ...]:
    worst = f"topk(10, max by ({IDENTITY}) ({pause_share(RANGE)}))"
    ecn = f"({ecn_share(IDENTITY, RANGE)}) and on(instance, device, port) {worst}"
    cnp = on_port(rate("netd_rdma_cnp_handled_total", RANGE, JOB))
    cnp = f"sum by ({IDENTITY}) ({cnp}) and on(instance, device, port) {worst}"
    score = f"topk(10, max by ({IDENTITY}) ({on_port(f'netd_port_congestion_score{{{JOB}}}')}))"
    level = on_port(f"netd_port_congestion_level{{{JOB}}}")
    level = f"max by ({IDENTITY}) ({level}) and on(instance, device, port) {score}"
    link = (Link("Port detail", PORT_DETAIL),)
    return (
        Panel(
            "Top 10 ports by congestion score now",
            "netd's per-port congestion score (0 to 1, from ECN marks, CNPs, pause time and loss; busy from "
            "0.25, congested from 0.5, severe from 0.8) and level. Bad: ports at congested or severe; many "
            "of them under one ToR. Click a row for the port's detail.",
            "none",
            (Target(score, instant=True), Target(level, instant=True)),
            kind="table",
            width=12,
            height=9,
            links=link,
            columns={**PORT_COLUMNS, "Value #A": "Score", "Value #B": "Level"},
            sort_by="Score",
            decimals=2,
            thresholds=SCORE_STEPS,
            mappings=(),
        ),
        Panel(
            "Top 10 ports by share of time paused (received PFC) over the time range",
            "The ports PFC held back longest over the dashboard's time range, with their ECN-marked share "
            "and "
            "the CNPs they reacted to. Bad: a port paused more than 10% of the time; a port paused a lot "
            "with "
            "few ECN marks of its own suggests pause arriving from elsewhere (spreading or a storm).",
            "percentunit",
            (Target(worst, instant=True), Target(ecn, instant=True), Target(cnp, instant=True)),
            kind="table",
            width=12,
            height=9,
            links=link,
            columns={
                **PORT_COLUMNS,
                "Value #A": "Paused",
                "Value #B": "ECN-marked",
                "Value #C": "CNPs handled/s",
            },
            sort_by="Paused",
            column_units=(("CNPs handled/s", "pps"),),
            thresholds=PAUSE_STEPS,
        ),
        Panel(
            "Top 10 ports by RoCE loss events over the time range",
            "Out-of-sequence packets, NAK sequence errors, retransmissions and ACK timeouts per second. Bad: "
            "anything above 0 on a lossless fabric (alert NetdRoceLoss). Click a row for the port's detail.",
            "pps",
            (Target(f"topk(10, {on_port(port_loss_events(RANGE, JOB))})", instant=True),),
            kind="table",
            width=12,
            height=9,
            links=link,
            columns={**PORT_COLUMNS, "Value": "Loss events/s"},
            sort_by="Loss events/s",
            thresholds=((0.001, "red"),),
        ),
    )


def findings() -> tuple[Panel, ...]:
    active = f"netd_anomaly_active{{{JOB}}}"
    opened = f"sum by (kind, severity) ({rate('netd_anomalies_total', RATE, JOB)})"
    return (
        Panel(
            "Active anomalies (netd's detectors)",
            "Findings netd's detectors hold open now, per host, port and priority (evidence: GET "
            "/v1/anomalies on the host). Bad: any critical row (alert NetdAnomalyCritical); many warnings "
            "of one kind across hosts.",
            "none",
            (Target(active, instant=True, sparse="rows only while netd holds a finding"),),
            kind="table",
            width=12,
            height=8,
            columns={"instance": "instance", **FINDING_COLUMNS},
        ),
        Panel(
            "Anomalies opened per second by kind and severity",
            "Rate at which netd's detectors open (or escalate) findings. Bad: a burst of one kind on many "
            "hosts at once (a fabric-wide event); a steady stream of a kind (a chronic problem).",
            "short",
            (Target(opened, legend="{{kind}} {{severity}}"),),
            width=12,
            height=8,
        ),
        Panel(
            "Firing netd alerts",
            "netd alerts firing now, with the port and priority each names (the runbook link is in the "
            "alert). Bad: any row.",
            "none",
            (Target(ALERTS_FIRING, instant=True, sparse="rows only while an alert fires"),),
            kind="table",
            width=24,
            height=6,
            columns={
                "alertname": "Alert",
                "severity": "Severity",
                "host": "Host",
                "device": "Device",
                "port": "Port",
                "netdev": "Netdev",
                "priority": "Priority",
                "tor": "ToR",
            },
        ),
    )
