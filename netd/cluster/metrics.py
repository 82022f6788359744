"""Prometheus families of `netd fabric`: its own refresh health and the cluster's ToR/spine scores."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from netd import __version__
from netd.cluster.view import FabricView
from netd.congestion.scorer import LEVELS

__all__ = ["FabricCollector"]


class FabricCollector(Collector):
    """Self-metrics of the fabric service and the cluster's ToR/spine scores."""

    def __init__(self, view: FabricView) -> None:
        self.view = view

    def collect(self) -> Iterator[Metric]:
        build = GaugeMetricFamily("netd_build_info", "netd build information.", labels=["version"])
        build.add_metric([__version__], 1)
        yield build
        st = self.view.stats
        refreshes = CounterMetricFamily("netd_fabric_refreshes", "Refreshes from Prometheus attempted.")
        refreshes.add_metric([], st.refreshes)
        errors = CounterMetricFamily("netd_fabric_refresh_errors", "Refreshes that failed.")
        errors.add_metric([], st.errors)
        duration = GaugeMetricFamily(
            "netd_fabric_refresh_duration_seconds", "Wall time of the last good refresh."
        )
        duration.add_metric([], st.last_duration_s)
        yield from (refreshes, errors, duration)
        snap = self.view.current()
        if snap is None or snap.congestion is None or snap.topology is None:
            return
        hosts = GaugeMetricFamily("netd_fabric_hosts", "Hosts whose netd ports Prometheus has.")
        hosts.add_metric([], len(snap.topology.hosts))
        yield hosts
        for scope in ("tor", "spine"):
            help_ = f"Congestion score of each {scope} over all its hosts."
            score = GaugeMetricFamily(f"netd_fabric_{scope}_congestion_score", help_, labels=[scope])
            level = GaugeMetricFamily(
                f"netd_fabric_{scope}_congestion_level",
                "0 ok, 1 busy, 2 congested, 3 severe.",
                labels=[scope],
            )
            for s in snap.congestion.scope(scope):
                score.add_metric([s.name], s.smoothed)
                level.add_metric([s.name], LEVELS.index(s.level))
            yield from (score, level)
