"""Prometheus families for topology and congestion: the ``tor``/``spine``/``rail`` labels of
``netd_port_info`` and the per-port congestion score, level, signals and PFC-storm flag.

Only per-port values are exported: a host sees only its own ports under a ToR, so a ToR's or a
spine's score is computed where every host is visible, by a recording rule over these series or by
``netd fabric`` (which reads ``netd_port_congestion_signal`` and applies the same formula).
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric

from netd.congestion.scorer import LEVELS, CongestionReport
from netd.model.topology import Topology

__all__ = ["congestion_families", "topology_labels"]


def topology_labels(topology: Topology | None, device: str, port: int) -> list[str]:
    """[tor, spine, rail] label values of one port ('' where unknown)."""
    place = topology.placement(device, port) if topology is not None else None
    if place is None:
        return ["", "", ""]
    return [place.tor or "", place.spine or "", "" if place.rail is None else str(place.rail)]


def congestion_families(report: CongestionReport | None) -> Iterator[Metric]:
    if report is None:
        return
    labels = ["device", "port"]
    score = GaugeMetricFamily(
        "netd_port_congestion_score",
        "Congestion score of the port in [0, 1], smoothed (EWMA); formula in docs/service.md.",
        labels=labels,
    )
    level = GaugeMetricFamily(
        "netd_port_congestion_level",
        "Congestion level with hysteresis: 0 ok, 1 busy, 2 congested, 3 severe.",
        labels=labels,
    )
    signal = GaugeMetricFamily(
        "netd_port_congestion_signal",
        "Inputs of the score over the last tick: ce_fraction, cnp_per_packet, pause_fraction, "
        "loss_per_packet.",
        labels=[*labels, "signal"],
    )
    storm = GaugeMetricFamily(
        "netd_port_pfc_stormed", "1 while the port is paused almost continuously (PFC storm).", labels=labels
    )
    for s in report.ports:
        key = [s.labels.get("device", ""), s.labels.get("port", "")]
        score.add_metric(key, s.smoothed)
        level.add_metric(key, LEVELS.index(s.level))
        storm.add_metric(key, 1 if s.stormed else 0)
        for name, value in s.signals.items():
            if value is not None:
                signal.add_metric([*key, name], value)
    yield from (score, level, signal, storm)
