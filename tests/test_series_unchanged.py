"""The series tracker's shortcuts for readings that did not change (netdev statistics compared as
value tuples, RDMA counters equal to their last accepted value) give exactly what stepping every
counter through the counter model gives, through glitches, resets, held readings and new names."""

from __future__ import annotations

import random

import pytest

from netd.model.snapshot import (
    Counter,
    CounterGroup,
    EthtoolSample,
    Overflow,
    PortSample,
    Snapshot,
    frozen_map,
)
from netd.series.counter_model import CounterTrack, DeltaKind, ceiling_per_s
from netd.series.tracker import SeriesTracker

NAMES = [f"rx_prio{p}_{k}" for p in range(4) for k in ("pause", "pause_duration", "packets", "bytes")]


def _walk(seed: int, ticks: int) -> list[dict[str, dict[str, int]]]:
    """Per tick, netdev -> statistics: most stay, some move, some glitch, reset or vanish."""
    rng = random.Random(seed)
    values = {n: {s: rng.randrange(1000) for s in NAMES} for n in ("ens1f0np0", "ens1f1np1")}
    out = []
    for tick in range(ticks):
        snap: dict[str, dict[str, int]] = {}
        for netdev, stats in values.items():
            for s in rng.sample(NAMES, 3):  # a calm netdev: a few statistics move
                stats[s] += rng.randrange(1, 5000)
            shown = dict(stats)
            r = rng.random()
            if r < 0.1:
                shown[rng.choice(NAMES)] = 2**40  # a one-read glitch
            elif r < 0.15:
                s = rng.choice(NAMES)
                stats[s] = shown[s] = rng.randrange(10)  # a reset
            elif r < 0.2:
                shown.pop(rng.choice(NAMES))  # a statistic missing this tick
            if not (netdev == "ens1f1np1" and tick % 17 == 5):  # a netdev missing for a tick
                snap[netdev] = shown
        out.append(snap)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_netdev_views_equal_the_counter_model_stepped_per_statistic(seed: int) -> None:
    tracker = SeriesTracker()
    model: dict[tuple[str, str], CounterTrack] = {}
    last_t: float | None = None
    events = 0
    for tick, snap in enumerate(_walk(seed, 60)):
        t = float(tick)
        ethtool = frozen_map({n: EthtoolSample(n, frozen_map(s)) for n, s in snap.items()})
        obs = tracker.update(Snapshot(timestamp=1e9 + t, monotonic=t, host="h", ethtool=ethtool))
        dt = None if last_t is None else t - last_t
        last_t = t
        present = {(n, s) for n, stats in snap.items() for s in stats}
        for key in [k for k in model if k not in present and k[0] not in snap] + [
            k for k in model if k[0] in snap and k not in present
        ]:
            del model[key]  # the tracker forgets what vanished, so a return starts afresh
        for netdev, stats in snap.items():
            view = obs.netdevs[netdev]
            rates: dict[str, float] = {}
            totals: dict[str, int] = {}
            held = set()
            for name, value in stats.items():
                track = model.get((netdev, name))
                if track is None:
                    model[(netdev, name)] = track = CounterTrack(value)
                else:
                    kind, rate = track.step(value, dt, ceiling_per_s(name, None))
                    if rate is not None:
                        rates[name] = rate
                    if kind is DeltaKind.HELD:
                        held.add(name)
                    events += kind not in (DeltaKind.NORMAL, DeltaKind.SATURATED)
                totals[name] = track.total
            assert dict(view.totals) == totals, (tick, netdev)
            assert dict(view.rates) == rates, (tick, netdev)
            assert view.held == held, (tick, netdev)
    assert sum(tracker.events.values()) == events > 0


# RDMA port counters: (raw name, width, overflow); a 16-bit saturating PMA error counter among them
SPECS = [
    ("port_rcv_packets", 64, Overflow.WRAP),
    ("np_cnp_sent", 32, Overflow.WRAP),
    ("symbol_error", 16, Overflow.SATURATE),
    ("out_of_sequence", 32, Overflow.WRAP),
]


def _port_walk(seed: int, ticks: int, slow_every: int = 0) -> list[tuple[dict[str, int], bool]]:
    """Per tick: the readings of a port's counters (a few move; a glitch, a reset often read the same
    next time, a saturating counter stuck at all-ones) and whether the slow-cadence ones were read
    (every ``slow_every`` ticks, in between they stand as last read; 0: every tick)."""
    rng = random.Random(seed)
    values = {name: rng.randrange(100) for name, _, _ in SPECS}
    shown_slow: dict[str, int] = {}
    out = []
    for tick in range(ticks):
        for name in rng.sample(list(values), 2):
            values[name] += rng.randrange(0, 800)
        shown = dict(values)
        r = rng.random()
        if r < 0.1:
            shown[rng.choice(list(values))] = 2**50  # a glitch
        elif r < 0.2:
            name = rng.choice(list(values))
            values[name] = shown[name] = rng.randrange(3)  # a reset
        elif r < 0.3:
            values["symbol_error"] = shown["symbol_error"] = 2**16 - 1  # stuck at all-ones
        slow_read = not slow_every or tick % slow_every == 0
        if slow_every and slow_read:
            shown_slow = {n: shown[n] for n in _SLOW}
        out.append(({**shown, **shown_slow}, slow_read))
    return out


_SLOW = frozenset({"symbol_error", "np_cnp_sent"})


def _readings(shown: dict[str, int], last: dict[str, Counter] | None = None) -> dict[str, Counter]:
    """The port's Counters as read; with ``last``, a reading equal to its last is the very Counter of
    the last tick, as the RDMA source hands it over (the tracker's identity shortcut)."""
    made = {
        name: Counter(name, name, CounterGroup.PMA, min(shown[name], 2**width - 1), width, overflow)
        for name, width, overflow in SPECS
    }
    if last is None:
        return made
    return {n: last[n] if n in last and last[n] == c else c for n, c in made.items()}


def _port(counters: dict[str, Counter], slow: bool = False, slow_read: bool = True) -> PortSample:
    return PortSample(
        "mlx5_0",
        1,
        None,
        "Ethernet",
        "ACTIVE",
        "LinkUp",
        100.0,
        counters=frozen_map(counters),
        slow_counters=_SLOW if slow else frozenset(),
        slow_read=slow_read,
    )


@pytest.mark.parametrize("reuse", [False, True], ids=["new-readings", "reused-readings"])
@pytest.mark.parametrize("seed", [4, 5, 6])
def test_port_views_equal_the_counter_model_stepped_per_counter(seed: int, reuse: bool) -> None:
    """``reuse``: a counter that reads as at the last tick is the very Counter of the last tick (the
    tracker's identity shortcut); else a new one every tick."""
    tracker = SeriesTracker()
    model: dict[str, CounterTrack] = {}
    last: dict[str, Counter] = {}
    for tick, (shown, _) in enumerate(_port_walk(seed, 80)):
        t = float(tick)
        counters = _readings(shown, last if reuse else None)
        last = counters
        snap = Snapshot(timestamp=1e9 + t, monotonic=t, host="h", ports=(_port(counters),))
        view = tracker.update(snap).ports[0]
        rates: dict[str, float] = {}
        saturated, held = set(), set()
        for name, c in counters.items():
            track = model.get(name)
            if track is None:
                model[name] = track = CounterTrack(c.value)
                if c.saturated:
                    saturated.add(name)
                continue
            kind, rate = track.step(
                c.value, 1.0 if tick else None, ceiling_per_s(name, 100.0), c.width, c.overflow
            )
            if rate is not None:
                rates[name] = rate
            saturated |= {name} if kind is DeltaKind.SATURATED else set()
            held |= {name} if kind is DeltaKind.HELD else set()
        assert dict(view.totals) == {n: model[n].total for n in counters}, tick
        assert (dict(view.rates), view.saturated, view.held) == (rates, saturated, held), tick


@pytest.mark.parametrize("seed", [7, 8, 9, 10])
def test_reused_port_readings_give_the_views_of_new_ones_with_slow_counters(seed: int) -> None:
    """Two trackers, one fed the last tick's Counter objects for unchanged readings (as the RDMA
    source does, slow counters carried as the same objects between their reads), the other new
    objects every tick (every counter looked at): the same views, tick after tick, through slow
    reads, glitches, resets and saturation, and a tick whose interval is unknown."""
    reused, fresh = SeriesTracker(), SeriesTracker()
    last: dict[str, Counter] = {}
    monotonic = 0.0
    for tick, (shown, slow_read) in enumerate(_port_walk(seed, 90, slow_every=5)):
        monotonic += 0.0 if tick == 40 else 1.0  # the same monotonic twice: no interval
        last = _readings(shown, last)
        views = []
        for tracker, counters in ((reused, last), (fresh, _readings(shown))):
            port = _port(counters, slow=True, slow_read=slow_read)
            snap = Snapshot(timestamp=1e9 + monotonic, monotonic=monotonic, host="h", ports=(port,))
            views.append(tracker.update(snap).ports[0])
        a, b = views
        assert (dict(a.totals), dict(a.rates)) == (dict(b.totals), dict(b.rates)), tick
        assert (a.saturated, a.resets, a.held, a.wrapped) == (b.saturated, b.resets, b.held, b.wrapped), tick
    assert reused.events == fresh.events
    assert fresh.events  # the walk did glitch and reset
