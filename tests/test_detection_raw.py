"""The fast path's calm samples compared unparsed (netd.sources.ethtool_raw): a detection that reads
captures through ``EthtoolSource.read_raw`` opens, escalates and resolves exactly what one reading the
same captures parsed does, at the same moments, while parsing only the samples it evaluates."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import netd.sources.ethtool as et
from netd.config.settings import load_config
from netd.detect.findings import FindingEvent
from netd.detect.service import Detection, pfc_reader
from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.errors import EthtoolError
from netd.model.snapshot import EthtoolSample, PortSample, Snapshot, frozen_map
from netd.series.tracker import SeriesTracker
from netd.sources.ethtool import CapturedStatsReader, EthtoolSource, format_ethtool_text
from tests.sources.test_ethtool import FakeKernel

NAMES = mlx5_ethtool_names((3,))
MOVED = mlx5_ethtool_names((4,))


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


# Seconds of the script where something happens (every other second is calm), before each sample.
SCRIPT = {
    3: "storm",  # a stuck receiver from here ...
    4: "storm",
    5: "storm",
    9: "glitch",  # a pause counter that reads lower for a second, then as before
    12: "packets",  # traffic, no pause
    15: "vanish",  # the capture is gone for a second
    18: "damaged",
    21: "partial",  # a congested priority: some pause every sample
    22: "partial",
    24: "move",  # PFC moves to priority 4, the same number of statistics
    26: "storm",  # on priority 4
}


def _script() -> list[tuple[str, float]]:
    """(what happens before the sample, seconds since the last sample): 30 s of a host's fast path."""
    steps: list[tuple[str, float]] = []
    for second in range(30):
        steps += [(SCRIPT.get(second, "calm"), 0.1)] * 9 + [("tick", 0.1)]
    return steps


class Kernel:
    """The same host read through the ioctl reader on a fake kernel (tests.sources.test_ethtool)."""

    def __init__(self) -> None:
        self.kernel = FakeKernel(dict.fromkeys(NAMES, 0))
        self.source = EthtoolSource(self.kernel)

    def write(self, stats: dict[str, int] | None, damaged: bool = False) -> None:
        if stats is not None:  # a kernel netdev neither vanishes nor prints garbage here
            self.kernel.stats = dict(stats)

    def names_read(self) -> int:
        return self.kernel.calls.count(et.ETHTOOL_GSTRINGS)


class Captures:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.reader = CountingReader(root)
        self.source = EthtoolSource(self.reader)

    def write(self, stats: dict[str, int] | None, damaged: bool = False) -> None:
        _write(self.root, stats, damaged)


def _run(host: Kernel | Captures, mode: str) -> tuple[list[tuple[str, str, float]], int, int]:
    """Drive the script through a detection reading ``host``: ``parsed`` (samples parsed at once, the
    reader before netd.sources.ethtool_raw), ``raw`` (unparsed), ``probe`` (unparsed, and calm samples
    read without re-reading the kernel's names first, as the daemon does)."""
    now = [0.0]
    events: list[FindingEvent] = []
    cfg = load_config(None, environ={}).detect
    source = host.source
    det = Detection(
        cfg,
        "h",
        pfc_reader=pfc_reader(source) if mode != "parsed" else (lambda w: source.read(w, only=w)[0]),
        clock=lambda: now[0],
        wall=lambda: 1e9 + now[0],
        listener=events.append,
        cpu_clock=lambda: 0.0,
        pfc_probe=pfc_reader(source, recheck_names=False) if mode == "probe" else None,
    )
    tracker = SeriesTracker()
    stats = dict.fromkeys(NAMES, 0)
    host.write(stats)
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
        if kind == "move":  # PFC moved from priority 3 to 4 by `mlnx_qos`: the same count of names
            stats = dict(zip(MOVED, stats.values(), strict=True))
        elif kind in ("storm", "partial"):
            prio = 3 if "rx_prio3_pause" in stats else 4
            share = 1.0 if kind == "storm" else 0.5
            stats[f"rx_prio{prio}_pause"] += int(11_900 * dt * share)
            stats[f"rx_prio{prio}_pause_duration"] += int(dt * 1e6 * share)
            stats[f"tx_prio{prio}_packets"] += 0 if kind == "storm" else 5000
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
        host.write(None if kind == "vanish" else stats, damaged)
        if kind == "tick":
            tick()
        else:
            det.take_fast_sample()
    state = det.state()
    found = [(e.action, e.finding.kind, round(e.finding.started_monotonic, 6)) for e in events]
    return found, state.fast_samples, state.fast_calm_samples


def test_raw_reads_find_what_parsed_reads_find_and_parse_only_what_is_evaluated(tmp_path: Path) -> None:
    runs = {}
    picks = {}
    for mode in ("parsed", "raw", "probe"):
        (tmp_path / mode).mkdir()
        host = Captures(tmp_path / mode)
        runs[mode] = _run(host, mode)
        picks[mode] = host.reader.picks
    events, samples, calm = runs["parsed"]
    assert ("opened", "pfc_storm", events[0][2]) in events  # the script does storm
    assert sum(a == "opened" for a, *_ in events) >= 2 and any(a == "resolved" for a, *_ in events)
    # The same findings at the same moments, the same counts; a capture carries its names, so the
    # probe is the same read (one more at each sample whose pause moved).
    assert runs["raw"] == runs["probe"] == (events, samples, calm)
    assert samples == 270 and calm > 100
    # The parsed reader parses every fast sample (the tick's own read goes through read_kept).
    assert picks["parsed"] == samples
    # The raw reader parses the samples it evaluates and the first after each of the 30 ticks (compared
    # by value with the tick's); a calm one compared by token is parsed only if it is the last put
    # aside before an evaluated sample: at most once for each scripted second.
    assert picks["raw"] <= samples - calm + 30 + len(SCRIPT)


def test_calm_probes_on_a_kernel_skip_the_name_table_and_find_the_same(tmp_path: Path) -> None:
    checked, probed = Kernel(), Kernel()
    plain = _run(checked, "raw")
    fast = _run(probed, "probe")
    assert fast[0] == plain[0] and fast[1] == plain[1]  # the same findings, at the same moments
    assert any(kind == "pfc_storm" and at > 26 for _, kind, at in fast[0])  # the storm after the move
    # Names were read at every tick and every evaluated sample, not at calm probes.
    assert probed.names_read() < checked.names_read() - 100


class FailingKernel(FakeKernel):
    """ETHTOOL_GSTATS fails with EIO while ``failing`` (a NIC whose firmware command times out)."""

    failing = False

    def _ioctl(self, netdev: str, command: int, buf):  # type: ignore[no-untyped-def,override]
        if self.failing and command == et.ETHTOOL_GSTATS:
            raise EthtoolError(netdev, "ETHTOOL_GSTATS", errno.EIO, "Input/output error")
        super()._ioctl(netdev, command, buf)


def _judged_through_a_failure(probing: bool) -> list[bool]:
    """Whether each of 29 fast samples was judged (True) or put aside, reads failing from 10 to 19."""
    kernel = FailingKernel(dict.fromkeys(NAMES, 0))
    source = EthtoolSource(kernel)
    now = [0.0]
    events: list[FindingEvent] = []
    det = Detection(
        load_config(None, environ={}).detect,
        "h",
        pfc_reader=pfc_reader(source),
        clock=lambda: now[0],
        wall=lambda: 1e9 + now[0],
        listener=events.append,
        cpu_clock=lambda: 0.0,
        pfc_probe=pfc_reader(source, recheck_names=False) if probing else None,
    )
    port = PortSample("mlx5_0", 1, "n0", "Ethernet", "ACTIVE", "LinkUp", 200.0)
    ethtool = frozen_map(source.read(["n0"])[0])
    det.on_observation(
        SeriesTracker().update(
            Snapshot(timestamp=1e9, monotonic=0.0, host="h", ports=(port,), ethtool=ethtool)
        )
    )
    judged = []
    for i in range(1, 30):
        now[0] = i * 0.1
        kernel.failing = 10 <= i < 20
        judged.append(det.take_fast_sample())
    assert not events
    return judged


def test_a_read_error_while_calm_is_judged_once_and_opens_nothing() -> None:
    """A calm kernel netdev whose reads fail for a second, then recover: the probe that first fails
    is dropped for a checked read, which is judged; the failing ones after it compare equal (the same
    netdev failing) and are put aside; the recovery is judged again. No finding opens, and the same
    samples are judged as without probes."""
    plain, probed = _judged_through_a_failure(False), _judged_through_a_failure(True)
    assert probed == plain
    assert probed[9] is True and probed[19] is True  # the first failing read (i=10), the recovery (i=20)
    assert probed[10:19] == [False] * 9  # still failing: the same as the last sample, put aside
    assert probed.count(True) == 2
