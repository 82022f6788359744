"""Recording rules: per-port signals with topology labels, then sums and averages per ToR, spine, rail.

Naming follows Prometheus's ``level:metric:operations`` convention. The port level attaches
``host, netdev/device, port, tor, spine, rail`` from ``netd_port_info`` once, so every level above
is a plain ``sum by``/``avg by``/``max by`` over it. All rules sit in one group because a group
evaluates its rules in order: the level rules see this evaluation's port rules, never last minute's.

Window: one fixed range, :data:`WINDOW` = 4 minutes, for every scrape interval from 5 s to 60 s.
``rate()`` needs two samples in its range and should have a few more (a missed scrape must not
empty it), so the range must be at least 4x the scrape interval; 4 minutes is that for Prometheus'
default 60 s. A window per scrape interval would give the same record different names (or the same
name different meanings) at different sites, and the alerts' thresholds and ``for:`` were set
against one smoothing; a fixed window keeps one rule file valid everywhere, as the Prometheus
monitoring mixins do. Faster reactions come from netd's own detectors (``netd_anomaly_active``),
not from shorter windows here.

To add a signal: one :class:`PortSignal` line (its PromQL lives in :mod:`netd.dashboards.promql`),
then list it in ``SUMMED`` or give it its own level rule below.
"""

from __future__ import annotations

from dataclasses import dataclass

from netd.dashboards.promql import LEVELS, on_netdev, on_port, port_loss_events, rate
from netd.dashboards.rules import Group, Recording

__all__ = ["RECORDING_GROUPS", "WINDOW", "recording_rules"]

WINDOW = "4m"  # >= 4 x the longest supported scrape interval (60 s); see the module doc


@dataclass(frozen=True)
class PortSignal:
    name: str  # the record is port:<name>:rate4m
    expr: str


PORT_SIGNALS = (
    PortSignal("netd_rdma_rx_bits", on_port(f"8 * {rate('netd_rdma_rx_bytes_total', WINDOW)}")),
    PortSignal("netd_rdma_tx_bits", on_port(f"8 * {rate('netd_rdma_tx_bytes_total', WINDOW)}")),
    PortSignal("netd_rdma_rx_packets", on_port(rate("netd_rdma_rx_packets_total", WINDOW))),
    PortSignal("netd_rdma_ecn_marked_packets", on_port(rate("netd_rdma_ecn_marked_packets_total", WINDOW))),
    PortSignal("netd_rdma_cnp_sent", on_port(rate("netd_rdma_cnp_sent_total", WINDOW))),
    PortSignal("netd_rdma_cnp_handled", on_port(rate("netd_rdma_cnp_handled_total", WINDOW))),
    PortSignal("netd_rdma_loss_events", on_port(port_loss_events(WINDOW))),
    # seconds paused per second = the share of time paused, per priority and direction
    PortSignal("netd_pfc_pause_fraction", on_netdev(rate("netd_pfc_pause_duration_seconds_total", WINDOW))),
)
# port signals whose per-level value is the sum over the level's ports
SUMMED = (
    "netd_rdma_rx_bits",
    "netd_rdma_tx_bits",
    "netd_rdma_ecn_marked_packets",
    "netd_rdma_cnp_sent",
    "netd_rdma_cnp_handled",
    "netd_rdma_loss_events",
)


def port_record(name: str) -> str:
    return f"port:{name}:rate{WINDOW}"


def _level_rules(level: str) -> list[Recording]:
    out = [Recording(f"{level}:{n}:rate{WINDOW}", f"sum by ({level}) ({port_record(n)})") for n in SUMMED]
    ecn, rx = port_record("netd_rdma_ecn_marked_packets"), port_record("netd_rdma_rx_packets")
    # share of received RoCE packets that arrived CE-marked; no sample (not NaN) for an idle level
    out.append(
        Recording(
            f"{level}:netd_rdma_ecn_marked:ratio{WINDOW}",
            f"sum by ({level}) ({ecn}) / (sum by ({level}) ({rx}) > 0)",
        )
    )
    pause = port_record("netd_pfc_pause_fraction")
    for agg in ("avg", "max"):
        out.append(
            Recording(
                f"{level}:netd_pfc_pause_fraction:{agg}{WINDOW}",
                f"{agg} by ({level}, priority, direction) ({pause})",
            )
        )
    # netd's own per-port congestion score (0..1) and level (0 ok .. 3 severe), gauges: no window
    for metric, aggs in (
        ("netd_port_congestion_score", ("max", "avg")),
        ("netd_port_congestion_level", ("max",)),
    ):
        for agg in aggs:
            out.append(
                Recording(f"{level}:{metric}:{agg}", f"{agg} by ({level}) ({on_port(metric, (level,))})")
            )
    return out


def _tor_fleet_rules() -> list[Recording]:
    """One series per ToR (or per ToR, priority and direction) for fleet-scale queries.

    A fabric of thousands of ports is read per ToR first: ``netd fabric``, the fabric dashboard and an
    engineer's ad-hoc query sum these instead of joining every port's raw counters again. Counts are
    ``sum(... >= bool ...)`` so a ToR with no congested port reads 0 rather than having no sample.
    """
    frames = on_netdev(rate("netd_pfc_pause_frames_total", WINDOW))
    up = on_port("netd_port_up", ("tor",))
    level = on_port("netd_port_congestion_level", ("tor",))
    return [
        Recording(f"tor:netd_pfc_pause_frames:rate{WINDOW}", f"sum by (tor, priority, direction) ({frames})"),
        Recording("tor:netd_ports:count", f"count by (tor) ({up})"),
        Recording("tor:netd_port_up:sum", f"sum by (tor) ({up})"),
        # level 2 is "congested" in netd's one vocabulary (docs/metrics.md): congested or severe
        Recording("tor:netd_ports_congested:count", f"sum by (tor) ({level} >= bool 2)"),
    ]


def recording_rules() -> tuple[Recording, ...]:
    ports = [Recording(port_record(s.name), s.expr) for s in PORT_SIGNALS]
    return tuple(ports + [r for level in LEVELS for r in _level_rules(level)] + _tor_fleet_rules())


RECORDING_GROUPS = (Group("netd-recording", recording_rules()),)
