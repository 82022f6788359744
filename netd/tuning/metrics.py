"""Prometheus families of the tuner (docs/metrics.md, docs/tuning.md).

``netd_dcqcn_param{device,name}``: each DCQCN parameter in force as last read from the device (in the
device's units; see the vocabulary in netd.vocabulary.dcqcn_knobs). ``netd_tuner_actions_total{action}``: the
tuner's decisions (hold, change, rollback) and the applier's results (applied, apply_failed,
rolled_back, crash_recovered, apply_refused, recovery_needed) since start.
``netd_tuner_recovery_needed{device}``: 1 while a change set touching the device is open in the
journal and not yet put back (docs/tuning.md: recovery needed), else 0. Built at scrape time from
the service's last reads: a scrape never touches a device.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from netd.tuning.service import TuningService

__all__ = ["TuningCollector"]


class TuningCollector(Collector):
    def __init__(self, service: TuningService) -> None:
        self._service = service

    def collect(self) -> Iterator[Metric]:
        params = GaugeMetricFamily(
            "netd_dcqcn_param",
            "DCQCN parameter in force on the device (mlx5 cc_params name, device units).",
            labels=["device", "name"],
        )
        for device, values in sorted(self._service.values.items()):
            for name, value in sorted(values.items()):
                params.add_metric([device, name], value)
        yield params
        actions = CounterMetricFamily(
            "netd_tuner_actions", "DCQCN tuner decisions and applier results since start.", labels=["action"]
        )
        for action, count in sorted(self._service.actions.items()):
            actions.add_metric([action], count)
        yield actions
        recovery = GaugeMetricFamily(
            "netd_tuner_recovery_needed",
            "1 while a DCQCN change set on the device is open in the journal (netd tune --recover).",
            labels=["device"],
        )
        pending = self._service.recovery
        open_on = {w.device for w in pending["writes"]} if pending else set()
        for tree in self._service.applier.trees:
            recovery.add_metric([tree.device], 1.0 if tree.device in open_on else 0.0)
        yield recovery
