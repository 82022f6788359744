"""Prometheus families of `netd fabric`: its own refresh health and the cluster's ToR/spine scores."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from netd import __version__
from netd.cluster.stats import FabricStats, FabricSummary
from netd.congestion.scorer import LEVELS

__all__ = ["FabricCollector", "ObservedView"]


class ObservedView(Protocol):
    """What the collector reads of a cluster view (FabricView, or RemoteFabricView in the listener)."""

    @property
    def stats(self) -> FabricStats: ...

    def summary(self) -> FabricSummary | None: ...


class FabricCollector(Collector):
    """Self-metrics of the fabric service and the cluster's ToR/spine scores."""

    def __init__(self, view: ObservedView) -> None:
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
        restarts = CounterMetricFamily(
            "netd_fabric_view_restarts", "Times the view's process exited or hung and was started again."
        )
        restarts.add_metric([], st.restarts)
        duration = GaugeMetricFamily(
            "netd_fabric_refresh_duration_seconds", "Wall time of the last good refresh."
        )
        duration.add_metric([], st.last_duration_s)
        yield from (refreshes, errors, restarts, duration)
        summary = self.view.summary()
        if summary is None:
            return
        hosts = GaugeMetricFamily("netd_fabric_hosts", "Hosts whose netd ports Prometheus has.")
        hosts.add_metric([], summary.hosts)
        yield hosts
        for scope, items in (("tor", summary.tors), ("spine", summary.spines)):
            help_ = f"Congestion score of each {scope} over all its hosts."
            score = GaugeMetricFamily(f"netd_fabric_{scope}_congestion_score", help_, labels=[scope])
            level = GaugeMetricFamily(
                f"netd_fabric_{scope}_congestion_level",
                "0 ok, 1 busy, 2 congested, 3 severe.",
                labels=[scope],
            )
            for name, smoothed, level_name in items:
                score.add_metric([name], smoothed)
                level.add_metric([name], LEVELS.index(level_name))
            yield from (score, level)
