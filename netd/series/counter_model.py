"""One counter's life: deltas, wraps, resets, glitches and saturation (docs/metrics.md, Counter rules).

A counter read from sysfs or ethtool is a claim, not a fact: a driver reload restarts it, a 32-bit
register wraps, a firmware hiccup returns one wild value, a PMA error counter sticks at all-ones.
A rate derived naively from two readings turns each of these into a spike that pages someone, so
every reading is classified against the last *accepted* one:

* **normal / wrap** — the increase (unwrapped per the declared width) is *plausible*: at most what
  the port's line rate allows for that counter over the interval (:func:`ceiling_per_s`). Accepted.
* **saturated** — a saturating counter at all-ones: accepted, its rate unknown (never 0).
* anything else (a decrease that is not a plausible wrap, an implausible increase) is **held**: no
  rate for this interval, the total unchanged, and the next reading decides:

  - it continues the series before the held value plausibly: the held value was a **glitch** and is
    discarded; the rate covers both intervals;
  - it continues from the held value plausibly: the held value is **confirmed**. Below the old value
    it is a **reset** (new baseline; the value counts as events since the restart when that is
    plausible, like Prometheus); above it a **jump** (new baseline, the step itself is not events);
  - neither: the new value is held instead (a counter that keeps jumping has no rate at all).

Totals start at the first reading and only grow, whatever happens, so exported ``_total`` series
never go backwards. Nothing downstream ever sees a held value, which is how a one-read glitch can
never open a finding (docs/detection.md, Confirmed rates).
"""

from __future__ import annotations

import enum
import functools

from netd.model.snapshot import Overflow

__all__ = ["DEFAULT_LINE_GBPS", "CounterTrack", "DeltaKind", "ceiling_per_s", "counter_delta"]

DEFAULT_LINE_GBPS = 800.0  # the fastest Ethernet/IB port shipping: the bound when `rate` is unknown
_HEADROOM = 2.0  # driver caching (hw_counters lifespan) can squeeze two intervals' counts into one
_MIN_SPAN_S = 0.1  # an interval shorter than this is judged as this long, for the same reason
_MIN_FRAME_BYTES = 64  # the smallest Ethernet frame; IB packets are counted against the same bound
_US_PER_S = 1e6


class DeltaKind(enum.Enum):
    NORMAL = "normal"
    WRAP = "wrap"
    RESET = "reset"  # confirmed restart below the last value
    JUMP = "jump"  # confirmed step above what the line rate allows
    SATURATED = "saturated"
    HELD = "held"  # implausible reading, judged at the next one
    DISCARDED = "discarded"  # the held reading was a glitch; this reading continues the series


def counter_delta(
    prev: int, cur: int, *, width: int = 64, overflow: Overflow = Overflow.WRAP, scale: int = 1
) -> tuple[int, DeltaKind]:
    """The arithmetic increase from ``prev`` to ``cur`` (both already multiplied by ``scale``).

    Never negative. A decrease is a wrap only for a wrapping counter narrower than 64 bits whose
    previous value fits its width and whose wrapped delta is under half the range; otherwise it is
    a reset candidate with the new value as the delta. Plausibility is :class:`CounterTrack`'s job.
    """
    top = ((1 << width) - 1) * scale
    if cur >= prev:
        if overflow is Overflow.SATURATE and cur >= top:
            return cur - prev, DeltaKind.SATURATED
        return cur - prev, DeltaKind.NORMAL
    if overflow is Overflow.WRAP and width < 64 and prev <= top:
        # prev <= top: a reading above the declared width (one bad read, or a wider register) cannot
        # be unwrapped against that width; the subtraction would go negative.
        wrapped = cur + (1 << width) * scale - prev
        if wrapped < (1 << (width - 1)) * scale:
            return wrapped, DeltaKind.WRAP
    return cur, DeltaKind.RESET


@functools.lru_cache(maxsize=4096)
def ceiling_per_s(name: str, line_gbps: float | None) -> float | None:
    """The largest plausible increase per second of counter ``name`` on a port of ``line_gbps``.

    Bytes at line rate; pause durations (µs) at one second per second; ``port_xmit_wait`` (ticks
    of an implementation-defined clock) unbounded; every other counter counts packets or events at
    most once per minimum-size frame. Each bound has 2x headroom.
    """
    if "xmit_wait" in name:
        return None
    if "duration" in name:
        return _US_PER_S * _HEADROOM
    gbps = line_gbps if line_gbps and line_gbps > 0 else DEFAULT_LINE_GBPS
    bytes_per_s = gbps * 1e9 / 8
    if "bytes" in name or name.endswith("_data"):
        return bytes_per_s * _HEADROOM
    return bytes_per_s / _MIN_FRAME_BYTES * _HEADROOM


def _plausible(delta: int, span_s: float | None, ceiling: float | None) -> bool:
    if ceiling is None or span_s is None:
        return True
    return delta <= ceiling * max(span_s, _MIN_SPAN_S)


_ACCEPTABLE = (DeltaKind.NORMAL, DeltaKind.WRAP, DeltaKind.SATURATED)


class CounterTrack:
    """The state of one counter: last accepted raw value, monotonic total, held reading."""

    __slots__ = ("held", "held_span", "raw", "total")

    def __init__(self, value: int) -> None:
        self.raw = value
        self.total = value
        self.held: int | None = None
        self.held_span: float | None = None  # seconds from the accepted reading to the held one

    def step(
        self,
        value: int,
        dt: float | None,
        ceiling: float | None,
        width: int = 64,
        overflow: Overflow = Overflow.WRAP,
        scale: int = 1,
    ) -> tuple[DeltaKind, float | None]:
        """Take one reading ``dt`` seconds after the previous one; ``(kind, rate)`` with the rate per
        second over the interval it covers, None when unknown."""
        if self.held is None:
            # The common case inline (thousands of counters per tick): a plausible increase below
            # the top of a saturating counter's range.
            delta = value - self.raw
            if (
                delta >= 0
                and (
                    ceiling is None
                    or dt is None
                    or delta <= ceiling * (dt if dt > _MIN_SPAN_S else _MIN_SPAN_S)
                )
                and (overflow is Overflow.WRAP or value < ((1 << width) - 1) * scale)
            ):
                self.raw = value
                self.total += delta
                return DeltaKind.NORMAL, delta / dt if dt else None
        else:
            return self._judge_held(value, dt, ceiling, width, overflow, scale)
        delta, kind = counter_delta(self.raw, value, width=width, overflow=overflow, scale=scale)
        if kind is DeltaKind.SATURATED:
            self._accept(value, delta)
            return kind, None
        if kind is not DeltaKind.RESET and _plausible(delta, dt, ceiling):
            self._accept(value, delta)
            return kind, None if not dt else delta / dt
        self.held, self.held_span = value, dt
        return DeltaKind.HELD, None

    def _judge_held(
        self, value: int, dt: float | None, ceiling: float | None, width: int, overflow: Overflow, scale: int
    ) -> tuple[DeltaKind, float | None]:
        held, held_span = self.held, self.held_span
        assert held is not None
        self.held = self.held_span = None
        span = None if dt is None or held_span is None else held_span + dt
        # Two readings of history: the held value was a glitch (the series continues from the
        # accepted value), or it was true (a restart or a step, and the series continues from it).
        delta, kind = counter_delta(self.raw, value, width=width, overflow=overflow, scale=scale)
        glitch = kind in _ACCEPTABLE and _plausible(delta, span, ceiling)
        after, after_kind = counter_delta(held, value, width=width, overflow=overflow, scale=scale)
        true = after_kind in _ACCEPTABLE and _plausible(after, dt, ceiling)
        restarted = held < self.raw
        # After a restart the held value is what was counted since; a jump's step is not events.
        since = held if restarted and _plausible(held, held_span, ceiling) else 0
        # When both fit, the one that counts fewer events wins: a fabricated count is what pages
        # people (a 32-bit counter reset from 3e9 to 3 also "wraps" by 1.3e9 over two seconds).
        if glitch and not (true and since + after < delta):
            self._accept(value, delta)
            return DeltaKind.DISCARDED, None if kind is DeltaKind.SATURATED or not span else delta / span
        if true:
            self._accept(value, since + after)
            rate = None if after_kind is DeltaKind.SATURATED or not dt else after / dt
            return (DeltaKind.RESET if restarted else DeltaKind.JUMP), rate
        self.held, self.held_span = value, span  # neither: this reading is the suspect now
        return DeltaKind.HELD, None

    def _accept(self, value: int, delta: int) -> None:
        self.raw = value
        self.total += delta
