"""The feed: exact ethtool deltas per path, what the names mean, which netdevs the fast path reads."""

from __future__ import annotations

import random

import pytest

from netd.detect.feed import DetectFeed, NetdevDeltas
from netd.detect.inputs import InputPath
from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
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


def eth(netdev: str, **stats: int) -> dict[str, EthtoolSample]:
    return {netdev: EthtoolSample(netdev, frozen_map(stats))}


def test_deltas_skip_resets_irrelevant_names_and_a_missed_sample() -> None:
    d = NetdevDeltas()
    assert d.update(eth("n0", rx_prio3_pause=10, rx0_packets=5)) == {}  # first sample: nothing
    ((layout, deltas),) = d.update(eth("n0", rx_prio3_pause=15, rx0_packets=9)).values()
    assert deltas == {"rx_prio3_pause": 5.0}  # per-ring noise is not read
    assert d.update(eth("n0", rx_prio3_pause=3))["n0"][1] == {}  # went backwards: unknown
    d.update({})  # n0 missing from a sample...
    assert d.update(eth("n0", rx_prio3_pause=20)) == {}  # ...so its next delta would span two: none


def test_deltas_hold_a_glitch_back_and_scale_the_recovery() -> None:
    d = NetdevDeltas()
    line = {"n0": 100.0}  # 100 Gb/s: at most 2 * 100e9 / 8 / 64 = 3.9e8 pause frames per second
    d.update(eth("n0", rx_prio3_pause=1000), 1.0, line)
    assert d.update(eth("n0", rx_prio3_pause=1100), 1.0, line)["n0"][1] == {"rx_prio3_pause": 100.0}
    assert d.update(eth("n0", rx_prio3_pause=10**12), 1.0, line)["n0"][1] == {}  # held: not seen
    # the next sample continues from 1100: a glitch, discarded; this interval gets its share
    assert d.update(eth("n0", rx_prio3_pause=1300), 1.0, line)["n0"][1] == {"rx_prio3_pause": 100.0}
    # a restart: held, then confirmed, and the restart's interval stays unknown
    assert d.update(eth("n0", rx_prio3_pause=5), 1.0, line)["n0"][1] == {}
    assert d.update(eth("n0", rx_prio3_pause=25), 1.0, line)["n0"][1] == {}
    assert d.update(eth("n0", rx_prio3_pause=30), 1.0, line)["n0"][1] == {"rx_prio3_pause": 5.0}


def test_layout_maps_names_to_priority_fields() -> None:
    names = mlx5_ethtool_names((3, 4))
    d = NetdevDeltas()
    d.update({"n0": EthtoolSample("n0", frozen_map(dict.fromkeys(names, 0)))})
    stats = {n: i for i, n in enumerate(names)}
    layout, deltas = d.update({"n0": EthtoolSample("n0", frozen_map(stats))})["n0"]
    prios, warn, err = layout.read(deltas)
    assert [p.priority for p in prios] == [3, 4]
    p3 = prios[0]
    assert p3.rx_pause_frames == names.index("rx_prio3_pause")
    assert p3.tx_pause_us == names.index("tx_prio3_pause_duration")
    assert p3.tx_packets == names.index("tx_prio3_packets")
    assert p3.rx_discards == names.index("rx_prio3_discards")
    assert warn == names.index("tx_pause_storm_warning_events") and err == names.index(
        "tx_pause_storm_error_events"
    )


def port_sample(device: str, netdev: str, rx_packets: int, resets: bool = False) -> PortSample:
    c = Counter("port_rcv_packets", "rx_packets", CounterGroup.PMA, rx_packets, 64, Overflow.WRAP)
    s = Counter("symbol_error", "symbol_error", CounterGroup.PMA, 65535, 16, Overflow.SATURATE)
    return PortSample(
        device,
        1,
        netdev,
        "Ethernet",
        "ACTIVE",
        "LinkUp",
        200.0,
        counters=frozen_map({"port_rcv_packets": c, "symbol_error": s}),
    )


def test_tick_and_pfc_inputs() -> None:
    names = mlx5_ethtool_names((3,))
    tracker, feed = SeriesTracker(), DetectFeed()
    pause = names.index("rx_prio3_pause")

    def snap(t: float, rx: int, p: int) -> Snapshot:
        stats = dict.fromkeys(names, 0) | {"rx_prio3_pause": p, "link_down_events_phy": p // 100}
        return Snapshot(
            timestamp=1000 + t,
            monotonic=t,
            host="h",
            ports=(port_sample("mlx5_0", "n0", rx), port_sample("mlx5_1", "n1", rx)),
            ethtool=frozen_map(eth("n0", **stats)),
        )

    feed.tick_input(tracker.update(snap(0.0, 0, 0)))
    assert feed.pfc_netdevs() == ["n0"]  # n1 has no ethtool statistics at all
    inp = feed.tick_input(tracker.update(snap(1.0, 1000, 100)))
    assert inp.path is InputPath.TICK and inp.interval_s == 1.0
    p0 = inp.port("mlx5_0", 1)
    assert p0 is not None and p0.counter("rx_packets") == 1000.0
    assert p0.counter("symbol_error") is None and p0.saturated == frozenset({"symbol_error"})
    assert p0.priorities[0].rx_pause_frames == 100.0 and p0.netdev_counters["link_down_events_phy"] == 1.0
    # the PFC path keeps its own previous sample
    s = snap(1.1, 1000, 150)
    assert feed.pfc_input(s.ethtool, 1.1, 1001.1).ports == ()  # its first sample
    s = snap(1.2, 1000, 170)
    pfc = feed.pfc_input(s.ethtool, 1.2, 1001.2)
    assert pfc.path is InputPath.PFC and round(pfc.interval_s or 0, 6) == 0.1
    assert [(p.device, p.priorities[0].rx_pause_frames) for p in pfc.ports] == [("mlx5_0", 20.0)]
    assert pause >= 0


def test_the_pfc_path_fetches_only_what_its_detectors_read() -> None:
    """A fast sample (12 a second) reads pause frames and time, packets and the NIC's storm events;
    transitions and discards are judged at ticks only, where the full sample still has them."""
    names = mlx5_ethtool_names((3,))
    stats = {n: i for i, n in enumerate(names)}
    tracker, feed = SeriesTracker(), DetectFeed()
    for t in (0.0, 1.0):
        snap = Snapshot(
            timestamp=1000 + t,
            monotonic=t,
            host="h",
            ports=(port_sample("mlx5_0", "n0", 0),),
            ethtool=frozen_map(eth("n0", **{n: v * int(1 + t) for n, v in stats.items()})),
        )
        inp = feed.tick_input(tracker.update(snap))
    assert set(feed.pfc_wanted()["n0"]) == {
        "rx_prio3_pause",
        "rx_prio3_pause_duration",
        "tx_prio3_pause",
        "tx_prio3_pause_duration",
        "rx_prio3_packets",
        "tx_prio3_packets",
        "tx_pause_storm_warning_events",
        "tx_pause_storm_error_events",
    }
    tick = inp.port("mlx5_0", 1)
    assert tick is not None
    assert tick.priorities[0].rx_discards == stats["rx_prio3_discards"]
    assert tick.priorities[0].rx_pause_transitions == stats["rx_prio3_pause_transition"]


def _walk(seed: int, samples: int) -> list[dict[str, dict[str, int]]]:
    """Per sample, netdev -> statistics: most stay, a few move, some glitch, reset, repeat a held
    value, or go missing (a statistic, or the whole netdev) for a sample."""
    rng = random.Random(seed)
    names = ["rx_prio3_pause", "tx_prio3_pause", "rx_prio3_pause_duration", "rx_prio3_packets", "rx0_packets"]
    values = {n: {s: rng.randrange(1000) for s in names} for n in ("n0", "n1")}
    out = []
    for i in range(samples):
        snap: dict[str, dict[str, int]] = {}
        for netdev, stats in values.items():
            for s in rng.sample(names, 2):
                stats[s] += rng.randrange(0, 3000)
            shown = dict(stats)
            r = rng.random()
            if r < 0.1:
                shown[rng.choice(names)] = 10**15  # a glitch, sometimes read twice
            elif r < 0.2:
                s = rng.choice(names)
                stats[s] = shown[s] = rng.randrange(5)  # a reset, often read the same next time
            elif r < 0.25:
                shown.pop(rng.choice(names))
            if not (netdev == "n1" and i % 13 == 7):
                snap[netdev] = shown
        out.append(snap)
    return out


@pytest.mark.parametrize("seed", range(6))
def test_deltas_equal_the_counter_model_stepped_per_statistic(seed: int) -> None:
    """NetdevDeltas (which looks only at statistics that changed or are held) against each relevant
    statistic stepped through its own CounterTrack every sample, with the feed's rules: no delta for
    a first reading, a reset or a held reading; a discarded glitch's interval at the rate over both;
    a netdev or a statistic missing from a sample starts afresh."""
    d = NetdevDeltas()
    model: dict[tuple[str, str], CounterTrack] = {}
    line = {"n0": 100.0, "n1": 100.0}
    seen_before: set[str] = set()
    held_twice = 0
    for snap in _walk(seed, 120):
        got = d.update({n: EthtoolSample(n, frozen_map(s)) for n, s in snap.items()}, 1.0, line)
        for key in [k for k in model if k[0] not in snap or k[1] not in snap[k[0]]]:
            del model[key]
        for netdev, stats in snap.items():
            expected: dict[str, float] = {}
            for name, value in stats.items():
                if name == "rx0_packets":
                    continue  # per-ring noise: not relevant
                track = model.get((netdev, name))
                if track is None or netdev not in seen_before:
                    model[(netdev, name)] = CounterTrack(value)
                    continue
                was_held = track.held is not None and track.held == value
                before = track.total
                kind, rate = track.step(value, 1.0, ceiling_per_s(name, 100.0))
                held_twice += was_held
                if kind in (DeltaKind.NORMAL, DeltaKind.WRAP):
                    expected[name] = float(track.total - before)
                elif kind is DeltaKind.DISCARDED and rate is not None:
                    expected[name] = rate
            if netdev in seen_before:
                assert got[netdev][1] == expected, netdev
            else:
                assert netdev not in got
        seen_before = set(snap)
    assert held_twice  # the walk read a held value again: the case only the held list catches
