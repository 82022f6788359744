"""Prometheus families for anomaly findings (registered from NetdCollector).

* ``netd_anomaly_active{kind,device,port,netdev,priority,severity}`` — active findings with those
  labels (1; more when one port has several findings of a kind, e.g. two saturated counters, whose
  names are in the API, not in labels). Host-level findings (a failed source) have empty port labels.
* ``netd_anomalies_total{kind,severity}`` — findings opened, and escalations to a severity a finding
  had not reached before; every kind and severity starts at 0 so ``increase()`` sees the first one.
* the fast path's own cost: samples, CPU seconds and interval; detector exceptions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from netd.config.detect import DetectConfig
from netd.detect.engine import default_detectors
from netd.detect.findings import AnomalyState, Severity

__all__ = ["KINDS", "anomaly_families"]

KINDS: tuple[str, ...] = tuple(k for d in default_detectors(DetectConfig()) for k in d.kinds)
_LABELS = ["kind", "device", "port", "netdev", "priority", "severity"]


def _text(value: object) -> str:
    return "" if value is None else str(value)


def anomaly_families(state: AnomalyState | None) -> Iterator[Metric]:
    if state is None:
        return
    active = GaugeMetricFamily(
        "netd_anomaly_active", "Active anomaly findings (see /v1/anomalies for evidence).", labels=_LABELS
    )
    counts: Counter[tuple[str, ...]] = Counter()
    for f in state.active:
        s = f.scope
        counts[
            (f.kind, _text(s.device), _text(s.port), _text(s.netdev), _text(s.priority), f.severity.value)
        ] += 1
    for labels, n in sorted(counts.items()):
        active.add_metric(list(labels), n)
    yield active
    total = CounterMetricFamily(
        "netd_anomalies",
        "Anomaly findings opened (and escalated), by kind and severity.",
        labels=["kind", "severity"],
    )
    for kind in sorted(set(KINDS) | {k for k, _ in state.totals}):
        for sev in Severity:
            total.add_metric([kind, sev.value], state.totals.get((kind, sev.value), 0))
    yield total
    interval = GaugeMetricFamily(
        "netd_anomaly_fast_path_interval_seconds",
        "Interval of the PFC fast path between ticks in force (0: off); while calm, stretched past "
        "fast_calm_interval when calm samples would cost more than fast_calm_cpu_budget.",
    )
    interval.add_metric([], state.fast_interval_s)
    yield interval
    samples = CounterMetricFamily("netd_anomaly_fast_path_samples", "PFC fast-path samples taken.")
    samples.add_metric([], state.fast_samples)
    yield samples
    calm = CounterMetricFamily(
        "netd_anomaly_fast_path_calm_samples",
        "PFC fast-path samples in which no pause statistic moved, so nothing was evaluated.",
    )
    calm.add_metric([], state.fast_calm_samples)
    yield calm
    cpu = CounterMetricFamily(
        "netd_anomaly_fast_path_cpu_seconds", "CPU time spent in fast-path samples (read and evaluate)."
    )
    cpu.add_metric([], state.fast_cpu_seconds)
    yield cpu
    errors = CounterMetricFamily(
        "netd_anomaly_detector_errors",
        "Exceptions raised by a detector (its last findings are kept).",
        labels=["detector"],
    )
    for name, n in sorted(state.detector_errors.items()):
        errors.add_metric([name], n)
    yield errors
