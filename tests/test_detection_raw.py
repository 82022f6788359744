"""The fast path's calm samples compared unparsed (netd.sources.ethtool_raw): a detection that reads
captures through ``EthtoolSource.read_raw`` opens, escalates and resolves exactly what one reading the
same captures parsed does, at the same moments, while parsing only the samples it evaluates."""

from __future__ import annotations

import os
from pathlib import Path

from netd.config.settings import load_config
from netd.detect.findings import FindingEvent
from netd.detect.service import Detection
from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.model.snapshot import EthtoolSample, PortSample, Snapshot, frozen_map
from netd.series.tracker import SeriesTracker
from netd.sources.ethtool import CapturedStatsReader, EthtoolSource, format_ethtool_text

NAMES = mlx5_ethtool_names((3,))


class CountingReader(CapturedStatsReader):
    """A capture reader that counts the samples it parses (pick) and the whole reads (read_some)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.picks = 0

    def pick(self, raw, names):  # type: ignore[no-untyped-def,override]
        self.picks += 1
        return super().pick(raw, names)


def _write(root: Path, stats: dict[str, int] | None, damaged: bool = False) -> None:
    path = root / "ethtool" / "n0"
    path.parent.mkdir(exist_ok=True)
    if stats is None:
        path.unlink(missing_ok=True)
        return
    data = format_ethtool_text(stats).encode()
    if damaged:  # a value the search cannot vouch for: parsed whole, that value skipped
        data = data.replace(b"rx_prio3_pause: ", b"rx_prio3_pause: x", 1)
    tmp = path.with_name(".n0")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # a new inode, as a replayed tree is written


def _script() -> list[tuple[str, float]]:
    """(what happens before the sample, seconds since the last sample): 30 s of a host's fast path."""
    steps: list[tuple[str, float]] = []
    for second in range(30):
        kind = {
            3: "storm",  # a stuck receiver from here ...
            4: "storm",
            5: "storm",
            9: "glitch",  # a pause counter that reads lower once, then as before
            12: "packets",  # traffic, no pause
            15: "vanish",  # the capture is gone for a sample
            18: "damaged",
            21: "partial",  # a congested priority: some pause every sample
            22: "partial",
            26: "storm",
        }.get(second, "calm")
        steps += [(kind, 0.1)] * 9 + [("tick", 0.1)]
    return steps


def _run(root: Path, raw: bool) -> tuple[list[tuple[str, str, float]], int, int, int]:
    now = [0.0]
    events: list[FindingEvent] = []
    cfg = load_config(None, environ={}).detect
    reader = CountingReader(root)
    source = EthtoolSource(reader)
    det = Detection(
        cfg,
        "h",
        pfc_reader=source.read_raw if raw else (lambda wanted: source.read(wanted, only=wanted)[0]),
        clock=lambda: now[0],
        wall=lambda: 1e9 + now[0],
        listener=events.append,
        cpu_clock=lambda: 0.0,
    )
    tracker = SeriesTracker()
    stats = dict.fromkeys(NAMES, 0)
    _write(root, stats)
    port = PortSample("mlx5_0", 1, "n0", "Ethernet", "ACTIVE", "LinkUp", 200.0)

    def tick() -> None:
        got = source.read(["n0"])[0]
        ethtool = frozen_map({n: EthtoolSample(n, s.stats) for n, s in got.items()})
        snap = Snapshot(timestamp=1e9 + now[0], monotonic=now[0], host="h", ports=(port,), ethtool=ethtool)
        det.on_observation(tracker.update(snap))

    tick()
    glitched = None
    for kind, dt in _script():
        now[0] = round(now[0] + dt, 6)
        damaged = False
        if kind in ("storm", "partial"):
            stats["rx_prio3_pause"] += int(11_900 * dt * (1.0 if kind == "storm" else 0.5))
            stats["rx_prio3_pause_duration"] += int(dt * 1e6 * (1.0 if kind == "storm" else 0.5))
            stats["tx_prio3_packets"] += 0 if kind == "storm" else 5000
        elif kind == "packets":
            stats["tx_prio3_packets"] += 90_000
            stats["rx_prio3_packets"] += 90_000
        elif kind == "glitch" and glitched is None:
            glitched = stats["rx_prio3_pause"]
            stats["rx_prio3_pause"] = max(0, glitched - 1000)
        elif kind == "damaged":
            damaged = True
        if glitched is not None and kind != "glitch":
            stats["rx_prio3_pause"], glitched = glitched, None
        _write(root, None if kind == "vanish" else stats, damaged)
        if kind == "tick":
            tick()
        else:
            det.take_fast_sample()
    state = det.state()
    found = [(e.action, e.finding.kind, round(e.finding.started_monotonic, 6)) for e in events]
    return found, state.fast_samples, state.fast_calm_samples, reader.picks


def test_raw_reads_find_what_parsed_reads_find_and_parse_only_what_is_evaluated(tmp_path: Path) -> None:
    (tmp_path / "parsed").mkdir()
    (tmp_path / "raw").mkdir()
    parsed = _run(tmp_path / "parsed", raw=False)
    raw = _run(tmp_path / "raw", raw=True)
    events, samples, calm, parsed_picks = parsed
    assert ("opened", "pfc_storm", events[0][2]) in events  # the script does storm
    assert sum(a == "opened" for a, *_ in events) >= 2 and any(a == "resolved" for a, *_ in events)
    assert raw[:3] == (events, samples, calm)  # the same findings, at the same moments; the same counts
    assert samples == 270 and calm > 100
    # The parsed reader parses every fast sample (the tick's own read goes through read_kept).
    assert parsed_picks == samples
    # The raw reader parses the samples it evaluates and the first after each of the 30 ticks (compared
    # by value with the tick's); the calm ones compared by token are parsed only if evaluated later,
    # as the last put aside before a storm's onset is.
    assert raw[3] <= samples - calm + 30
