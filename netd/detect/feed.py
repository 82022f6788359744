"""From observations and ethtool samples to detector inputs (netd.detect.inputs).

Part of the composition layer: it may read the series layer and the ethtool name parser, which the
detectors themselves may not import (docs/architecture.md, Layers). Two things it adds beyond a conversion:

* **Exact ethtool deltas from confirmed readings only.** Each path runs the series layer's counter
  model on the few statistics detectors read: a statistic that went backwards or jumped beyond the
  line rate gives *no* delta until the next sample confirms or discards it, and a confirmed reset's
  interval stays unknown (a driver reload must not look like a burst of pause or discards).
* **Two independent cadences.** The tick path (everything, once per tick) and the PFC path (pause and
  priority counters, at every tick and every fast-path sample) each keep their own previous sample,
  and a netdev missing from the previous sample of its path gets no delta rather than one that spans
  a longer interval than the input says.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress
from operator import ne

from netd.detect.inputs import DetectInput, InputPath, LinkChange, PortInput, PriorityCounters
from netd.detect.port_deltas import counter_deltas
from netd.model.snapshot import EthtoolSample, PortSample, frozen_map, tuple_getter
from netd.series.counter_model import CounterTrack, DeltaKind, ceiling_per_s
from netd.series.tracker import Observation
from netd.vocabulary.ethtool_names import NETDEV_SCALARS, parse_signals

__all__ = ["DetectFeed", "NETDEV_SCALARS", "NetdevDeltas"]

_RELEVANT = re.compile(
    r"(?:rx|tx)_prio[0-7]_(?:pause|pause_duration|pause_transition|packets|discards)"
    r"|tx_pause_storm_(?:warning|error)_events|" + "|".join(NETDEV_SCALARS)
)


@dataclass(slots=True)
class _Previous:
    """A netdev's last sample on one path: its sequence number, the tracks of its relevant statistics,
    their names and values as read (in order), and which of them the model holds back."""

    seq: int
    tracks: dict[str, CounterTrack]
    names: tuple[str, ...]
    values: tuple[int, ...]
    held: tuple[str, ...] = ()


class NetdevDeltas:
    """Per-netdev deltas between consecutive samples of one path, through the counter model
    (netd.series.counter_model): a statistic that went backwards or jumped beyond what the line rate
    allows gives no delta until the next sample confirms it (then still none for a reset) or
    discards it (then the delta of this interval at the rate over both).

    A statistic read as in the last sample with nothing held is a zero delta (its track accepted that
    value), so when a netdev's relevant names are the last sample's, only the statistics whose value
    differs (one C-level comparison of the two value tuples) and those held go through the model."""

    def __init__(self) -> None:
        self._seq = 0
        self._prev: dict[str, _Previous] = {}
        self._names: dict[tuple[str, ...], tuple[tuple[str, ...], bool]] = {}

    def _learn(self, stats: Mapping[str, int]) -> tuple[tuple[str, ...], bool]:
        key = tuple(stats)
        known = self._names.get(key)
        if known is None:
            if len(self._names) > 64:  # names change only when PFC is reconfigured
                self._names.clear()
            names = tuple(n for n in key if _RELEVANT.fullmatch(n))
            known = self._names[key] = (names, any(n.endswith("_pause") for n in names))
        return known

    def relevant(self, stats: Mapping[str, int]) -> tuple[str, ...]:
        return self._learn(stats)[0]

    def has_pfc(self, stats: Mapping[str, int]) -> bool:
        return self._learn(stats)[1]

    def update(
        self,
        samples: Mapping[str, EthtoolSample],
        dt: float | None = None,
        line_gbps: Mapping[str, float | None] | None = None,
    ) -> dict[str, tuple[_Layout, dict[str, float]]]:
        """Netdev -> (what its names mean, deltas of the relevant stats over the last ``dt`` seconds)
        for netdevs that were in the previous sample of this path too."""
        self._seq += 1
        out: dict[str, tuple[_Layout, dict[str, float]]] = {}
        for netdev, sample in samples.items():
            stats = sample.stats
            names = self.relevant(stats)
            values = _getter(names)(stats)
            prev = self._prev.get(netdev)
            if prev is None or prev.seq != self._seq - 1:
                tracks = {n: CounterTrack(v) for n, v in zip(names, values, strict=True)}
                self._prev[netdev] = _Previous(self._seq, tracks, names, values)
                continue
            tracks = prev.tracks
            gbps = None if line_gbps is None else line_gbps.get(netdev)
            if prev.names == names and len(tracks) == len(names):
                deltas = dict.fromkeys(names, 0.0)
                todo = {*compress(names, map(ne, values, prev.values)), *prev.held}
                held = self._step(((n, stats[n]) for n in todo), tracks, deltas, dt, gbps)
            else:  # other names: a statistic that went missing starts afresh if it returns
                for gone in tracks.keys() - set(names):
                    del tracks[gone]
                deltas = {}
                held = self._step(zip(names, values, strict=True), tracks, deltas, dt, gbps)
            self._prev[netdev] = _Previous(self._seq, tracks, names, values, held)
            out[netdev] = (_layout(names), deltas)
        for gone in [n for n, prev in self._prev.items() if prev.seq != self._seq]:
            del self._prev[gone]
        return out

    @staticmethod
    def _step(
        readings: Iterable[tuple[str, int]],
        tracks: dict[str, CounterTrack],
        deltas: dict[str, float],
        dt: float | None,
        gbps: float | None,
    ) -> tuple[str, ...]:
        """Each reading through its track into ``deltas`` (none when unknown); the names held back."""
        held: list[str] = []
        for n, value in readings:
            track = tracks.get(n)
            if track is None:
                tracks[n] = CounterTrack(value)
                deltas.pop(n, None)
                continue
            if value == track.raw and track.held is None:  # unchanged: zero, no model needed
                deltas[n] = 0.0
                continue
            before = track.total
            kind, rate = track.step(value, dt, ceiling_per_s(n, gbps))
            if kind in _COUNTABLE:
                deltas[n] = float(track.total - before)
            elif kind is DeltaKind.DISCARDED and rate is not None and dt:
                deltas[n] = rate * dt  # a glitch between: this interval's share of both
            else:
                deltas.pop(n, None)
                if kind is DeltaKind.HELD:
                    held.append(n)
        return tuple(held)


_COUNTABLE = (DeltaKind.NORMAL, DeltaKind.WRAP)


# PriorityCounters field -> (EthtoolSignals field, direction)
_FIELDS = (
    ("rx_pause_frames", "pause_frames", "rx"),
    ("rx_pause_us", "pause_duration_us", "rx"),
    ("tx_pause_frames", "pause_frames", "tx"),
    ("tx_pause_us", "pause_duration_us", "tx"),
    ("rx_pause_transitions", "pause_transitions", "rx"),
    ("tx_packets", "packets", "tx"),
    ("rx_packets", "packets", "rx"),
    ("rx_discards", "discards", "rx"),
)


_PAUSE = frozenset({"rx_pause_frames", "rx_pause_us", "tx_pause_frames", "tx_pause_us"})
# What the PFC path's detectors (pfc, spreading) read of a priority; transitions and discards are read
# at ticks only (loss, evidence), so the fast path, 12 samples a second, does not fetch them.
_PFC_PATH = _PAUSE | {"tx_packets", "rx_packets"}


@dataclass(frozen=True, slots=True)
class _Layout:
    """Which stat feeds which field, learnt once per name set by letting parse_signals classify the
    names (values are the names' positions), so the per-sample work is dictionary lookups."""

    priorities: tuple[tuple[int, tuple[tuple[str, str], ...]], ...]
    storm_warning: str | None
    storm_error: str | None

    @property
    def names(self) -> tuple[str, ...]:
        """The statistics the PFC path reads of the netdev (a fast sample fetches these)."""
        storm = tuple(n for n in (self.storm_warning, self.storm_error) if n is not None)
        return tuple(n for _, fields in self.priorities for f, n in fields if f in _PFC_PATH) + storm

    @property
    def pause_names(self) -> tuple[str, ...]:
        """The statistics that show pause (frames, time, the NIC's storm events): while none of them
        moves, no PFC detector can see anything new (the fast path's calm test)."""
        storm = tuple(n for n in (self.storm_warning, self.storm_error) if n is not None)
        return tuple(n for _, fields in self.priorities for f, n in fields if f in _PAUSE) + storm

    def read(
        self, deltas: Mapping[str, float]
    ) -> tuple[tuple[PriorityCounters, ...], float | None, float | None]:
        prios = tuple(
            PriorityCounters(p, **{f: deltas.get(n) for f, n in fields}) for p, fields in self.priorities
        )
        warn = None if self.storm_warning is None else deltas.get(self.storm_warning)
        err = None if self.storm_error is None else deltas.get(self.storm_error)
        return prios, warn, err


@functools.lru_cache(maxsize=64)
def _layout(names: tuple[str, ...]) -> _Layout:
    probe = parse_signals({n: float(i) for i, n in enumerate(names)})
    prios = []
    for p in probe.active_priorities:
        fields = []
        for field, signal, direction in _FIELDS:
            index = getattr(probe, signal).get((direction, p))
            if index is not None:
                fields.append((field, names[int(index)]))
        prios.append((p, tuple(fields)))

    def name(index: float | None) -> str | None:
        return None if index is None else names[int(index)]

    return _Layout(tuple(prios), name(probe.pause_storm_warning_events), name(probe.pause_storm_error_events))


_NONE = _Layout((), None, None)


_getter = functools.lru_cache(maxsize=64)(tuple_getter)  # per name set: built once, not per sample


class DetectFeed:
    def __init__(self) -> None:
        self._tick = NetdevDeltas()
        self._pfc = NetdevDeltas()
        self._ports: tuple[PortSample, ...] = ()  # the last tick's ports: netdev -> RDMA port for PFC
        self._last_pfc: float | None = None
        self.host = ""

    def pfc_netdevs(self) -> list[str]:
        """Netdevs of RDMA ports that had per-priority pause counters at the last tick: what the fast
        path reads (a netdev without PFC has nothing for it)."""
        return list(self._pfc_names)

    def pfc_wanted(self) -> Mapping[str, tuple[str, ...]]:
        """PFC netdev -> the statistics the PFC path reads of it (learnt at the last tick): a fast
        sample needs these ~8 of mlx5's ~160."""
        return self._pfc_names

    def pause_names(self) -> Mapping[str, tuple[str, ...]]:
        """PFC netdev -> the statistics that show pause on it (learnt at the last tick): what
        :meth:`pause_signature` compares."""
        return self._pause_names

    def pause_signature(self, samples: Mapping[str, EthtoolSample]) -> tuple[object, ...]:
        """The raw pause statistics of the PFC netdevs in ``samples``: two samples with the same
        signature differ by no pause frame, no pause time and no storm event anywhere."""
        out: list[object] = []
        for netdev, names in self._pause_names.items():
            sample = samples.get(netdev)
            if sample is not None:
                out.append(netdev)
                try:
                    out.append(_getter(names)(sample.stats))
                except KeyError:  # a statistic missing from this sample: None in its place
                    out.append(tuple(sample.stats.get(n) for n in names))
        return tuple(out)

    _pfc_names: Mapping[str, tuple[str, ...]] = frozen_map()
    _pause_names: Mapping[str, tuple[str, ...]] = frozen_map()

    def _line_rates(self) -> dict[str, float | None]:
        return {p.netdev: p.rate_gbps for p in self._ports if p.netdev}

    def tick_input(self, obs: Observation, link_changes: Iterable[LinkChange] = ()) -> DetectInput:
        snap = obs.snapshot
        self.host = snap.host
        self._ports = snap.ports
        deltas = self._tick.update(snap.ethtool, obs.interval_s, self._line_rates())
        rdma_netdevs = {p.netdev for p in snap.ports}
        pfc = sorted(n for n, s in snap.ethtool.items() if n in rdma_netdevs and self._tick.has_pfc(s.stats))
        layouts = {n: _layout(self._tick.relevant(snap.ethtool[n].stats)) for n in pfc}
        self._pfc_names = frozen_map({n: lay.names for n, lay in layouts.items()})
        self._pause_names = frozen_map({n: lay.pause_names for n, lay in layouts.items()})
        ports = []
        for v in obs.ports:
            p = v.sample
            layout, eth = deltas.get(p.netdev or "", (_NONE, {}))
            prios, warn, err = layout.read(eth)
            ports.append(
                PortInput(
                    device=p.device,
                    port=p.port,
                    netdev=p.netdev,
                    state=p.state,
                    phys_state=p.phys_state,
                    rate_gbps=p.rate_gbps,
                    counters=frozen_map(counter_deltas(v, obs.interval_s)),
                    netdev_counters=frozen_map({n: eth[n] for n in NETDEV_SCALARS if n in eth}),
                    priorities=prios,
                    storm_warning_events=warn,
                    storm_error_events=err,
                    saturated=frozenset(v.saturated),
                    read_errors=p.read_errors,
                )
            )
        failed = {s.source: s.error or "failed" for s in snap.sources if not s.ok}
        return DetectInput(
            InputPath.TICK,
            snap.host,
            snap.monotonic,
            snap.timestamp,
            obs.interval_s,
            tuple(ports),
            tuple(link_changes),
            frozen_map(failed),
        )

    def _narrowed(self, samples: Mapping[str, EthtoolSample]) -> Mapping[str, EthtoolSample]:
        """The PFC path tracks only the statistics a fast sample reads, also in a tick's full sample:
        a statistic tracked at ticks only would get a one-second delta judged over a fast interval."""
        wanted = self._pfc_names
        if not any(n in wanted and len(s.stats) > len(wanted[n]) for n, s in samples.items()):
            return samples
        out: dict[str, EthtoolSample] = {}
        for netdev, sample in samples.items():
            names = wanted.get(netdev)
            stats = sample.stats
            out[netdev] = (
                sample
                if names is None
                else EthtoolSample(netdev, frozen_map({n: stats[n] for n in names if n in stats}))
            )
        return out

    def pfc_input(
        self,
        samples: Mapping[str, EthtoolSample],
        monotonic: float,
        timestamp: float,
        link_changes: Sequence[LinkChange] = (),
    ) -> DetectInput:
        dt = None if self._last_pfc is None else monotonic - self._last_pfc
        self._last_pfc = monotonic
        dt = dt if dt and dt > 0 else None
        deltas = self._pfc.update(self._narrowed(samples), dt, self._line_rates())
        ports = []
        for p in self._ports:
            got = deltas.get(p.netdev or "")
            if got is None:
                continue
            prios, warn, err = got[0].read(got[1])
            ports.append(
                PortInput(
                    device=p.device,
                    port=p.port,
                    netdev=p.netdev,
                    rate_gbps=p.rate_gbps,
                    priorities=prios,
                    storm_warning_events=warn,
                    storm_error_events=err,
                )
            )
        return DetectInput(
            InputPath.PFC,
            self.host,
            monotonic,
            timestamp,
            dt,
            tuple(ports),
            tuple(link_changes),
        )
