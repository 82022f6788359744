"""From counter readings to deltas, monotonic totals and rates.

Each counter is a :class:`~netd.series.counter_model.CounterTrack` (wraps per declared width,
resets, glitches held back one tick, saturation: see that module and docs/metrics.md). The tracker
keys them by port or netdev, gives each the plausibility bound of its port's line rate, and
collects what one tick derived into views:

* ``totals`` — monotonic per counter, so exported ``_total`` metrics never go backwards;
* ``rates`` — per second, present only when known: absent on the first reading, while a reading is
  held, after a confirmed reset's interval and for a saturated counter;
* ``saturated``, ``resets`` (confirmed this tick) and ``held`` (waiting for the next reading).

Counters on the RDMA source's slow cadence (``PortSample.slow_counters``) go through the model only
when read (``slow_read``), over the interval since their last read; in between their totals stand
and their rates are those of their last read interval (docs/metrics.md, Read cadence).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from itertools import compress
from operator import is_not, ne

from netd.model.snapshot import Counter, EthtoolSample, Overflow, PortSample, Snapshot, frozen_map
from netd.series.counter_model import CounterTrack, DeltaKind, ceiling_per_s, counter_delta

__all__ = [
    "DeltaKind",
    "NetdevView",
    "Observation",
    "PortView",
    "SeriesTracker",
    "counter_delta",
]


@dataclass(frozen=True, slots=True)
class PortView:
    """One port with its monotonic totals and per-second rates (keyed by raw counter name)."""

    sample: PortSample
    totals: Mapping[str, int] = field(default_factory=frozen_map)
    rates: Mapping[str, float] = field(default_factory=frozen_map)  # absent on the first tick
    saturated: frozenset[str] = frozenset()
    resets: frozenset[str] = frozenset()  # counters whose restart was confirmed this tick
    held: frozenset[str] = frozenset()  # implausible readings waiting for the next tick
    wrapped: frozenset[str] = frozenset()  # counters unwrapped this tick

    def rate(self, vocab: str) -> float | None:
        """Per-second rate of the first counter with vocabulary name ``vocab``."""
        for raw, c in self.sample.counters.items():
            if c.name == vocab:
                return self.rates.get(raw)
        return None

    def total(self, vocab: str) -> int | None:
        for raw, c in self.sample.counters.items():
            if c.name == vocab:
                return self.totals.get(raw)
        return None


@dataclass(frozen=True, slots=True)
class NetdevView:
    """One netdev's ethtool statistics with totals and rates (keyed by stat name)."""

    sample: EthtoolSample
    totals: Mapping[str, int] = field(default_factory=frozen_map)
    rates: Mapping[str, float] = field(default_factory=frozen_map)
    held: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Observation:
    """A snapshot plus what the series layer derived from it and the previous one."""

    snapshot: Snapshot
    ports: tuple[PortView, ...]
    netdevs: Mapping[str, NetdevView]
    interval_s: float | None  # seconds since the previous snapshot; None on the first

    def netdev(self, name: str | None) -> NetdevView | None:
        return self.netdevs.get(name) if name else None


# What a counter did that is worth counting (netd_series_events_total): not normal, not saturated
# (a stuck counter would count every tick; netd_counter_saturated shows it).
_EVENTS = frozenset({DeltaKind.WRAP, DeltaKind.RESET, DeltaKind.JUMP, DeltaKind.HELD, DeltaKind.DISCARDED})


@dataclass(frozen=True, slots=True)
class _NetdevLast:
    """A netdev's statistics as of the last tick: names and values in order, and its view's totals
    and held names (what :meth:`SeriesTracker._netdev_changes` starts from)."""

    names: tuple[str, ...]
    values: tuple[int, ...]
    totals: Mapping[str, int]
    held: frozenset[str]


@dataclass(frozen=True, slots=True)
class _PortLast:
    """A port's counters as of the last tick: names and readings in order (the readings compared by
    identity), which of them are on the tick cadence, its view's totals, and the names the counter
    rules flagged, whatever the kind (what :meth:`SeriesTracker._port_view` starts from)."""

    keys: tuple[str, ...]
    values: tuple[Counter, ...]
    slow: frozenset[str]
    tick_keys: tuple[str, ...]
    totals: Mapping[str, int]
    flagged: frozenset[str]


class SeriesTracker:
    """Stateful: feed snapshots in order, get observations out. One per daemon.

    The per-tick work is one pass over ~3 400 counters on a 16-port host; most of them (error
    counters, idle priorities) do not move on a calm fabric. A reading equal to the last accepted
    value with nothing held is a zero delta under every rule of the counter model, except at the
    top of a saturating counter, so it skips the model (the tracker's largest cost before). When a
    port or netdev has the names of the last tick, the unchanged readings are found by one C-level
    comparison with the last tick's (values for netdevs; Counter objects, which the RDMA source reuses
    for a file that read the same text, for ports) and only the others are looked at."""

    def __init__(self) -> None:
        # scope ("mlx5_0/1", "netdev:ens1f0np0") -> counter name -> its track
        self._state: dict[str, dict[str, CounterTrack]] = {}
        self._netdev_last: dict[str, _NetdevLast] = {}
        self._port_last: dict[str, _PortLast] = {}
        # scope -> (monotonic of its last slow read, the slow counters' rates over the interval it ended)
        self._slow: dict[str, tuple[float, dict[str, float]]] = {}
        self._last_monotonic: float | None = None
        self.events: Tally[str] = Tally()  # _EVENTS value -> count since start

    def update(self, snap: Snapshot) -> Observation:
        dt = None if self._last_monotonic is None else snap.monotonic - self._last_monotonic
        if dt is not None and dt <= 0:
            dt = None  # same or reordered tick: no rate rather than an infinite one
        seen: set[str] = set()
        ports = tuple(self._port_view(p, dt, seen, snap.monotonic) for p in snap.ports)
        line = {p.netdev: p.rate_gbps for p in snap.ports if p.netdev}
        netdevs = {n: self._netdev_view(s, line.get(n), dt, seen) for n, s in snap.ethtool.items()}
        # Forget counters that disappeared, so a device that returns starts afresh
        # (its first reading becomes its total again) instead of producing a
        # bogus "reset" against a stale value from minutes ago.
        for scope in [k for k in self._state if k not in seen]:
            del self._state[scope]
            self._netdev_last.pop(scope, None)
            self._port_last.pop(scope, None)
            self._slow.pop(scope, None)
        self._last_monotonic = snap.monotonic
        return Observation(snapshot=snap, ports=ports, netdevs=frozen_map(netdevs), interval_s=dt)

    def _tracks(self, scope: str, present: Mapping[str, object], seen: set[str]) -> dict[str, CounterTrack]:
        """The scope's tracks, without those of counters no longer in ``present``."""
        seen.add(scope)
        tracks = self._state.get(scope)
        if tracks is None:
            tracks = self._state[scope] = {}
        elif len(tracks) > len(present) or not tracks.keys() <= present.keys():
            for gone in [n for n in tracks if n not in present]:
                del tracks[gone]
        return tracks

    def _port_view(self, p: PortSample, dt: float | None, seen: set[str], now: float) -> PortView:
        scope = f"{p.device}/{p.port}"
        counters = p.counters
        tracks = self._tracks(scope, counters, seen)
        slow = p.slow_counters
        slow_dt, slow_rates = self._slow_interval(scope, p, now) if slow else (dt, {})
        keys, values = tuple(counters), tuple(counters.values())
        last = self._port_last.get(scope)
        if (
            last is not None
            and dt
            and not p.slow_read
            and last.keys == keys
            and last.slow == slow
            and len(tracks) == len(keys)
            and slow_rates.keys() <= counters.keys()
        ):
            # Only the counters whose reading is not the very object of the last tick (the RDMA
            # source hands the same Counter over for a file that read the same text), and those the
            # last tick flagged (held, saturated, or accepted at the top of a saturating range after
            # a glitch or reset), go through the rules below: every other one is a zero delta at the
            # same total, or a slow counter carried over at its standing rate.
            totals = dict(last.totals)
            rates = dict.fromkeys(last.tick_keys, 0.0)
            rates.update(slow_rates)
            todo = {*compress(keys, map(is_not, values, last.values)), *last.flagged}
            items: Iterable[tuple[str, Counter]] = [(raw, counters[raw]) for raw in todo]
            tick_keys = last.tick_keys
        else:
            totals, rates = {}, {}
            items = counters.items()
            tick_keys = tuple(k for k in keys if k not in slow)
        flagged = self._step_counters(items, p, tracks, dt, slow_dt, slow_rates, totals, rates)

        if slow and p.slow_read:  # the slow counters' rates stand until their next read
            slow_rates.clear()
            slow_rates.update((raw, rates[raw]) for raw in slow if raw in rates)

        def of(kind: DeltaKind) -> frozenset[str]:
            return frozenset(flagged.get(kind, ()))

        view = PortView(
            p,
            frozen_map(totals),
            frozen_map(rates),
            of(DeltaKind.SATURATED),
            of(DeltaKind.RESET),
            of(DeltaKind.HELD),
            of(DeltaKind.WRAP),
        )
        self._port_last[scope] = _PortLast(
            keys, values, slow, tick_keys, view.totals, frozenset().union(*flagged.values())
        )
        return view

    def _step_counters(
        self,
        items: Iterable[tuple[str, Counter]],
        p: PortSample,
        tracks: dict[str, CounterTrack],
        dt: float | None,
        slow_dt: float | None,
        slow_rates: Mapping[str, float],
        totals: dict[str, int],
        rates: dict[str, float],
    ) -> dict[DeltaKind, set[str]]:
        """Each counter of ``items`` through the counter model into ``totals`` and ``rates`` (an
        unknown rate leaves none): what :meth:`_port_view` derives of a port, by kind flagged."""
        flagged: dict[DeltaKind, set[str]] = {}
        gbps = p.rate_gbps
        wrap = Overflow.WRAP
        slow = p.slow_counters
        for raw, c in items:
            track = tracks.get(raw)
            value = c.value
            step_dt = dt
            if raw in slow:
                if not p.slow_read and track is not None:  # carried over: its last read stands
                    totals[raw] = track.total
                    if (rate := slow_rates.get(raw)) is not None:
                        rates[raw] = rate
                    else:
                        rates.pop(raw, None)
                    if c.overflow is not wrap and c.saturated:
                        flagged.setdefault(DeltaKind.SATURATED, set()).add(raw)
                    continue
                step_dt = slow_dt
            if track is None:
                tracks[raw] = track = CounterTrack(value)
                kind, rate = (DeltaKind.SATURATED if c.saturated else DeltaKind.NORMAL), None
            elif value == track.raw and track.held is None and (c.overflow is wrap or not c.saturated):
                totals[raw] = track.total  # unchanged: a zero delta, whatever the counter
                if step_dt:
                    rates[raw] = 0.0
                else:
                    rates.pop(raw, None)
                continue
            else:
                ceiling = ceiling_per_s(c.name, gbps)
                kind, rate = track.step(value, step_dt, ceiling, c.width, c.overflow, c.scale)
            totals[raw] = track.total
            if rate is not None:
                rates[raw] = rate
            else:
                rates.pop(raw, None)
            if kind is not DeltaKind.NORMAL:
                flagged.setdefault(kind, set()).add(raw)
                if kind in _EVENTS:
                    self.events[kind.value] += 1
        return flagged

    def _slow_interval(self, scope: str, p: PortSample, now: float) -> tuple[float | None, dict[str, float]]:
        """(seconds since the port's last slow read when this sample is one, else None; the slow
        counters' standing rates). A slow read starts a new interval."""
        last = self._slow.get(scope)
        if not p.slow_read:
            return None, ({} if last is None else last[1])
        dt = None if last is None or now <= last[0] else now - last[0]
        rates = {} if last is None else last[1]
        self._slow[scope] = (now, rates)
        return dt, rates

    def _netdev_view(
        self, s: EthtoolSample, gbps: float | None, dt: float | None, seen: set[str]
    ) -> NetdevView:
        scope = f"netdev:{s.netdev}"
        tracks = self._tracks(scope, s.stats, seen)
        stats = s.stats
        names, values = tuple(stats), tuple(stats.values())
        last = self._netdev_last.get(scope)
        if last is not None and last.names == names and len(tracks) == len(names):
            view = self._netdev_changes(s, last, values, tracks, gbps, dt)
        else:
            view = self._netdev_full(s, tracks, gbps, dt)
        self._netdev_last[scope] = _NetdevLast(names, values, view.totals, view.held)
        return view

    def _netdev_changes(
        self,
        s: EthtoolSample,
        last: _NetdevLast,
        values: tuple[int, ...],
        tracks: dict[str, CounterTrack],
        gbps: float | None,
        dt: float | None,
    ) -> NetdevView:
        """The same view as :meth:`_netdev_full` when the names are those of the last tick: only the
        statistics whose value changed, and those held, go through the counter model (found by C-level
        comparison of the two value tuples); every other one keeps its total, at rate 0. mlx5 has
        ~160 statistics per netdev and a calm one moves a handful."""
        totals = dict(last.totals)
        rates: dict[str, float] = dict.fromkeys(last.names, 0.0) if dt else {}
        held: set[str] = set()
        stats = s.stats
        for name in {*compress(last.names, map(ne, values, last.values)), *last.held}:
            track = tracks[name]
            self._step_statistic(track, name, stats[name], gbps, dt, rates, held)
            totals[name] = track.total
        return NetdevView(s, frozen_map(totals), frozen_map(rates), frozenset(held))

    def _netdev_full(
        self, s: EthtoolSample, tracks: dict[str, CounterTrack], gbps: float | None, dt: float | None
    ) -> NetdevView:
        totals: dict[str, int] = {}
        rates: dict[str, float] = {}
        held: set[str] = set()
        for name, value in s.stats.items():
            track = tracks.get(name)
            if track is None:
                tracks[name] = track = CounterTrack(value)
            elif value == track.raw and track.held is None:  # 64-bit, wrapping: unchanged is zero
                if dt:
                    rates[name] = 0.0
            else:
                self._step_statistic(track, name, value, gbps, dt, rates, held)
            totals[name] = track.total
        return NetdevView(s, frozen_map(totals), frozen_map(rates), frozenset(held))

    def _step_statistic(
        self,
        track: CounterTrack,
        name: str,
        value: int,
        gbps: float | None,
        dt: float | None,
        rates: dict[str, float],
        held: set[str],
    ) -> None:
        """One ethtool statistic through the counter model: its rate (absent when unknown), whether
        its sample is held back, and the event counts."""
        kind, rate = track.step(value, dt, ceiling_per_s(name, gbps))
        if rate is None:
            rates.pop(name, None)
        else:
            rates[name] = rate
        if kind is DeltaKind.HELD:
            held.add(name)
        if kind in _EVENTS:
            self.events[kind.value] += 1
