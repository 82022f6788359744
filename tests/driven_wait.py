"""A stop flag on a driven clock, for tests of the loop's waits (netd.detect.fast_wait): it is never
set, and a timed wait returns at once having moved the clock by the timeout."""

from __future__ import annotations

import threading


class DrivenWait(threading.Event):
    """``now`` is the test's clock (a one-element list its other callables read too)."""

    def __init__(self, now: list[float]) -> None:
        super().__init__()
        self.now = now

    def wait(self, timeout: float | None = None) -> bool:
        self.now[0] += timeout or 0.0
        return False
