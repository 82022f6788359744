"""The PFC fast path's narrow read of `ethtool -S` captures (CapturedStatsReader.read_some): the same
values the full parser finds for the wanted names, on clean and on damaged captures, and the
replayed-tree rule (a capture replaced by rename or removed is never read frozen)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from netd.emulated.mlx5_ethtool import mlx5_ethtool_names
from netd.sources.ethtool import CapturedStatsReader, format_ethtool_text, parse_ethtool_text
from netd.sources.ethtool_text import pick_ethtool_stats

WANTED = ("rx_prio3_pause", "rx_prio3_pause_duration", "tx_prio3_pause", "tx_prio3_packets")


def _stats(base: int = 0) -> dict[str, int]:
    return {name: base + 11 * i for i, name in enumerate(mlx5_ethtool_names((3,)))}


def _subset_parsed(data: bytes, names: tuple[str, ...]) -> dict[str, int] | None:
    full = parse_ethtool_text(data.decode("utf-8", "replace")).stats
    return None if full is None else {n: full[n] for n in names if n in full}


def _capture(root: Path, netdev: str, data: bytes, *, rename: bool = False) -> None:
    path = root / "ethtool" / netdev
    path.parent.mkdir(exist_ok=True)
    if rename:
        tmp = path.with_name(f".{netdev}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)
    else:
        path.write_bytes(data)


CLEAN = format_ethtool_text(_stats()).encode()
DAMAGED = {
    "cut off in a wanted line": CLEAN[: CLEAN.index(b"tx_prio3_packets") + 20],
    "wanted value not a number": CLEAN.replace(b"rx_prio3_pause: ", b"rx_prio3_pause: x", 1),
    "wanted value beyond u64": CLEAN.replace(b"tx_prio3_pause: ", b"tx_prio3_pause: 99999999999999999999", 1),
    "wanted name twice": CLEAN + b"     rx_prio3_pause: 5\n",
    "wanted name missing": CLEAN.replace(b"     tx_prio3_packets:", b"     tx_prio3_packetz:", 1),
    "no header": CLEAN.split(b"\n", 1)[1],
    "trailing space in a name": CLEAN.replace(b"rx_prio3_pause_duration:", b"rx_prio3_pause_duration :", 1),
}


def test_a_clean_capture_is_searched_not_parsed_with_the_same_values() -> None:
    picked = pick_ethtool_stats(CLEAN, WANTED)
    assert picked is not None and picked == _subset_parsed(CLEAN, WANTED)


@pytest.mark.parametrize("case", sorted(DAMAGED))
def test_damaged_captures_read_as_the_full_parser_reads_them(tmp_path: Path, case: str) -> None:
    data = DAMAGED[case]
    _capture(tmp_path, "eth0", data)
    got = CapturedStatsReader(tmp_path).read_some("eth0", WANTED)
    assert got.stats == _subset_parsed(data, WANTED)


def test_a_capture_replaced_by_rename_or_removed_is_never_read_frozen(tmp_path: Path) -> None:
    reader = CapturedStatsReader(tmp_path)
    _capture(tmp_path, "eth0", CLEAN)
    first = reader.read_some("eth0", WANTED).stats
    assert first == _subset_parsed(CLEAN, WANTED)
    newer = format_ethtool_text(_stats(base=1000)).encode()
    _capture(tmp_path, "eth0", newer, rename=True)  # a new inode under the same name
    got = reader.read_some("eth0", WANTED).stats
    assert got == _subset_parsed(newer, WANTED) and got != first
    assert reader.opens == 2
    (tmp_path / "ethtool" / "eth0").unlink()
    gone = reader.read_some("eth0", WANTED)
    assert gone.stats is None and "no capture" in (gone.reason or "")
    assert reader.open_descriptors == 0
    reader.close()


def test_invalid_interface_names_never_touch_files(tmp_path: Path) -> None:
    _capture(tmp_path, "eth0", CLEAN)
    reader = CapturedStatsReader(tmp_path)
    got = reader.read_some("../ethtool/eth0", WANTED)
    assert got.stats is None and "interface name" in (got.reason or "") and reader.opens == 0
