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
garbage that was alive at a freeze would stay, so every ``UNFREEZE_EVERY``-th refresh unfreezes
instead, and the collection after it reclaims such cycles (one full walk instead of two or three per
refresh).
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

__all__ = ["UNFREEZE_EVERY", "SettledHeap"]

UNFREEZE_EVERY = 30
_lock = threading.Lock()  # gc's switches are process-wide: one refresh at a time decides them


class SettledHeap:
    """One per refreshing view; :meth:`refresh` wraps each of its refreshes."""

    def __init__(self, unfreeze_every: int = UNFREEZE_EVERY) -> None:
        self.unfreeze_every = unfreeze_every
        self.refreshes = 0

    @contextlib.contextmanager
    def refresh(self) -> Iterator[None]:
        with _lock:
            enabled = gc.isenabled()
            gc.disable()
            try:
                yield
            finally:
                self.refreshes += 1
                if self.refreshes % self.unfreeze_every == 0:
                    gc.unfreeze()
                else:
                    gc.freeze()
                if enabled:
                    gc.enable()
