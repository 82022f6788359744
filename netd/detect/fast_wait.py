"""The loop's wait between ticks, taking the PFC fast path's samples on the way.

The daemon's loop (netd.daemon.loop) waits here for its next tick; ``netd bench detect``'s replay
schedules its simulated samples by the same rule (the last slot before a tick is the tick's). A bad
sample or a bad answer about the cadence is logged and the wait goes on: the loop outlives both, as
it outlives a bad tick.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

__all__ = ["before_tick", "wait_running_fast_path"]

log = logging.getLogger("netd.anomalies")


def _asked(interval: Callable[[], float]) -> float:
    """The fast-path interval, or 0 (no more samples before the tick) when asking it raised: like a
    bad sample, a bad answer must not end the loop (the tick asks again, and logs it again)."""
    try:
        return interval()
    except Exception:
        log.exception("fast-path interval failed; sampling at ticks only until the next tick")
        return 0.0


def before_tick(slot: float, until: float, step: float) -> bool:
    """Whether a sample due at ``slot`` is taken before the tick at ``until``: the last slot, within
    half an interval of the tick, is the tick's (a sample there would mostly repeat it)."""
    return slot <= until - step / 2


def wait_running_fast_path(
    until: float,
    fast_s: float | Callable[[], float],
    stop: threading.Event,
    clock: Callable[[], float],
    sample: Callable[[], None],
) -> bool:
    """Wait until ``until`` (True when ``stop`` was set), taking a fast-path sample every ``fast_s``
    meanwhile (a callable is asked again after every sample: the adaptive cadence); the last slot
    before ``until`` is left to the tick itself, and slots missed while a sample ran late are
    skipped, not bunched."""
    interval = fast_s if callable(fast_s) else (lambda: fast_s)
    step = _asked(interval)
    if step > 0:
        slot = clock() + step
        while before_tick(slot, until, step):
            if stop.wait(max(0.0, slot - clock())):
                return True
            try:
                sample()
            except Exception:  # like a tick: the loop outlives a bad sample
                log.exception("fast-path sample failed")
            now = clock()
            step = _asked(interval)
            if step <= 0:
                break
            slot += step
            while slot < now:
                slot += step
    return stop.wait(max(0.0, until - clock()))
