"""The daemon's stop flag, whose timed wait costs one poll(2).

Between ticks the loop waits for the next PFC fast-path sample ten times a second, on the flag that
stops it. ``threading.Event.wait(timeout)`` allocates a lock and sleeps in a timed futex wait; measured
on this project's VM: 120-140 µs of CPU per wake-up, against ~85 µs for poll(2) on a pipe and ~80 µs for
``time.sleep`` (which a stop could not interrupt). Ten wake-ups a second, that is ~0.05 % of a core of
the daemon's 1 % budget (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import select
import threading

__all__ = ["StopSignal"]


class StopSignal(threading.Event):
    """A ``threading.Event`` whose timed :meth:`wait` sleeps in poll(2) on a pipe that :meth:`set`
    writes to. Any number of threads may wait at once (each poll has its own poll object: one shared
    object refuses concurrent polls); an untimed wait is ``Event``'s own."""

    def __init__(self) -> None:
        super().__init__()
        self._r, self._w = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)

    def set(self) -> None:
        super().set()
        if self._w < 0:  # closed: nobody polls any more (a wait after close() finds the flag set)
            return
        try:
            os.write(self._w, b"\0")  # wakes every poller; never read while set
        except BlockingIOError:  # the pipe is full of earlier wake-ups: readable already
            pass

    def clear(self) -> None:
        super().clear()
        if self._r < 0:
            return
        try:
            while os.read(self._r, 4096):
                pass
        except BlockingIOError:
            pass

    def wait(self, timeout: float | None = None) -> bool:
        if timeout is None or self.is_set() or self._r < 0:
            return super().wait(timeout)
        poller = select.poll()
        poller.register(self._r, select.POLLIN)
        # poll(2) counts milliseconds; Python rounds a fraction up, so the wait is never cut short.
        poller.poll(max(0.0, timeout) * 1000.0)
        return self.is_set()

    def close(self) -> None:
        """Set the flag for good and release the pipe."""
        self.set()
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
        self._r = self._w = -1
