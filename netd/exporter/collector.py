"""Prometheus exposition of the latest observation (a pull-time collector).

Like client_python's own collectors, :class:`NetdCollector` builds its metric
families afresh on every scrape from whatever the loop last published; no
state is kept between scrapes, and a scrape never touches a source.

Counters are exported from the series layer's monotonic *totals*, not the raw
readings, so 32-bit wraps and driver resets never look like a counter reset to
Prometheus. Missing counters are omitted, never exported as 0 (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from netd import __version__
from netd.daemon.state import PublishedState
from netd.exporter.anomalies import anomaly_families
from netd.exporter.bpf import bpf_families
from netd.exporter.congestion import congestion_families, topology_labels
from netd.exporter.ethtool import ethtool_families
from netd.model.snapshot import CounterGroup
from netd.model.topology import Topology
from netd.series.tracker import Observation, PortView
from netd.vocabulary.metric_names import PMA_ERROR_KINDS, RDMA_COUNTERS

__all__ = ["NetdCollector"]


class NetdCollector(Collector):
    def __init__(self, state: Callable[[], PublishedState | None]) -> None:
        self._state = state

    def collect(self) -> Iterator[Metric]:
        build = GaugeMetricFamily("netd_build_info", "netd build information.", labels=["version"])
        build.add_metric([__version__], 1)
        yield build
        st = self._state()
        if st is None:
            return
        obs = st.observation
        yield from _port_families(obs, st.topology)
        yield from _rdma_counter_families(obs.ports)
        yield from ethtool_families(obs)
        yield from _self_families(st)
        yield from congestion_families(st.congestion)
        yield from bpf_families(obs.snapshot.bpf)
        yield from anomaly_families(st.anomalies)


def _port_families(obs: Observation, topology: Topology | None = None) -> Iterator[Metric]:
    snap = obs.snapshot
    info = GaugeMetricFamily(
        "netd_port_info",
        'RDMA port identity; join on device and port. emulated="true" when netd runs its emulated fabric.',
        labels=[
            "device",
            "port",
            "netdev",
            "link_layer",
            "state",
            "phys_state",
            "driver",
            "host",
            "emulated",
            "tor",
            "spine",
            "rail",
        ],
    )
    up = GaugeMetricFamily("netd_port_up", "1 when the port state is ACTIVE.", labels=["device", "port"])
    speed = GaugeMetricFamily(
        "netd_port_speed_bytes",
        "Port rate as the driver reports it, in bytes per second (as node_network_speed_bytes).",
        labels=["device", "port"],
    )
    sat = GaugeMetricFamily(
        "netd_counter_saturated",
        "1 when a counter is stuck at its width's maximum: its rate is unknown, not zero.",
        labels=["device", "port", "kind"],
    )
    emulated = "true" if snap.emulated else "false"
    for v in obs.ports:
        p = v.sample
        labels = [p.device, str(p.port)]
        info.add_metric(
            [
                *labels,
                p.netdev or "",
                p.link_layer or "",
                p.state or "",
                p.phys_state or "",
                p.driver or "",
                snap.host,
                emulated,
                *topology_labels(topology, p.device, p.port),
            ],
            1,
        )
        if p.state is not None:
            up.add_metric(labels, 1 if p.up else 0)
        if p.rate_gbps is not None:
            speed.add_metric(labels, p.rate_gbps * 1e9 / 8)
        for raw in sorted(v.saturated):
            sat.add_metric([*labels, raw], 1)
    yield from (info, up, speed, sat)


def _rdma_counter_families(views: tuple[PortView, ...]) -> Iterator[Metric]:
    families: dict[str, CounterMetricFamily] = {}

    def family(name: str, help_: str, kind: bool) -> CounterMetricFamily:
        if name not in families:
            labels = ["device", "port", "kind"] if kind else ["device", "port"]
            families[name] = CounterMetricFamily(name, help_, labels=labels)
        return families[name]

    for v in views:
        p = v.sample
        labels = [p.device, str(p.port)]
        done: set[str] = set()  # one series per vocabulary name (PMA reading first)
        for raw, c in p.counters.items():
            total = v.totals.get(raw)
            if total is None or c.name in done:
                continue
            done.add(c.name)
            m = RDMA_COUNTERS.get(c.name)
            if m is not None:
                fam = family(m.name, m.help, m.kind is not None)
                fam.add_metric(labels + ([m.kind] if m.kind else []), total)
            elif c.group is CounterGroup.PMA and c.name in PMA_ERROR_KINDS:
                family("netd_rdma_port_errors", "IB PMA port error counters.", True).add_metric(
                    [*labels, c.name], total
                )
            elif c.name == "port_xmit_wait":
                family(
                    "netd_rdma_xmit_wait_ticks",
                    "PMA ticks with data to send but no credit to send it.",
                    False,
                ).add_metric(labels, total)
            else:
                family(
                    "netd_rdma_driver_stat", "Driver counters without a netd name, by raw file name.", True
                ).add_metric([*labels, raw], total)
    yield from families.values()


def _self_families(st: PublishedState) -> Iterator[Metric]:
    snap = st.observation.snapshot
    tick = GaugeMetricFamily("netd_tick_duration_seconds", "Wall time the last tick took to collect.")
    tick.add_metric([], snap.tick_duration_s)
    yield tick
    ticks = CounterMetricFamily("netd_ticks", "Ticks completed since start.")
    ticks.add_metric([], st.ticks)
    yield ticks
    last = GaugeMetricFamily("netd_last_tick_timestamp_seconds", "Wall-clock time of the last snapshot.")
    last.add_metric([], snap.timestamp)
    yield last
    emu = GaugeMetricFamily("netd_fabric_emulated", "1 when the counters come from netd's emulated fabric.")
    emu.add_metric([], 1 if snap.emulated else 0)
    yield emu
    up = GaugeMetricFamily("netd_source_up", "1 when the source's last read succeeded.", labels=["source"])
    dur = GaugeMetricFamily(
        "netd_source_duration_seconds", "Wall time of the source's last read.", labels=["source"]
    )
    for s in snap.sources:
        up.add_metric([s.source], 1 if s.ok else 0)
        dur.add_metric([s.source], s.duration_s)
    yield up
    yield dur
    errs = CounterMetricFamily("netd_source_errors", "Failed source reads since start.", labels=["source"])
    for source in sorted({s.source for s in snap.sources} | set(st.source_errors)):
        errs.add_metric([source], st.source_errors.get(source, 0))
    yield errs
    yield from _health_families(st)


COUNTER_EVENTS = ("wrap", "held", "discarded", "reset", "jump")


def _health_families(st: PublishedState) -> Iterator[Metric]:
    """The loop's cadence (netd.daemon.health) and what the counter model did (docs/metrics.md)."""
    h = st.health
    late = CounterMetricFamily("netd_ticks_late", "Ticks that started over 10 % of the interval late.")
    late.add_metric([], h.late)
    yield late
    skipped = CounterMetricFamily("netd_ticks_skipped", "Tick slots that passed with no tick (loop behind).")
    skipped.add_metric([], h.skipped)
    yield skipped
    passed = CounterMetricFamily(
        "netd_tick_slots_passed", "Tick slots passed over on purpose while the host was calm (calm_interval)."
    )
    passed.add_metric([], h.passed)
    yield passed
    calm = GaugeMetricFamily(
        "netd_tick_calm", "1 while the host is calm and ticks are calm_interval apart, else 0."
    )
    calm.add_metric([], 1.0 if h.calm else 0.0)
    yield calm
    hist = HistogramMetricFamily(
        "netd_tick_processing_seconds", "Wall time of each tick: collect, series, detection, scoring."
    )
    hist.add_metric([], h.cumulative(), h.duration_sum_s)
    yield hist
    if h.fast_achieved_interval_s is not None:
        fast = GaugeMetricFamily(
            "netd_anomaly_fast_path_achieved_interval_seconds",
            "Mean time between PFC samples over the last tick (fast samples and the tick's own).",
        )
        fast.add_metric([], h.fast_achieved_interval_s)
        yield fast
    events = CounterMetricFamily(
        "netd_series_events", "What the counter model did to readings, by kind.", labels=["kind"]
    )
    for kind in COUNTER_EVENTS:
        events.add_metric([kind], st.counter_events.get(kind, 0))
    yield events
