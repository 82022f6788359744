"""Prometheus families of the HTTP listener's own defences: connections refused, evicted and timed
out (netd.api.connections) and requests refused by the guard (netd.api.guard), by reason."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from netd.api.connections import ConnectionStats
from netd.api.guard import GuardLimits

__all__ = ["HttpCollector"]


class HttpCollector(Collector):
    def __init__(self, connections: ConnectionStats, guard: GuardLimits) -> None:
        self.connections, self.guard = connections, guard

    def collect(self) -> Iterator[Metric]:
        c = self.connections
        for name, help_, value in (
            (
                "refused",
                "Connections answered 503 at accept: the limit was reached and none was idle.",
                c.refused,
            ),
            ("evicted", "Idle connections closed to make room for a new one at the limit.", c.evicted),
            (
                "timed_out",
                "Connections closed because a request head or body missed its deadline.",
                c.timed_out,
            ),
        ):
            family = CounterMetricFamily(f"netd_http_connections_{name}", help_)
            family.add_metric([], value)
            yield family
        invalid = CounterMetricFamily(
            "netd_http_requests_invalid",
            "Requests that were not HTTP, answered 400 and closed (logged at most once a minute).",
        )
        invalid.add_metric([], c.invalid)
        yield invalid
        open_ = GaugeMetricFamily("netd_http_connections_open", "Client connections open (at the last tick).")
        open_.add_metric([], c.open)
        yield open_
        rejected = CounterMetricFamily(
            "netd_http_requests_rejected",
            "Requests refused before their body was read, by reason (host, busy, auth, too_large, too_deep).",
            labels=["reason"],
        )
        for reason, value in sorted(self.guard.stats.items()):
            rejected.add_metric([reason], value)
        yield rejected
