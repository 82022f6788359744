"""PreadCache on a fake tree (a directory): kept descriptors of files and of directories must never
serve a replaced or vanished file's old value (sysfs_io, Replayed trees)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from netd.sources.sysfs_io import PreadCache

Read = Callable[[PreadCache, list[str]], list[object]]
BOTH: dict[str, Read] = {
    "read_many": lambda cache, paths: list(cache.read_many(paths)),
    "read_dir": lambda cache, paths: list(
        cache.read_dir(paths[0].rpartition("/")[0], [p.rpartition("/")[2] for p in paths])
    ),
}


def _counters(root: Path, name: str, values: dict[str, int]) -> Path:
    d = root / name
    d.mkdir()
    for file, value in values.items():
        (d / file).write_text(f"{value}\n")
    return d


@pytest.mark.parametrize("how", sorted(BOTH))
def test_files_past_the_budget_are_read_through_a_kept_directory(tmp_path: Path, how: str) -> None:
    read = BOTH[how]
    d = _counters(tmp_path, "hw_counters", {"a": 1, "b": 2, "c": 3})
    cache = PreadCache(max_open=0, verify=True, max_dirs=1)
    paths = [str(d / n) for n in "abc"]
    assert read(cache, paths) == [b"1\n", b"2\n", b"3\n"]
    assert len(cache) == 1 and cache.opens == 1 + 3  # one directory, then each file by name
    (d / "b").write_text("20\n")  # rewritten in place
    tmp = d / ".c.tmp"
    tmp.write_text("30\n")
    os.replace(tmp, d / "c")  # replaced by rename: the name now means another inode
    assert read(cache, paths) == [b"1\n", b"20\n", b"30\n"]
    (d / "a").unlink()
    assert read(cache, paths) == [None, b"20\n", b"30\n"]  # vanished: absent, not frozen
    cache.close()
    assert len(cache) == 0


@pytest.mark.parametrize("how", sorted(BOTH))
def test_a_kept_directory_replaced_by_rename_is_reopened(tmp_path: Path, how: str) -> None:
    read = BOTH[how]
    d = _counters(tmp_path, "hw_counters", {"a": 1})
    cache = PreadCache(max_open=0, verify=True, max_dirs=4)
    path = [str(d / "a")]
    assert read(cache, path) == [b"1\n"]
    fresh = _counters(tmp_path, "hw_counters.new", {"a": 7})
    os.rename(d, tmp_path / "hw_counters.old")  # the old directory still exists, with its old file
    os.rename(fresh, d)
    assert read(cache, path) == [b"7\n"]  # not the old directory's 1
    assert cache.replaced == 1 and len(cache) == 1
    os.rename(d, tmp_path / "gone")
    assert read(cache, path) == [None]  # the directory vanished: absent
    assert len(cache) == 0
    cache.close()


def test_forget_closes_kept_directories_under_a_prefix(tmp_path: Path) -> None:
    one = _counters(tmp_path, "one", {"a": 1})
    two = _counters(tmp_path, "two", {"a": 2})
    cache = PreadCache(max_open=0, max_dirs=4)
    assert cache.read_many([str(one / "a"), str(two / "a")]) == [b"1\n", b"2\n"]
    assert len(cache) == 2
    cache.forget(f"{one}/")
    assert len(cache) == 1
    cache.forget(f"{two}/")
    assert len(cache) == 0
