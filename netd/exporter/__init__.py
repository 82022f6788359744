"""Prometheus exposition: the pull-time collector and one module of metric families per subject.

* :mod:`netd.exporter.collector` — :class:`ExporterState` (what the loop last published) and
  :class:`NetdCollector` (builds every family afresh on each scrape);
* :mod:`netd.exporter.ethtool`, :mod:`~netd.exporter.bpf`, :mod:`~netd.exporter.congestion`,
  :mod:`~netd.exporter.anomalies` — the families of each subject, values in, metrics out.
"""

from netd.exporter.collector import ExporterState, NetdCollector

__all__ = ["ExporterState", "NetdCollector"]
