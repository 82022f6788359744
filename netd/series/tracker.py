"""From counter readings to deltas, monotonic totals and rates.

Counters on RDMA hosts misbehave in three distinct ways, and telling them apart
is the point of this module:

* **wrap** — the 32-bit mlx5 q-counters (``out_of_sequence``, ``packet_seq_err``,
  ...) continue from zero after 2^32 - 1. The true delta is ``cur + 2^32 - prev``.
* **reset** — a driver reload, a ``perfquery -R`` or a device that vanished and
  came back starts from zero. The true delta is unknown; like Prometheus we
  count the new value as the delta (everything since the reset).
* **saturation** — the small IB PMA error counters (4..16 bit) and legacy
  32-bit data counters stick at all-ones. A stuck counter has a zero delta that
  means "unknown", not "nothing happened", so it is flagged.

A decrease of a wrapping counter is read as a wrap when the wrapped delta is
less than half the counter's range (a plausible increment within one tick), and
as a reset otherwise.

:class:`SeriesTracker` keeps the last raw value and a monotonic *total* per
counter: the total starts at the first reading and then only grows by deltas,
so the exported ``_total`` metrics never go backwards while netd runs, even
across wraps and resets (Prometheus then sees a clean counter).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from netd.model.snapshot import Counter, EthtoolSample, Overflow, PortSample, Snapshot, frozen_map

__all__ = [
    "DeltaKind",
    "NetdevView",
    "Observation",
    "PortView",
    "SeriesTracker",
    "counter_delta",
]


class DeltaKind(enum.Enum):
    NORMAL = "normal"
    WRAP = "wrap"
    RESET = "reset"
    SATURATED = "saturated"


def counter_delta(
    prev: int, cur: int, *, width: int = 64, overflow: Overflow = Overflow.WRAP, scale: int = 1
) -> tuple[int, DeltaKind]:
    """The increase from ``prev`` to ``cur`` (both already multiplied by ``scale``)."""
    top = ((1 << width) - 1) * scale
    if cur >= prev:
        if overflow is Overflow.SATURATE and cur >= top:
            return cur - prev, DeltaKind.SATURATED
        return cur - prev, DeltaKind.NORMAL
    if overflow is Overflow.WRAP and width < 64:
        wrapped = cur + (1 << width) * scale - prev
        if wrapped < (1 << (width - 1)) * scale:
            return wrapped, DeltaKind.WRAP
    return cur, DeltaKind.RESET


@dataclass(frozen=True, slots=True)
class PortView:
    """One port with its monotonic totals and per-second rates (keyed by raw counter name)."""

    sample: PortSample
    totals: Mapping[str, int] = field(default_factory=frozen_map)
    rates: Mapping[str, float] = field(default_factory=frozen_map)  # absent on the first tick
    saturated: frozenset[str] = frozenset()
    resets: frozenset[str] = frozenset()  # counters that went backwards this tick

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


@dataclass(frozen=True, slots=True)
class Observation:
    """A snapshot plus what the series layer derived from it and the previous one."""

    snapshot: Snapshot
    ports: tuple[PortView, ...]
    netdevs: Mapping[str, NetdevView]
    interval_s: float | None  # seconds since the previous snapshot; None on the first

    def netdev(self, name: str | None) -> NetdevView | None:
        return self.netdevs.get(name) if name else None


class _State:
    __slots__ = ("raw", "total")

    def __init__(self, raw: int) -> None:
        self.raw = raw
        self.total = raw


class SeriesTracker:
    """Stateful: feed snapshots in order, get observations out. One per daemon."""

    def __init__(self) -> None:
        self._state: dict[tuple[str, str], _State] = {}
        self._last_monotonic: float | None = None

    def update(self, snap: Snapshot) -> Observation:
        dt = None if self._last_monotonic is None else snap.monotonic - self._last_monotonic
        if dt is not None and dt <= 0:
            dt = None  # same or reordered tick: no rate rather than an infinite one
        seen: set[tuple[str, str]] = set()
        ports = tuple(self._port_view(p, dt, seen) for p in snap.ports)
        netdevs = {n: self._netdev_view(s, dt, seen) for n, s in snap.ethtool.items()}
        # Forget counters that disappeared, so a device that returns starts afresh
        # (its first reading becomes its total again) instead of producing a
        # bogus "reset" against a stale value from minutes ago.
        for key in [k for k in self._state if k not in seen]:
            del self._state[key]
        self._last_monotonic = snap.monotonic
        return Observation(snapshot=snap, ports=ports, netdevs=frozen_map(netdevs), interval_s=dt)

    def _port_view(self, p: PortSample, dt: float | None, seen: set[tuple[str, str]]) -> PortView:
        scope = f"{p.device}/{p.port}"
        totals: dict[str, int] = {}
        rates: dict[str, float] = {}
        saturated: set[str] = set()
        resets: set[str] = set()
        for raw, c in p.counters.items():
            kind = self._step((scope, raw), c, dt, totals, rates)
            seen.add((scope, raw))
            if kind is DeltaKind.SATURATED or (kind is None and c.saturated):
                saturated.add(raw)
            elif kind is DeltaKind.RESET:
                resets.add(raw)
        return PortView(p, frozen_map(totals), frozen_map(rates), frozenset(saturated), frozenset(resets))

    def _netdev_view(self, s: EthtoolSample, dt: float | None, seen: set[tuple[str, str]]) -> NetdevView:
        scope = f"netdev:{s.netdev}"
        totals: dict[str, int] = {}
        rates: dict[str, float] = {}
        for name, value in s.stats.items():
            seen.add((scope, name))
            self._advance((scope, name), value, dt, totals, rates)
        return NetdevView(s, frozen_map(totals), frozen_map(rates))

    def _step(
        self,
        key: tuple[str, str],
        c: Counter,
        dt: float | None,
        totals: dict[str, int],
        rates: dict[str, float],
    ) -> DeltaKind | None:
        return self._advance(key, c.value, dt, totals, rates, c.width, c.overflow, c.scale)

    def _advance(
        self,
        key: tuple[str, str],
        value: int,
        dt: float | None,
        totals: dict[str, int],
        rates: dict[str, float],
        width: int = 64,
        overflow: Overflow = Overflow.WRAP,
        scale: int = 1,
    ) -> DeltaKind | None:
        """Move one counter forward; None on its first reading (no delta yet)."""
        st = self._state.get(key)
        if st is None:
            self._state[key] = _State(value)
            totals[key[1]] = value
            return None
        delta, kind = counter_delta(st.raw, value, width=width, overflow=overflow, scale=scale)
        st.raw = value
        st.total += delta
        totals[key[1]] = st.total
        if dt is not None:
            rates[key[1]] = delta / dt
        return kind
