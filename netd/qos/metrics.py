"""Prometheus families of the QoS reader (docs/metrics.md#qos, docs/qos.md).

``netd_qos_setting_info{device,port,netdev,setting,value} 1`` carries every setting as its canonical
text, so `netd fabric` (and a PromQL ``count by (setting, value)``) can compare hosts; the gauges give
the per-priority and numeric settings in base units for dashboards and alerts. Built at scrape time
from the service's last reading: a scrape never touches a device.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from netd.qos.local import LOCAL_KINDS
from netd.qos.service import QosService

__all__ = ["QosCollector"]

_PORT = ["device", "port"]


class QosCollector(Collector):
    def __init__(self, service: QosService) -> None:
        self._service = service

    def collect(self) -> Iterator[Metric]:
        s = self._service
        ports, local_found, read_at = s.reading()  # one read's values, even if a refresh swaps meanwhile
        info = GaugeMetricFamily(
            "netd_qos_setting_info",
            "QoS setting of a port as the NIC applies it (canonical text in `value`; docs/qos.md).",
            labels=[*_PORT, "netdev", "setting", "value"],
        )
        per_prio = {
            name: GaugeMetricFamily(f"netd_qos_{name}_enabled", help_, labels=[*_PORT, "priority"])
            for name, help_ in (
                ("pfc", "1 when PFC is enabled on the priority."),
                ("ecn", "1 when the NIC answers CE marks with CNPs on the priority (notification point)."),
                ("dcqcn", "1 when DCQCN cuts the rate on CNPs on the priority (reaction point)."),
            )
        }
        mtu = GaugeMetricFamily("netd_qos_mtu_bytes", "MTU of the port's netdev.", labels=_PORT)
        buffers = GaugeMetricFamily(
            "netd_qos_buffer_size_bytes", "Receive buffer size (dcb buffer).", labels=[*_PORT, "buffer"]
        )
        for p in ports:
            key = [p.device, str(p.port)]
            for setting, value in p.settings().items():
                info.add_metric([*key, p.netdev or "", setting, value], 1)
            for name, prios in (("pfc", p.pfc), ("ecn", p.ecn), ("dcqcn", p.dcqcn)):
                if prios is not None:  # absent, never exported as 0 (docs/metrics.md)
                    for q in range(8):
                        per_prio[name].add_metric([*key, str(q)], float(q in prios))
            if p.mtu is not None:
                mtu.add_metric(key, p.mtu)
            for i, size in enumerate(p.buffer_size or ()):
                buffers.add_metric([*key, str(i)], size)
        yield info
        yield from per_prio.values()
        yield from (mtu, buffers)
        local = GaugeMetricFamily(
            "netd_qos_local_findings", "Local QoS inconsistencies on this host, by kind.", labels=["kind"]
        )
        for kind in LOCAL_KINDS:
            local.add_metric([kind], sum(1 for f in local_found if f.kind == kind))
        yield local
        reads = CounterMetricFamily("netd_qos_reads", "QoS reads completed.")
        reads.add_metric([], s.reads)
        errors = CounterMetricFamily(
            "netd_qos_read_errors", "QoS reads that failed, and ports whose DCB state failed to read."
        )
        errors.add_metric([], s.errors)
        yield from (reads, errors)
        if read_at is not None:
            at = GaugeMetricFamily("netd_qos_read_timestamp_seconds", "Unix time of the last good QoS read.")
            at.add_metric([], read_at)
            yield at
