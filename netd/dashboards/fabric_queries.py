"""The fabric overview's shared pieces: selectors, colour steps, level names, and two PromQL signals."""

from __future__ import annotations

from netd.dashboards.promql import on_netdev, on_port, rate

__all__ = [
    "ALERTS_FIRING",
    "ECN_STEPS",
    "IDENTITY",
    "JOB",
    "LEVEL_MAPPINGS",
    "LEVEL_NAMES",
    "PAUSE_STEPS",
    "PORT_COLUMNS",
    "PORT_DETAIL",
    "PRIO",
    "RANGE",
    "SCORE_STEPS",
    "ecn_share",
    "pause_share",
]

JOB = 'job=~"$job"'
PRIO = 'priority=~"$priority"'
RANGE = "$__range"
PORT_DETAIL = (
    "/d/netd-port/netd-host-and-port-detail?var-instance=${__data.fields.instance}"
    "&var-device=${__data.fields.device}&var-port=${__data.fields.port}&${__url_time_range}"
)
IDENTITY = "instance, host, device, port, netdev, tor"
PAUSE_STEPS = ((0.02, "yellow"), (0.1, "red"))
ECN_STEPS = ((0.01, "yellow"), (0.05, "red"))
# netd's congestion score enters busy / congested / severe at 0.25 / 0.5 / 0.8 (netd.congestion.scorer)
SCORE_STEPS = ((0.25, "yellow"), (0.5, "orange"), (0.8, "red"))
LEVEL_MAPPINGS = (
    ("0", "ok", "green"),
    ("1", "busy", "yellow"),
    ("2", "congested", "orange"),
    ("3", "severe", "red"),
)
LEVEL_NAMES = {"tor": "ToR", "spine": "Spine", "rail": "Rail"}
ALERTS_FIRING = 'ALERTS{alertname=~"Netd.*", alertstate="firing"}'
PORT_COLUMNS = {
    "host": "Host",
    "device": "Device",
    "port": "Port",
    "netdev": "Netdev",
    "tor": "ToR",
    "instance": "instance",
}


def pause_share(window: str) -> str:
    """Share of time each port was paused by its switch on the chosen priorities (netdev-keyed, joined)."""
    return on_netdev(rate("netd_pfc_pause_duration_seconds_total", window, JOB, 'direction="rx"', PRIO))


def ecn_share(by: str, window: str) -> str:
    """CE-marked share of received RoCE packets, grouped ``by``; no sample for an idle group."""
    ecn = on_port(rate("netd_rdma_ecn_marked_packets_total", window, JOB))
    rx = on_port(rate("netd_rdma_rx_packets_total", window, JOB))
    return f"sum by ({by}) ({ecn}) / (sum by ({by}) ({rx}) > 0)"
