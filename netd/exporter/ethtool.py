"""Prometheus families for the netdev (ethtool) side: PFC, pause, discards, link.

Priority and direction are labels (docs/metrics.md), unlike node_exporter's ethtool
collector, which puts them in the metric name. Only the netdevs of RDMA ports
are exported, from the series layer's monotonic totals.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, Metric

from netd.series.tracker import Observation
from netd.vocabulary.ethtool_names import parse_signals

__all__ = ["ethtool_families"]

_PRIO = ["netdev", "priority", "direction"]


def ethtool_families(obs: Observation) -> Iterator[Metric]:
    frames = CounterMetricFamily(
        "netd_pfc_pause_frames", "PFC pause frames per priority (rx: received from the peer).", labels=_PRIO
    )
    duration = CounterMetricFamily(
        "netd_pfc_pause_duration_seconds",
        "Time paused (rx) or pausing the peer (tx) per priority.",
        labels=_PRIO,
    )
    transitions = CounterMetricFamily(
        "netd_pfc_pause_transitions", "Xoff to Xon transitions per priority.", labels=_PRIO
    )
    prio_bytes = CounterMetricFamily("netd_priority_bytes", "Bytes per priority at the PHY.", labels=_PRIO)
    prio_packets = CounterMetricFamily(
        "netd_priority_packets", "Packets per priority at the PHY.", labels=_PRIO
    )
    prio_discards = CounterMetricFamily(
        "netd_priority_discards", "Packets discarded per priority (no buffer).", labels=_PRIO
    )
    gframes = CounterMetricFamily(
        "netd_pause_frames", "IEEE 802.3x global pause frames.", labels=["netdev", "direction"]
    )
    gduration = CounterMetricFamily(
        "netd_pause_duration_seconds", "Time under 802.3x global pause.", labels=["netdev", "direction"]
    )
    storms = CounterMetricFamily(
        "netd_pause_storm_events",
        "NIC pause-storm watermark events (warning: minor stall watermark; error: critical, pause stopped).",
        labels=["netdev", "severity"],
    )
    discards = CounterMetricFamily(
        "netd_phy_discards",
        "Packets discarded at the PHY for lack of buffer.",
        labels=["netdev", "direction"],
    )
    link_down = CounterMetricFamily(
        "netd_link_down_events", "Link down events at the PHY.", labels=["netdev"]
    )
    phy_errors = CounterMetricFamily("netd_phy_errors", "PHY receive errors.", labels=["netdev", "kind"])

    for netdev, view in sorted(obs.netdevs.items()):
        s = parse_signals(view.totals)
        for table, family, unit in (
            (s.pause_frames, frames, 1.0),
            (s.pause_duration_us, duration, 1e-6),
            (s.pause_transitions, transitions, 1.0),
            (s.bytes, prio_bytes, 1.0),
            (s.packets, prio_packets, 1.0),
            (s.discards, prio_discards, 1.0),
        ):
            for (direction, prio), value in sorted(table.items()):
                family.add_metric([netdev, str(prio), direction], value * unit)
        for direction, value in sorted(s.global_pause_frames.items()):
            gframes.add_metric([netdev, direction], value)
        for direction, value in sorted(s.global_pause_duration_us.items()):
            gduration.add_metric([netdev, direction], value * 1e-6)
        for severity, maybe in (
            ("warning", s.pause_storm_warning_events),
            ("error", s.pause_storm_error_events),
        ):
            if maybe is not None:
                storms.add_metric([netdev, severity], maybe)
        for direction, maybe in (("rx", s.rx_discards_phy), ("tx", s.tx_discards_phy)):
            if maybe is not None:
                discards.add_metric([netdev, direction], maybe)
        if s.link_down_events_phy is not None:
            link_down.add_metric([netdev], s.link_down_events_phy)
        for kind, maybe in (("crc", s.rx_crc_errors_phy), ("symbol", s.rx_symbol_err_phy)):
            if maybe is not None:
                phy_errors.add_metric([netdev, kind], maybe)
    yield from (
        frames,
        duration,
        transitions,
        prio_bytes,
        prio_packets,
        prio_discards,
        gframes,
        gduration,
        storms,
        discards,
        link_down,
        phy_errors,
    )
