"""ethtool stats: text captures, the capture reader, the ioctl reader against a fake kernel, the source."""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from netd.errors import EthtoolError
from netd.sources import ethtool as et
from netd.sources.ethtool import (
    CapturedStatsReader,
    EthtoolSource,
    IoctlStatsReader,
    StatsRead,
    format_ethtool_text,
    make_reader,
    parse_ethtool_text,
)
from tests.sources.test_ethtool_names import mlx5_stats

# --- text captures -------------------------------------------------------------------------------


def test_format_is_exactly_ethtool_s() -> None:
    assert format_ethtool_text({"rx_prio3_pause": 5, "peer_ifindex": 2}) == (
        "NIC statistics:\n     rx_prio3_pause: 5\n     peer_ifindex: 2\n"
    )


@pytest.mark.parametrize("kw", [{}, {"pfc": (3, 4)}, {"storm_space": True}, {"global_pause": True}])
def test_round_trip_keeps_order_and_strips_names(kw: dict[str, Any]) -> None:
    stats = mlx5_stats(**kw)
    stats["rx_prio3_pause_duration"] = 2**64 - 1
    got = parse_ethtool_text(format_ethtool_text(stats))
    assert got.bad == () and got.stats is not None
    assert list(got.stats.items()) == [(k.strip(), v) for k, v in stats.items()]


BODY = "NIC statistics:\n     a: 1\n"


@pytest.mark.parametrize(
    ("text", "stats", "bad"),
    [
        (BODY + "     b: x1\n     c: 3\n", {"a": 1, "c": 3}, ("b",)),
        (BODY + "     b: -1\n", {"a": 1}, ("b",)),
        (BODY + "     b: 1.5\n", {"a": 1}, ("b",)),
        (BODY + "     b: ²\n", {"a": 1}, ("b",)),  # str.isdigit() alone would accept it
        (BODY + f"     b: {2**64}\n", {"a": 1}, ("b",)),
        (BODY + f"     b: {2**64 - 1}\n", {"a": 1, "b": 2**64 - 1}, ()),
        (BODY + "     b: " + "9" * 5000 + "\n", {"a": 1}, ("b",)),  # no int() digit-limit ValueError
        (BODY + "     b:\n", {"a": 1}, ("b",)),
        (BODY + "     no colon here\n", {"a": 1}, ("no colon here",)),
        (BODY + "     : 4\n", {"a": 1}, (": 4",)),
        (BODY + "     a: 2\n", {"a": 1}, ("a",)),  # duplicate: first wins
        (BODY + "     b: 12", {"a": 1}, ("b",)),  # cut mid-write: "12" may be the head of "12345"
        (BODY + "\n\n     b: 2\n", {"a": 1, "b": 2}, ()),
        ("NIC statistics:\r\n     a: 1\r\n", {"a": 1}, ()),
        ("NIC statistics:\n", {}, ()),
        ("NIC statistics:", {}, ()),
        ("NIC statistics:\n     weird:name: 5\n", {"weird:name": 5}, ()),
    ],
)
def test_hostile_values_are_skipped_and_named(text: str, stats: dict[str, int], bad: tuple[str, ...]) -> None:
    got = parse_ethtool_text(text)
    assert got.stats == stats and got.bad == bad


@pytest.mark.parametrize("text", ["", "  \n\n", "no stats available\n", "     a: 1\n", "\0\0\0"])
def test_unusable_captures_are_absent(text: str) -> None:
    got = parse_ethtool_text(text)
    assert got.stats is None and got.reason


@pytest.mark.parametrize(
    "stats",
    [{"": 1}, {" ": 1}, {"a\nb": 1}, {"x" * 33: 1}, {"a": -1}, {"a": 2**64}, {"a": True}, {"a": 1.0}],
)
def test_format_refuses_what_the_kernel_cannot_say(stats: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        format_ethtool_text(stats)


# --- CapturedStatsReader -------------------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "ethtool").mkdir()
    return tmp_path


def write(root: Path, netdev: str, stats: dict[str, int], *, in_place: bool = True) -> Path:
    path = root / "ethtool" / netdev
    text = format_ethtool_text(stats).encode()
    if in_place:
        with open(path, "r+b" if path.exists() else "wb") as f:
            f.write(text)
            f.truncate()
    else:
        tmp = path.with_name(f".{netdev}.tmp")
        tmp.write_bytes(text)
        os.replace(tmp, path)
    return path


def test_reads_an_mlx5_sized_capture_with_one_descriptor(tree: Path) -> None:
    stats = mlx5_stats(rings=200)
    path = write(tree, "ens1f0np0", stats)
    assert path.stat().st_size > 16 * 1024
    reader = CapturedStatsReader(tree)
    for _ in range(3):
        assert reader.read("ens1f0np0") == StatsRead(stats)
    assert reader.opens == 1
    reader.close()


def test_in_place_rewrite_is_seen_without_reopening(tree: Path) -> None:
    path = write(tree, "eth0", {"a": 1})
    inode = path.stat().st_ino
    reader = CapturedStatsReader(tree)
    assert reader.read("eth0").stats == {"a": 1}
    grown = mlx5_stats(rings=300)  # far beyond the first size hint: pread must loop
    write(tree, "eth0", grown)
    assert path.stat().st_ino == inode
    assert reader.read("eth0").stats == grown
    write(tree, "eth0", {"a": 2})
    assert reader.read("eth0").stats == {"a": 2}
    assert reader.opens == 1


def test_replacement_by_rename_is_noticed(tree: Path) -> None:
    write(tree, "eth0", {"a": 1})
    reader = CapturedStatsReader(tree)
    assert reader.read("eth0").stats == {"a": 1}
    write(tree, "eth0", {"a": 2}, in_place=False)
    assert reader.read("eth0").stats == {"a": 2}
    assert reader.opens == 2


def _deleted_files_held() -> list[str]:
    held = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.endswith(" (deleted)"):
            held.append(target)
    return held


def test_a_replaced_capture_is_no_longer_held_open(tree: Path) -> None:
    """Holding a replaced file's last reference makes the reader pay to free it: once a capture was
    replaced, it is read open-pread-close, and no replaced inode stays open between reads."""
    write(tree, "eth0", {"a": 1})
    write(tree, "eth1", {"b": 1})
    reader = CapturedStatsReader(tree)
    assert reader.read("eth0").stats == {"a": 1} and reader.read("eth1").stats == {"b": 1}
    assert reader.open_descriptors == 2
    for n in range(2, 6):
        write(tree, "eth0", {"a": n}, in_place=False)
        assert reader.read("eth0").stats == {"a": n}  # never frozen
        assert reader.open_descriptors == 1  # eth1, never replaced, is still kept
        assert not [t for t in _deleted_files_held() if str(tree) in t]
    grown = mlx5_stats(rings=300)  # beyond the size hint kept for it
    write(tree, "eth0", grown, in_place=False)
    assert reader.read("eth0").stats == grown
    write(tree, "eth0", {"a": 9})  # rewritten in place now: still read afresh
    assert reader.read("eth0").stats == {"a": 9}
    (tree / "ethtool" / "eth0").unlink()
    assert reader.read("eth0").stats is None
    write(tree, "eth0", {"a": 10}, in_place=False)
    assert reader.read("eth0").stats == {"a": 10}
    assert reader.open_descriptors == 1
    reader.close()


def test_device_vanishes_and_returns(tree: Path) -> None:
    path = write(tree, "eth0", {"a": 1})
    reader = CapturedStatsReader(tree)
    assert reader.read("eth0").stats == {"a": 1}
    path.unlink()
    gone = reader.read("eth0")
    assert gone.stats is None and "no capture" in (gone.reason or "")
    write(tree, "eth0", {"a": 5})
    assert reader.read("eth0").stats == {"a": 5}


def test_empty_file_and_missing_root_are_absent(tmp_path: Path, tree: Path) -> None:
    (tree / "ethtool" / "eth0").write_bytes(b"")
    assert CapturedStatsReader(tree).read("eth0").reason == "empty capture"
    assert CapturedStatsReader(tmp_path / "nowhere").read("eth0").stats is None


def test_oversized_capture_is_absent(tree: Path) -> None:
    write(tree, "eth0", mlx5_stats(rings=50))
    got = CapturedStatsReader(tree, max_bytes=4096).read("eth0")
    assert got.stats is None and "larger than 4096" in (got.reason or "")


@pytest.mark.parametrize("netdev", ["../ethtool/eth0", "a/b", "..", "", "x" * 16, "eth 0", "eth0:1"])
def test_names_that_no_interface_can_have_never_touch_files(tree: Path, netdev: str) -> None:
    write(tree, "eth0", {"a": 1})
    reader = CapturedStatsReader(tree)
    got = reader.read(netdev)
    assert got.stats is None and "interface name" in (got.reason or "")
    assert reader.opens == 0


# --- IoctlStatsReader against a fake kernel ------------------------------------------------------


class FakeKernel(IoctlStatsReader):
    """SIOCETHTOOL answered like the kernel; ``fixed`` = with 7b07be1ff1cb (a stale size gets 0 back).

    ``before(command)`` runs ahead of every answer so a test can change the driver's stats mid-read,
    the race a PFC reconfiguration causes. Every write is checked against the caller's buffer size,
    so the slack the reader allocates for unfixed kernels is tested too.
    """

    def __init__(self, stats: dict[str, int], *, fixed: bool = True, **kw: int) -> None:
        super().__init__(**kw)
        self.stats = stats
        self.fixed = fixed
        self.calls: list[int] = []
        self.before: Callable[[int], None] = lambda command: None

    def _ioctl(self, netdev: str, command: int, buf: ctypes.Array[ctypes.c_char]) -> None:
        self.calls.append(command)
        self.before(command)
        names, values = list(self.stats), list(self.stats.values())
        n = len(names)
        if command == et.ETHTOOL_GSSET_INFO:
            struct.pack_into("=IIQI", buf, 0, command, 0, 1 << et.ETH_SS_STATS, n)
            return
        asked = struct.unpack_from("=I", buf, 8 if command == et.ETHTOOL_GSTRINGS else 4)[0]
        if self.fixed and asked and asked != n:
            n = 0
        if command == et.ETHTOOL_GSTRINGS:
            data = b"".join(name.encode().ljust(et.ETH_GSTRING_LEN, b"\0") for name in names[:n])
            fmt = f"=III{len(data)}s"
            assert struct.calcsize(fmt) <= ctypes.sizeof(buf), "kernel would overflow the strings buffer"
            struct.pack_into(fmt, buf, 0, command, et.ETH_SS_STATS, n, data)
        else:
            assert 8 + 8 * n <= ctypes.sizeof(buf), "kernel would overflow the stats buffer"
            struct.pack_into(f"=II{n}Q", buf, 0, command, n, *values[:n])


@pytest.mark.parametrize(("every", "gstrings"), [(1, 3), (2, 2), (0, 1)])
def test_steady_reads_reuse_the_names(every: int, gstrings: int) -> None:
    stats = mlx5_stats()
    k = FakeKernel(stats, names_recheck_every=every)
    for _ in range(3):
        assert k.read("ens1f0np0") == StatsRead(stats)
    assert k.calls.count(et.ETHTOOL_GSTRINGS) == gstrings and k.calls.count(et.ETHTOOL_GSSET_INFO) == 3
    assert k.names_reloads == 0


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed-kernel", "old-kernel"])
def test_pfc_toggled_between_reads_reloads_names(fixed: bool) -> None:
    k = FakeKernel(mlx5_stats(), fixed=fixed)
    k.read("eth0")
    k.stats = mlx5_stats((3, 4))
    assert k.read("eth0").stats == k.stats
    k.stats = mlx5_stats(())
    assert k.read("eth0").stats == k.stats
    assert k.names_reloads == 2


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed-kernel", "old-kernel"])
@pytest.mark.parametrize(
    ("every", "at"), [(0, et.ETHTOOL_GSTATS), (1, et.ETHTOOL_GSTATS), (1, et.ETHTOOL_GSTRINGS)]
)
def test_count_changing_inside_a_read_is_retried_never_shifted(fixed: bool, every: int, at: int) -> None:
    k = FakeKernel(mlx5_stats(), fixed=fixed, names_recheck_every=every)
    k.read("eth0")
    grown = mlx5_stats((3, 4))

    def grow_once(command: int) -> None:
        if command == at and k.stats is not grown:
            k.stats = grown

    k.before = grow_once
    assert k.read("eth0").stats == grown
    assert k.names_reloads == 1


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed-kernel", "old-kernel"])
def test_count_changing_before_the_first_names_is_retried(fixed: bool) -> None:
    grown = mlx5_stats((3, 4))
    k = FakeKernel(mlx5_stats(), fixed=fixed)
    k.before = lambda command: setattr(k, "stats", grown) if command == et.ETHTOOL_GSTRINGS else None
    assert k.read("eth0").stats == grown
    assert k.names_reloads == 0  # a first load is not a reload


@pytest.mark.parametrize("fixed", [True, False], ids=["fixed-kernel", "old-kernel"])
def test_count_that_never_settles_is_absent(fixed: bool) -> None:
    sets = [mlx5_stats(()), mlx5_stats((3,)), mlx5_stats((3, 4))]
    k = FakeKernel(sets[0], fixed=fixed)
    k.before = lambda command: setattr(k, "stats", sets[(sets.index(k.stats) + 1) % 3])
    got = k.read("eth0")
    assert got.stats is None and "kept changing" in (got.reason or "")


@pytest.mark.parametrize(("every", "stale_reads"), [(1, 0), (3, 1), (0, 4)])
def test_same_count_rename_is_caught_by_the_name_check(every: int, stale_reads: int) -> None:
    """PFC moved from prio 3 to 4 keeps the count: only re-reading the names can see it."""
    k = FakeKernel(mlx5_stats((3,)), names_recheck_every=every)
    k.read("eth0")
    k.read("eth0")
    k.stats = mlx5_stats((4,))
    results = [k.read("eth0").stats for _ in range(4)]
    assert [r != k.stats for r in results] == [True] * stale_reads + [False] * (4 - stale_reads)
    assert k.names_reloads == (0 if stale_reads == 4 else 1)


def test_names_are_stripped_and_duplicates_reported() -> None:
    k = FakeKernel({"tx_pause_storm_warning_events ": 4, "dup": 1, "dup ": 2})
    assert k.read("eth0") == StatsRead({"tx_pause_storm_warning_events": 4, "dup": 1}, bad=("dup",))


def test_read_some_is_the_whole_read_narrowed_duplicates_included() -> None:
    """The picked read equals the whole read narrowed by name: first occurrence, the duplicates still
    reported, absent names left out (the fast path's reads on a kernel)."""
    k = FakeKernel({"rx_prio3_pause": 7, "dup": 1, "dup ": 2, "tx_prio3_pause": 9, "last": 3})
    for wanted in (("tx_prio3_pause", "dup", "missing", "rx_prio3_pause"), ("last",), ()):
        expected = StatsRead({n: v for n, v in k.read("eth0").stats.items() if n in wanted}, bad=("dup",))
        got = k.read_some("eth0", wanted)
        assert got == expected and list(got.stats) == [n for n in wanted if n in got.stats]


def test_an_unchanged_name_table_is_not_decoded_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Names are re-read every read (a PFC move keeps the count) but decoded only when they differ:
    decoding ~150 names was three quarters of a read's CPU."""
    decoded: list[int] = []
    real = et._Names.decode.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        et._Names, "decode", classmethod(lambda cls, raw: decoded.append(1) or real(cls, raw))
    )
    k = FakeKernel(mlx5_stats((3,)))
    for _ in range(5):
        assert k.read_some("eth0", ("rx_prio3_pause",)).stats == {"rx_prio3_pause": k.stats["rx_prio3_pause"]}
    assert k.calls.count(et.ETHTOOL_GSTRINGS) == 5 and len(decoded) == 1
    k.stats = mlx5_stats((4,))  # same count, other names
    assert k.read("eth0").stats == k.stats and len(decoded) == 2 and k.names_reloads == 1


def test_driver_without_stats_is_absent() -> None:
    k = FakeKernel({})
    k._count = lambda netdev: None  # type: ignore[method-assign]  # sset_mask bit cleared, as on lo
    assert k.read("lo").stats is None


@pytest.mark.parametrize("netdev", ["x" * 16, "", "a/b"])
def test_impossible_names_never_reach_the_kernel(netdev: str) -> None:
    k = FakeKernel({"a": 1})
    assert k.read(netdev).stats is None and k.calls == []


@pytest.mark.parametrize(
    ("code", "absent"),
    [
        (errno.ENODEV, True),
        (errno.EOPNOTSUPP, True),
        (errno.EPERM, True),
        (errno.EINVAL, True),
        (errno.EIO, False),
        (errno.ENOMEM, False),
    ],
)
def test_errno_policy(monkeypatch: pytest.MonkeyPatch, code: int, absent: bool) -> None:
    def failing(*_args: object) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(et.fcntl, "ioctl", failing)
    reader = IoctlStatsReader()
    try:
        if absent:
            got = reader.read("eth0")
            assert got.stats is None and "ETHTOOL_GSSET_INFO" in (got.reason or "")
        else:
            with pytest.raises(EthtoolError) as info:
                reader.read("eth0")
            assert (info.value.netdev, info.value.command, info.value.errno) == (
                "eth0",
                "ETHTOOL_GSSET_INFO",
                code,
            )
    finally:
        reader.close()


# --- EthtoolSource and make_reader ---------------------------------------------------------------


class Scripted:
    names_reloads = 0

    def __init__(self, answers: dict[str, StatsRead | Exception]) -> None:
        self.answers = answers
        self.asked: list[str] = []
        self.closed = False

    def read(self, netdev: str) -> StatsRead:
        self.asked.append(netdev)
        answer = self.answers[netdev]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def close(self) -> None:
        self.closed = True


def test_source_isolates_failures_and_filters_names() -> None:
    reader = Scripted(
        {
            "eth0": StatsRead({"a": 1}),
            "eth1": EthtoolError("eth1", "ETHTOOL_GSTATS", errno.EIO, "Input/output error"),
            "eth2": StatsRead.absent("no capture"),
            "eth3": StatsRead({"a": 3}, bad=("b",)),
            "ibp0": StatsRead({"a": 9}),
            "eth9": StatsRead({"a": 9}),
        }
    )
    source = EthtoolSource(reader, include=("eth*", "ibp*"), exclude=("ibp*", "eth9"))
    samples, reasons = source.read(["eth0", "eth1", "eth2", "eth3", "ibp0", "eth9", "eth0", "lo"])
    assert reader.asked == ["eth0", "eth1", "eth2", "eth3"]
    assert sorted(samples) == ["eth0", "eth3"] and samples["eth0"].stats == {"a": 1}
    assert samples["eth0"].netdev == "eth0"
    assert reasons["eth1"].startswith("error: ethtool: eth1: ETHTOOL_GSTATS failed")
    assert reasons["eth2"] == "absent: no capture"
    assert reasons["eth3"] == "skipped values: b"
    assert set(reasons) == {"eth1", "eth2", "eth3"}
    source.close()
    assert reader.closed


def test_source_over_captures_reports_a_broken_tree(tree: Path) -> None:
    write(tree, "eth0", {"a": 1})
    (tree / "ethtool" / "eth1").mkdir()  # EISDIR is not "absent": the tree is broken
    source = EthtoolSource(CapturedStatsReader(tree))
    samples, reasons = source.read(["eth0", "eth1", "eth2"])
    assert list(samples) == ["eth0"]
    assert reasons["eth1"].startswith("error:") and reasons["eth2"].startswith("absent:")
    source.close()


def test_make_reader_picks_the_backend(tmp_path: Path) -> None:
    (tmp_path / "sys").symlink_to("/sys")
    cases = [
        ("auto", tmp_path, CapturedStatsReader),
        ("files", tmp_path, CapturedStatsReader),
        ("auto", Path("/sys"), IoctlStatsReader),
        ("auto", tmp_path / "sys", IoctlStatsReader),
        ("ioctl", tmp_path, IoctlStatsReader),
    ]
    for backend, root, kind in cases:
        reader = make_reader(backend, root)
        assert isinstance(reader, kind), (backend, root)
        reader.close()
    with pytest.raises(ValueError, match="auto, ioctl, files"):
        make_reader("netlink", tmp_path)
