"""netd.daemon.stop.StopSignal: a threading.Event whose timed wait is one poll(2) on a pipe."""

from __future__ import annotations

import os
import threading
import time

from netd.daemon.stop import StopSignal


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_a_timed_wait_runs_out_unset_and_is_never_cut_short() -> None:
    stop = StopSignal()
    start = time.monotonic()
    assert stop.wait(0.05) is False and not stop.is_set()
    assert time.monotonic() - start >= 0.05  # poll(2) counts milliseconds: rounded up, never down
    assert stop.wait(0) is False and stop.wait(-1) is False
    stop.close()


def test_set_wakes_every_waiter_at_once() -> None:
    stop = StopSignal()
    woke: list[bool] = []
    waiters = [threading.Thread(target=lambda: woke.append(stop.wait(60.0))) for _ in range(4)]
    for w in waiters:
        w.start()
    time.sleep(0.05)  # let them poll (a set before they do is seen by is_set(): also correct)
    stop.set()
    for w in waiters:
        w.join(10.0)
    assert woke == [True] * 4  # long before their 60 s
    assert stop.wait(60.0) is True and stop.wait() is True
    stop.close()


def test_clear_drains_so_the_next_wait_sleeps_again() -> None:
    stop = StopSignal()
    for _ in range(3):
        stop.set()
    stop.clear()
    assert stop.wait(0.01) is False
    stop.set()
    assert stop.wait(0.01) is True
    stop.close()


def test_close_sets_it_for_good_and_releases_the_pipe() -> None:
    before = _fds()
    stop = StopSignal()
    assert _fds() == before + 2
    stop.close()
    assert _fds() == before
    assert stop.is_set() and stop.wait(5.0) is True
    stop.set()  # after close: nothing to write to, no error
    stop.clear()
    assert stop.wait(0.01) is False  # a plain Event's wait now
