"""Recording rules: per-port signals with topology labels, then sums and averages per ToR, spine, rail.

Naming follows Prometheus's ``level:metric:operations`` convention. The port level attaches
``host, netdev/device, port, tor, spine, rail`` from ``netd_port_info`` once, so every level above
is a plain ``sum by``/``avg by``/``max by`` over it. All rules sit in one group because a group
evaluates its rules in order: the level rules see this evaluation's port rules, never last minute's.

To add a signal: one :class:`PortSignal` line (its PromQL lives in :mod:`netd.dashboards.promql`),
then list it in ``SUMMED`` or give it its own level rule below.
"""

from __future__ import annotations

from dataclasses import dataclass

from netd.dashboards.promql import LEVELS, on_netdev, on_port, port_loss_events, rate
from netd.dashboards.rules import Group, Recording

__all__ = ["RECORDING_GROUPS", "WINDOW", "recording_rules"]

WINDOW = "1m"


@dataclass(frozen=True)
class PortSignal:
    name: str  # the record is port:<name>:rate1m
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


def recording_rules() -> tuple[Recording, ...]:
    ports = [Recording(port_record(s.name), s.expr) for s in PORT_SIGNALS]
    return tuple(ports + [r for level in LEVELS for r in _level_rules(level)])


RECORDING_GROUPS = (Group("netd-recording", recording_rules()),)
