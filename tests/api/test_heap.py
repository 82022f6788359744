"""SettledHeap: what a refresh builds leaves the collector's sight, is still freed when dropped, and
every few minutes the collector sees everything again (cycles frozen meanwhile are reclaimed)."""

from __future__ import annotations

import gc
import time
import weakref

import pytest

from netd.api.heap import SettledHeap


class Score:  # tracked by the collector, like the view's port scores
    def __init__(self, n: int) -> None:
        self.labels = {"host": f"node-{n}"}


@pytest.fixture(autouse=True)
def _thawed():
    yield
    gc.unfreeze()
    gc.enable()


def test_a_refresh_is_frozen_but_still_freed_when_dropped():
    gc.unfreeze()
    with SettledHeap().refresh() as settle:
        assert not gc.isenabled()  # no collection walks the view while it is being built
        view = [Score(n) for n in range(20_000)]
        settle.ports = len(view)
    assert gc.isenabled()
    assert gc.get_freeze_count() >= 20_000
    tracked = {id(o) for o in gc.get_objects()}
    assert not any(id(s) in tracked for s in view[:100])  # no collection will walk them
    gone = weakref.ref(view[0])
    del view  # no cycle: reference counting frees a frozen object
    assert gone() is None


def test_a_refresh_minutes_after_the_last_unfreeze_lets_the_collector_reclaim_frozen_cycles():
    gc.unfreeze()
    now = [time.monotonic() + 1e6]  # later than any refresh other tests made (the period is per process)
    heap = SettledHeap(unfreeze_every_s=300.0, clock=lambda: now[0], big_ports=0)
    with heap.refresh():  # the period starts here
        pass
    with heap.refresh():
        a, b = Score(1), Score(2)
        a.peer, b.peer = b, a  # type: ignore[attr-defined]
        gone = weakref.ref(a)
    del a, b
    now[0] += 299.0
    with heap.refresh():
        pass
    gc.collect()
    assert gone() is not None  # a frozen cycle outlives collections...
    now[0] += 2.0
    with heap.refresh():
        pass
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None  # ...until the first refresh 5 minutes after the last unfreeze


def test_a_small_view_is_not_frozen():
    gc.unfreeze()
    with SettledHeap().refresh() as settle:
        view = [Score(n) for n in range(100)]
        settle.ports = len(view)
    assert gc.isenabled() and gc.get_freeze_count() == 0


def test_a_disabled_collector_stays_disabled():
    gc.disable()
    with SettledHeap().refresh():
        pass
    assert not gc.isenabled()
