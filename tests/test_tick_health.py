"""Tick health: late and skipped ticks, the duration histogram, the fast path's achieved interval."""

from __future__ import annotations

import pytest

from netd.daemon.health import TICK_BUCKETS, TickRecorder


def test_late_means_over_a_tenth_of_the_interval() -> None:
    r = TickRecorder()
    r.started(slot=10.0, started=10.05, interval_s=1.0)  # 5 % late: on time
    r.started(slot=11.0, started=11.2, interval_s=1.0)  # 20 %: late
    r.started(slot=12.0, started=12.02, interval_s=0.1)  # 20 % of a 0.1 s interval: late
    assert r.health().late == 2


def test_histogram_buckets_are_cumulative_with_inf() -> None:
    r = TickRecorder()
    for d in (0.0005, 0.001, 0.003, 0.2, 20.0):
        r.finished(d, at=0.0, fast_samples=None)
    h = r.health()
    assert h.count == 5 and h.duration_sum_s == pytest.approx(20.2045)
    le = dict(h.cumulative())
    assert (le["0.001"], le["0.005"], le["0.25"], le["10"], le["+Inf"]) == (2, 3, 4, 4, 5)
    assert list(le) == [f"{b:g}" for b in TICK_BUCKETS] + ["+Inf"]


def test_fast_path_achieved_interval_and_skips() -> None:
    r = TickRecorder()
    r.finished(0.01, at=100.0, fast_samples=0)
    assert r.health().fast_achieved_interval_s is None  # needs two ticks
    r.finished(0.01, at=101.0, fast_samples=4)  # asked for 0.1 s, got 4 samples + the tick in 1 s
    assert r.health().fast_achieved_interval_s == pytest.approx(0.2)
    r.skipped(3)
    assert r.health().skipped == 3
    off = TickRecorder()
    off.finished(0.01, at=1.0, fast_samples=None)
    off.finished(0.01, at=2.0, fast_samples=None)
    assert off.health().fast_achieved_interval_s is None


def test_the_loop_counts_skipped_and_late_ticks(mlx5_host) -> None:
    """A daemon whose ticks overrun their interval (on an injected clock: each tick moves it 0.12 s on,
    against a 0.05 s interval) counts the slots it skipped; every tick is in the histogram."""
    import threading
    import time

    from netd.daemon.loop import Daemon
    from netd.sources.collect import Sampler

    root, _ = mlx5_host
    offset = [0.0]

    class SlowDaemon(Daemon):
        def tick(self):  # type: ignore[no-untyped-def]
            offset[0] += 0.12  # the clock jumps as if collecting took 0.12 s
            return super().tick()

    daemon = SlowDaemon(
        Sampler(root, ethtool_backend="files"), 0.05, clock=lambda: time.monotonic() + offset[0]
    )
    stop = threading.Event()
    loop = threading.Thread(target=daemon.run, args=(stop,))
    loop.start()
    try:
        deadline = time.monotonic() + 20
        while (daemon.state() is None or daemon.state().ticks < 5) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        stop.set()
        loop.join(10)
        daemon.close()
    st = daemon.state()
    assert st is not None and st.ticks >= 5
    # every tick overran its slot by 0.07 s or more: at least 2 slots of 0.05 s skipped after each
    assert st.health.skipped >= 2 * (st.ticks - 1)
    assert st.health.count == st.ticks  # every tick's duration is in the histogram
    # after a skip the loop realigns: the next tick is on its new slot, not late (without the
    # realignment every tick after the first is late; a loaded machine may wake the odd one > 5 ms late)
    assert st.health.late <= (st.ticks - 1) // 2
