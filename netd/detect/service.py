"""Anomaly detection inside the daemon: feed, engine, PFC fast path, link events and log lines.

The daemon (composition root) calls :meth:`Detection.on_observation` after every tick and
:meth:`Detection.fast_sample` between ticks when the fast path is on; both return the engine's
published :class:`~netd.detect.findings.AnomalyState` with the fast path's own cost added.

The fast path reads only the netdevs that carry PFC counters (``ETHTOOL_GSTATS`` through the same
reader as the tick, or the captures of an emulated host), so per-priority pause is judged every
``[detect] fast_interval`` while everything else is sampled once per tick. Its CPU time (thread
time: the read, the deltas and the evaluation) is measured and exported.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

from netd.config.detect import DetectConfig
from netd.congestion.scorer import CongestionReport
from netd.detect.engine import DetectionEngine
from netd.detect.feed import DetectFeed
from netd.detect.findings import AnomalyState, FindingEvent
from netd.detect.inputs import DetectInput, LinkChange, PortCongestion
from netd.detect.log_lines import log_level, log_line
from netd.model.config_finding import ConfigFinding
from netd.model.snapshot import EthtoolSample
from netd.series.tracker import Observation
from netd.sources.ethtool import EthtoolSource
from netd.sources.ethtool_raw import RawSamples
from netd.sources.netlink_events import LinkEvent, LinkMonitor

__all__ = [
    "Detection",
    "PfcReader",
    "pfc_reader",
    "log_line",
    "port_congestion",
]

log = logging.getLogger("netd.anomalies")

# The earliest a sample that could confirm a storm's onset is taken, as a fraction of fast_interval:
# shorter samples would mostly measure the loop's own jitter.
_CONFIRM_FLOOR = 0.25
# The calm cadence under [detect] fast_calm_cpu_budget: the longest it stretches to (and at most half
# the tick interval: see Detection._budgeted), and how much a new calm sample's cost moves the
# average it is judged by (a cold sample now and then must not swing the cadence; a NIC that became
# expensive to read is followed within a few samples).
_CALM_CEILING_S = 1.0
_CALM_COST_WEIGHT = 0.2

# PFC netdev -> the statistics wanted of it (a reader may return more) -> the samples that answered
PfcReader = Callable[[Mapping[str, tuple[str, ...]]], Mapping[str, EthtoolSample]]


def port_congestion(report: CongestionReport, host: str) -> Mapping[tuple[str, int], PortCongestion]:
    """This host's ports of a congestion report, as the detectors read them."""
    out: dict[tuple[str, int], PortCongestion] = {}
    for s in report.ports:
        if s.labels.get("host") != host or not s.labels.get("port", "").isdigit():
            continue
        key = (s.labels["device"], int(s.labels["port"]))
        out[key] = PortCongestion(s.level, s.smoothed, s.contributions, s.signals)
    return MappingProxyType(out)


def _change(e: LinkEvent) -> LinkChange:
    return LinkChange(e.netdev, e.monotonic, e.carrier, e.operstate, e.speed_mbps, e.removed)


def _read(reader: PfcReader, wanted: Mapping[str, tuple[str, ...]]) -> Mapping[str, EthtoolSample]:
    try:
        return reader(wanted)
    except Exception:  # the tick will report the source; the fast path just skips a beat
        log.debug("fast-path read failed", exc_info=True)
        return {}


class Detection:
    def __init__(
        self,
        cfg: DetectConfig,
        host: str,
        pfc_reader: PfcReader | None = None,
        links: LinkMonitor | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        listener: Callable[[FindingEvent], None] | None = None,
        cpu_clock: Callable[[], float] = time.thread_time,
        pfc_probe: PfcReader | None = None,
        tick_interval_s: float = 1.0,
    ) -> None:
        self.cfg = cfg
        self.tick_interval_s = tick_interval_s  # the daemon's: bounds how far the calm cadence stretches
        self.engine = DetectionEngine(cfg, host)
        self.feed = DetectFeed()
        self.feed.host = host
        self.pfc_reader = pfc_reader
        # A cheaper read for calm samples, or None (then pfc_reader): _fast_read
        self.pfc_probe = pfc_probe if pfc_reader is not None else None
        self.links = links
        self._clock = clock
        self._wall = wall
        self._cpu_clock = cpu_clock
        self._listener = listener  # sees every lifecycle event (the benchmark scores them)
        # the host's configuration contradictions, asked once per tick (netd.detect.config); the
        # composition root sets it to the QoS reader's latest findings
        self.config: Callable[[], Sequence[ConfigFinding]] | None = None
        self._fast_samples = 0
        self._fast_calm = 0  # fast samples put aside by the calm test (counted in _fast_samples too)
        self._fast_cpu = 0.0
        self._calm_cost: float | None = None  # average CPU seconds of a calm fast sample
        self._signature: tuple[object, ...] | None = None  # pause statistics of the last PFC sample read
        self._token: tuple[object, ...] | None = None  # their stand-in, when a fast sample was read last
        self._stood_in: RawSamples | None = None  # the last read a stand-in was made of (made again from)
        self._pending: tuple[Mapping[str, EthtoolSample], float, float] | None = None  # put aside
        self._active_until = float("-inf")  # fast cadence until then (pause was seen)
        self._state = self._with_costs(self.engine.state())

    @property
    def fast_interval_s(self) -> float:
        """Seconds until the next fast-path sample; 0 when off (no reader, or configured off).

        Adaptive (when ``fast_calm_interval`` is longer than ``fast_interval``): ``fast_interval``
        while some PFC netdev showed pause within the last ``fast_linger`` seconds,
        ``fast_calm_interval`` otherwise; and right after a storm's onset sample, the time at which
        the next sample could confirm the storm (``pfc_detection_time`` minus the pause the onset
        sample saw; at least a quarter of ``fast_interval``), docs/detection.md. The calm interval
        stretches when calm samples would cost more than ``fast_calm_cpu_budget``."""
        fast = self.cfg.fast_interval if self.pfc_reader is not None else 0.0
        calm = self.cfg.fast_calm_interval
        if fast <= 0 or calm <= fast:  # off, or a fixed cadence
            return fast
        confirm = self.engine.pfc_confirm_in()
        if confirm is not None:  # a storm's onset was seen: sample when it could be confirmed
            return min(fast, max(confirm, fast * _CONFIRM_FLOOR))
        return fast if self._clock() < self._active_until else self._budgeted(calm)

    def _budgeted(self, calm: float) -> float:
        """The calm interval at which calm samples cost at most the budget: never shorter than
        configured, never over a second nor over half the tick interval.

        Why half: the loop leaves the last slot before a tick to the tick (wait_running_fast_path
        takes a sample only when it falls at least half an interval before the tick), so an
        interval over two thirds of the tick's would take no calm sample at all. The cost would
        then never be measured again, and one slow sample (a cold start, a busy moment) would turn
        the fast path off for the daemon's life. At half the tick interval one calm sample still
        falls between two ticks and keeps the average honest."""
        budget, cost = self.cfg.fast_calm_cpu_budget, self._calm_cost
        if budget <= 0 or cost is None or cost <= calm * budget:
            return calm
        ceiling = max(calm, min(_CALM_CEILING_S, self.tick_interval_s / 2))
        return min(cost / budget, ceiling)

    def state(self) -> AnomalyState:
        st = self._state
        if st.fast_samples != self._fast_samples:  # calm samples since the last publication
            st = self._state = dataclasses.replace(
                st,
                fast_interval_s=self.fast_interval_s,
                fast_samples=self._fast_samples,
                fast_calm_samples=self._fast_calm,
                fast_cpu_seconds=self._fast_cpu,
            )
        return st

    def on_observation(self, obs: Observation, congestion: CongestionReport | None = None) -> AnomalyState:
        """A tick: the PFC input from the tick's ethtool sample first (so a storm is known before the
        tick-path detectors judge the same second), then the tick input with the congestion scorer's
        levels for this tick (``congestion``: the daemon's report, scored before detection)."""
        tick = self.feed.tick_input(obs)
        if congestion is not None:
            tick = dataclasses.replace(tick, congestion=port_congestion(congestion, obs.snapshot.host))
        if self.config is not None:
            tick = dataclasses.replace(tick, config=tuple(self.config()))
        snap = obs.snapshot
        self._token = None  # the next fast sample compares with the tick's sample, by value
        # With the fast path on, the tick's PFC sample is one more sample of that path: put aside
        # like a calm fast sample when it is one (without it, tick to tick, nothing is put aside).
        if self.pfc_reader is not None and self._put_aside(snap.ethtool, snap.monotonic, snap.timestamp):
            self._emit(self.engine.evaluate(tick))
        else:
            self._signature = self.feed.pause_signature(snap.ethtool)
            pfc = self._evaluate_pfc(snap.ethtool, snap.monotonic, snap.timestamp)
            self._emit(self.engine.evaluate(pfc) + self.engine.evaluate(tick))
        return self._publish()

    def fast_sample(self) -> AnomalyState:
        self.take_fast_sample()
        return self.state()

    def take_fast_sample(self) -> bool:
        """One fast-path sample; False when it was put aside as calm: the engine's findings stand and
        only the fast path's own counts moved, which :meth:`state` applies when next asked (the daemon
        republishes at the next evaluated sample or tick, not after every calm sample)."""
        start = self._cpu_clock()
        wanted = self.feed.pfc_wanted()
        if self.pfc_reader is not None and wanted:
            evaluated = self._fast_read(self.pfc_reader, wanted)
        else:
            evaluated = True
        self._fast_samples += 1
        cost = self._cpu_clock() - start
        self._fast_cpu += cost
        if evaluated:
            self._publish()
        else:  # what the calm cadence costs: the budget's measure
            last = self._calm_cost
            self._calm_cost = cost if last is None else last + _CALM_COST_WEIGHT * (cost - last)
        return evaluated

    def _fast_read(self, reader: PfcReader, wanted: Mapping[str, tuple[str, ...]]) -> bool:
        """Read and judge one fast sample (False: put aside). While calm, a cheaper probe read is
        tried first when there is one (``pfc_probe``: no name-table re-read on a kernel); a probe
        whose pause statistics did not move is put aside as it is, and one that cannot say so is
        dropped for a read with the names re-checked, which is judged as every sample is."""
        probe = self.pfc_probe
        if probe is not None and self._token is not None and self._calm(self._clock()):
            samples = _read(probe, wanted)
            if self._keep_unchanged(samples, self._stand_in(samples), self._clock(), self._wall()):
                return False
        return self._fast_pfc(_read(reader, wanted), self._clock(), self._wall())

    def _fast_pfc(self, samples: Mapping[str, EthtoolSample], monotonic: float, timestamp: float) -> bool:
        """Evaluate one fast sample, or put it aside when it cannot change any finding: the fabric is
        calm (no pause within ``fast_linger``), the PFC detectors are at rest, no link event waits and
        no pause statistic of any PFC netdev moved since the last sample read. Such a sample would
        only advance the counter baselines; the last one put aside is evaluated before the next
        sample that is (its dt then covers exactly one sample interval, as without the test)."""
        token = self._stand_in(samples)
        if self._keep_unchanged(samples, token, monotonic, timestamp):
            return False  # the stand-in is the last one's: _token stays as it is
        self._token = token
        if self._put_aside(samples, monotonic, timestamp):
            self._fast_calm += 1
            return False
        self._emit(self.engine.evaluate(self._evaluate_pfc(samples, monotonic, timestamp)))
        return True

    def _keep_unchanged(
        self,
        samples: Mapping[str, EthtoolSample],
        token: tuple[object, ...] | None,
        monotonic: float,
        timestamp: float,
    ) -> bool:
        """Put a calm sample aside unparsed when its pause stand-in is the last fast sample's (a tick
        clears it): the same pause statistics, so the same signature, and _put_aside would keep it."""
        if token is None or token != self._token or not self._calm(monotonic):
            return False
        self._pending = (samples, monotonic, timestamp)
        self._fast_calm += 1
        return True

    def _stand_in(self, samples: Mapping[str, EthtoolSample]) -> tuple[object, ...] | None:
        """The stand-in for the pause statistics of an unparsed read (None: compare by value)."""
        if not isinstance(samples, RawSamples):
            return None
        token = samples.pause_token(self.feed.pause_names(), self._stood_in)
        self._stood_in = samples
        return token

    def _put_aside(self, samples: Mapping[str, EthtoolSample], monotonic: float, timestamp: float) -> bool:
        """Keep a PFC sample unevaluated (the calm test, :meth:`_fast_pfc`); False when it must be
        evaluated (and then the caller does, with :meth:`_evaluate_pfc`)."""
        signature = self.feed.pause_signature(samples)
        unchanged = signature == self._signature
        self._signature = signature
        if unchanged and self._calm(monotonic):
            self._pending = (samples, monotonic, timestamp)
            return True
        return False

    def wants_tick(self) -> bool:
        """Whether the next tick slot must tick even on a calm host (netd.daemon.cadence): pause seen
        within ``fast_linger``, a PFC detector not at rest, or a link event waiting."""
        return not self._calm(self._clock())

    def _calm(self, monotonic: float) -> bool:
        """Whether a sample whose pause statistics did not move can change no finding: no pause
        within ``fast_linger``, the PFC detectors at rest, no link event waiting."""
        return (
            monotonic >= self._active_until
            and self.engine.pfc_at_rest()
            and not (self.links is not None and self.links.pending())
        )

    def _evaluate_pfc(
        self, samples: Mapping[str, EthtoolSample], monotonic: float, timestamp: float
    ) -> DetectInput:
        """The PFC input of a sample that is evaluated: the one put aside before it first."""
        self._evaluate_pending()
        inp = self.feed.pfc_input(samples, monotonic, timestamp, self._link_changes())
        self._note_pause(inp)
        return inp

    def _evaluate_pending(self) -> None:
        if self._pending is not None:
            samples, monotonic, timestamp = self._pending
            self._pending = None
            self._emit(self.engine.evaluate(self.feed.pfc_input(samples, monotonic, timestamp)))

    def _note_pause(self, inp: DetectInput) -> None:
        """Any pause frame or pause time on any PFC priority keeps the fast cadence for a while."""
        for p in inp.ports:
            for c in p.priorities:
                if c.rx_pause_frames or c.tx_pause_frames or c.rx_pause_us or c.tx_pause_us:
                    self._active_until = inp.monotonic + self.cfg.fast_linger
                    return

    def close(self) -> None:
        if self.links is not None:
            self.links.close()

    def _link_changes(self) -> list[LinkChange]:
        return [] if self.links is None else [_change(e) for e in self.links.drain()]

    def _emit(self, events: list[FindingEvent]) -> None:
        for event in events:
            log.log(logging.INFO if event.action == "deescalated" else log_level(event), log_line(event))
            if self._listener is not None:
                self._listener(event)

    def _with_costs(self, state: AnomalyState) -> AnomalyState:
        return dataclasses.replace(
            state,
            fast_interval_s=self.fast_interval_s,
            fast_samples=self._fast_samples,
            fast_calm_samples=self._fast_calm,
            fast_cpu_seconds=self._fast_cpu,
        )

    def _publish(self) -> AnomalyState:
        self._state = self._with_costs(self.engine.state())
        return self._state


def pfc_reader(source: EthtoolSource, recheck_names: bool = True) -> PfcReader:
    """The fast path's reader on an ethtool source: only the wanted statistics of each PFC netdev,
    parsed only if the sample is evaluated (:class:`~netd.sources.ethtool_raw.RawSamples`).
    ``recheck_names=False``: the calm probe, which leaves the kernel's name table unread."""
    return functools.partial(source.read_raw, recheck_names=recheck_names)
