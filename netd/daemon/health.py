"""Tick health: whether the loop keeps its cadence, as values the exporter turns into metrics.

A tick is **late** when it starts more than :data:`LATE_FRACTION` of the interval after its slot
(a slow source, a busy CPU, a suspended VM); slots that pass with no tick at all (the loop fell more
than a whole interval behind and realigned) are **skipped**; slots passed over on purpose while the
host was calm (netd.daemon.cadence) are **passed**, neither late nor skipped. Tick durations (collect, series,
detection, scoring) go into a fixed-bucket histogram. The fast path's *achieved* interval is the
time between two ticks divided by the PFC samples taken in it (fast samples plus the tick's own),
next to the configured one, so a fast path that cannot keep up shows.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

__all__ = ["LATE_FRACTION", "TICK_BUCKETS", "TickHealth", "TickRecorder"]

LATE_FRACTION = 0.1
TICK_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass(frozen=True, slots=True)
class TickHealth:
    late: int = 0
    skipped: int = 0
    bucket_counts: tuple[int, ...] = (0,) * len(TICK_BUCKETS)  # per bucket, not cumulative
    over: int = 0  # durations above the last bucket
    duration_sum_s: float = 0.0
    fast_achieved_interval_s: float | None = None  # None: no fast path, or no two ticks yet
    passed: int = 0  # slots passed over while the host was calm
    calm: bool = False  # ticks are calm_interval apart now

    @property
    def count(self) -> int:
        return sum(self.bucket_counts) + self.over

    def cumulative(self) -> list[tuple[str, int]]:
        """Prometheus buckets: ``(le, count of durations <= le)`` ending with ``+Inf``."""
        out, running = [], 0
        for le, n in zip(TICK_BUCKETS, self.bucket_counts, strict=True):
            running += n
            out.append((f"{le:g}", running))
        out.append(("+Inf", running + self.over))
        return out


class TickRecorder:
    """Mutable, owned by the loop's thread; :meth:`health` gives the immutable value to publish."""

    def __init__(self) -> None:
        self._late = 0
        self._skipped = 0
        self._buckets = [0] * len(TICK_BUCKETS)
        self._over = 0
        self._sum = 0.0
        self._fast: float | None = None
        self._last_tick: float | None = None
        self._last_fast_samples = 0
        self._passed = 0
        self._calm = False

    def started(self, slot: float, started: float, interval_s: float) -> None:
        """A tick due at ``slot`` started at ``started``."""
        if started - slot > LATE_FRACTION * interval_s:
            self._late += 1

    def skipped(self, slots: int) -> None:
        self._skipped += max(0, slots)

    def passed(self) -> None:
        """A slot passed with no tick because the host was calm."""
        self._passed += 1

    def cadence(self, calm: bool) -> None:
        """Whether ticks are ``calm_interval`` apart from now on."""
        self._calm = calm

    def finished(self, duration_s: float, at: float, fast_samples: int | None) -> None:
        """A tick took ``duration_s`` and ended at ``at``; ``fast_samples``: the fast path's total so
        far (None when it is off)."""
        i = bisect.bisect_left(TICK_BUCKETS, duration_s)
        if i < len(self._buckets):
            self._buckets[i] += 1
        else:
            self._over += 1
        self._sum += duration_s
        if fast_samples is not None and self._last_tick is not None:
            taken = fast_samples - self._last_fast_samples + 1  # the tick reads pause counters too
            self._fast = (at - self._last_tick) / taken
        self._last_tick = at
        self._last_fast_samples = fast_samples or 0

    def health(self) -> TickHealth:
        return TickHealth(
            self._late,
            self._skipped,
            tuple(self._buckets),
            self._over,
            self._sum,
            self._fast,
            self._passed,
            self._calm,
        )
