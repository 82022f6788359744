"""Keeping a big view out of the cyclic garbage collector's way while a listener serves.

A 5000-node cluster view is ~250,000 tracked objects (40,000 port scores with their label, signal
and contribution maps), replaced at every refresh. Building the next one allocates as many again,
which sets off full (generation 2) collections that walk the whole heap with the interpreter lock
held: 130-680 ms each, two or three per refresh, measured under `netd bench api` (issue 18). Every
request that arrives meanwhile waits, whatever the thread or process that would answer it.

:meth:`SettledHeap.refresh` wraps a refresh: automatic collection is paused while it builds (so the new
objects are not walked while young), and afterwards every object alive is frozen (``gc.freeze``:
moved to the permanent generation that collections skip). Frozen objects are still freed by
reference counting when the next refresh drops them (a view holds no reference cycles); only cyclic
garbage that was alive at a freeze would stay, so a refresh at least ``UNFREEZE_EVERY_S`` (5 min)
after the last unfreeze unfreezes instead, and the collection after it reclaims such cycles: one full
walk every 5 minutes instead of two or three per refresh. The period is kept per process, not per
view: an unfreeze thaws every view, and a small view refreshed twice a second beside a big one
(`netd bench api`) unfroze the big one every 15 s when each view counted its own refreshes.
"""

from __future__ import annotations

import contextlib
import gc
import threading
import time
from collections.abc import Callable, Iterator

__all__ = ["BIG_VIEW_PORTS", "UNFREEZE_EVERY_S", "Settle", "SettledHeap"]

UNFREEZE_EVERY_S = 300.0
BIG_VIEW_PORTS = 10_000  # ~1250 hosts x 8 rails; below, a full collection takes a few ms
_lock = threading.Lock()  # gc's switches are process-wide: one refresh at a time decides them
_last_unfreeze: list[float | None] = [None]  # process-wide too: any view's unfreeze thaws every view


class Settle:
    """What the refresh says about the view it built: how many ports (set inside ``with``)."""

    ports = 0


class SettledHeap:
    """One per refreshing view; :meth:`refresh` wraps each of its refreshes. Views under
    ``big_ports`` ports are not frozen: a full collection over them is short, and a test suite's
    many small views must not keep each other's cycles alive."""

    def __init__(
        self,
        unfreeze_every_s: float = UNFREEZE_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        big_ports: int = BIG_VIEW_PORTS,
    ) -> None:
        self.unfreeze_every_s, self.clock, self.big_ports = unfreeze_every_s, clock, big_ports

    @contextlib.contextmanager
    def refresh(self) -> Iterator[Settle]:
        with _lock:
            enabled = gc.isenabled()
            gc.disable()
            settle = Settle()
            try:
                yield settle
            finally:
                if settle.ports >= self.big_ports:
                    self._settle()
                if enabled:
                    gc.enable()

    def _settle(self) -> None:
        now, last = self.clock(), _last_unfreeze[0]
        if last is None:
            _last_unfreeze[0] = now
        if last is not None and now - last >= self.unfreeze_every_s:
            gc.unfreeze()
            _last_unfreeze[0] = now
        else:
            gc.freeze()
