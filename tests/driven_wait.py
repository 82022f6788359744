"""A stop flag on a driven clock, for tests of the loop's waits (netd.detect.fast_wait, the daemon's
loop): a timed wait returns at once having moved the clock by the timeout. It is set once the clock
reaches ``end`` (never, without one); ``moved(before, after)`` is called after each move, so a test
world (a tree's counters) can follow the clock."""

from __future__ import annotations

import threading
from collections.abc import Callable


class DrivenWait(threading.Event):
    """``now`` is the test's clock (a one-element list its other callables read too)."""

    def __init__(
        self,
        now: list[float],
        end: float | None = None,
        moved: Callable[[float, float], None] | None = None,
    ) -> None:
        super().__init__()
        self.now = now
        self.end = end
        self.moved = moved

    def wait(self, timeout: float | None = None) -> bool:
        before = self.now[0]
        self.now[0] += timeout or 0.0
        if self.moved is not None:
            self.moved(before, self.now[0])
        if self.end is not None and self.now[0] >= self.end:
            self.set()
        return self.is_set()
