"""The write-ahead journal: record framing, durable intent before any device write, torn tails,
a full disk, a crash between commit and cleanup, and idempotent recovery (pure Python, no root)."""

from __future__ import annotations

import errno
import json
import os
import zlib
from pathlib import Path

import pytest

from netd.errors import TuningError
from netd.tuning.applier import Applier
from netd.tuning.faults import Fault, FaultyFiles
from netd.tuning.journal import Journal
from netd.tuning.records import frame, parse
from tests.tuning.conftest import trees_of

TARGET = {"rp_ai_rate": 20, "rp_time_reset": 150}


def values(root: Path) -> dict[str, dict[str, int]]:
    return {t.device: t.read() for t in trees_of(root)}


def make(root: Path, journal_dir: Path, *faults: Fault, **kw: bool) -> tuple[Applier, FaultyFiles]:
    files = FaultyFiles(*faults, **kw)
    return Applier(trees_of(root), Journal(journal_dir, files)), files


def hand_line(payload: bytes) -> bytes:
    """A record line built from the format's definition (decimal length, CRC-32 in hex)."""
    return f"{len(payload)} {zlib.crc32(payload):08x} ".encode() + payload + b"\n"


def test_records_are_length_delimited_checksummed_lines() -> None:
    assert frame({"b": 1, "a": "x"}) == hand_line(b'{"a":"x","b":1}')
    good = [hand_line(b'{"n":%d}' % i) for i in range(3)]
    damaged = good[1].replace(b'"n":1', b'"n":7')  # same length, wrong checksum
    data = good[0] + damaged + good[2] + hand_line(b'{"n":3}')[:9]  # and a torn tail
    parsed = parse(data, "history.log")
    assert [r["n"] for r in parsed.records] == [0, 2]  # before and after the damage, kept
    assert len(parsed.problems) == 2
    assert "record 2" in parsed.problems[0] and "checksum mismatch" in parsed.problems[0]
    assert "torn tail" in parsed.problems[1]
    assert parsed.whole == len(data) - 9  # the next append goes after the last whole line
    short = b"99 00000000 {}\n"
    assert "header says 99" in parse(short, "h").problems[0]


def test_the_intent_is_durable_before_the_first_device_write(debugfs_host: Path, tmp_path: Path) -> None:
    a, files = make(debugfs_host, tmp_path / "journal")
    assert a.apply(a.plan(TARGET), source="test", reason="order").state == "applied"
    device_dir = str(trees_of(debugfs_host)[0].path.parent.parent)
    first_device = next(i for i, (op, p) in enumerate(files.calls) if p.startswith(device_dir))
    journal_calls = files.calls[:first_device]
    pending = str(tmp_path / "journal" / "pending.rec")
    tmp = str(tmp_path / "journal" / ".pending.rec.netd-tmp")
    order = [
        journal_calls.index(("write", tmp)),
        journal_calls.index(("fsync", tmp)),
        journal_calls.index(("replace", pending)),
        # the directory is fsync'd after the rename: the rename itself is durable
        max(i for i, c in enumerate(journal_calls) if c == ("fsync", str(tmp_path / "journal"))),
    ]
    assert order == sorted(order)
    assert ("fallocate", str(tmp_path / "journal" / ".reserve")) in journal_calls
    assert not (tmp_path / "journal" / ".reserve").exists()  # handed to the outcome at commit


@pytest.mark.parametrize(
    ("op", "err", "where"),
    [
        ("fallocate", errno.ENOSPC, ".reserve"),
        ("write", errno.ENOSPC, "pending"),
        ("open", errno.EROFS, ".reserve"),
        ("open", errno.EACCES, ".pending.rec.netd-tmp"),
        ("replace", errno.EIO, "pending"),
    ],
)
def test_a_journal_that_cannot_be_written_refuses_before_any_device_is_touched(
    debugfs_host: Path, tmp_path: Path, op: str, err: int, where: str
) -> None:
    before = values(debugfs_host)
    a, files = make(debugfs_host, tmp_path / "journal", Fault(op, err, path=where))
    outcome = a.apply(a.plan(TARGET), source="test", reason="full disk")
    assert outcome.state == "refused" and os.strerror(err) in (outcome.error or "")
    assert "no parameter was touched" in (outcome.error or "")
    device_dir = str(debugfs_host / "kernel")
    assert not [c for c in files.calls if c[1].startswith(device_dir)]
    assert values(debugfs_host) == before
    journal = Journal(tmp_path / "journal")
    assert journal.pending() is None and journal.history() == []
    assert sorted(p.name for p in (tmp_path / "journal").iterdir()) == []  # nothing left behind


def test_a_short_history_append_is_cut_back_and_the_change_undone(debugfs_host: Path, tmp_path: Path) -> None:
    before = values(debugfs_host)
    a, _ = make(debugfs_host, tmp_path / "journal", Fault("pwrite", path="history.log", short=True))
    outcome = a.apply(a.plan(TARGET), source="test", reason="disk filled at commit")
    assert outcome.state == "failed" and "short write" in (outcome.error or "")
    assert values(debugfs_host) == before  # not durable, so not applied
    parsed = Journal(tmp_path / "journal").read_history()
    assert parsed.problems == [] and [r["state"] for r in parsed.records] == ["failed"]
    assert (tmp_path / "journal" / "history.log").read_bytes().endswith(b"\n")


def test_a_torn_tail_is_reported_then_cut_off_by_the_next_append(debugfs_host: Path, tmp_path: Path) -> None:
    a, _ = make(debugfs_host, tmp_path / "journal")
    a.apply(a.plan(TARGET), source="test", reason="first")
    history = tmp_path / "journal" / "history.log"
    whole = history.read_bytes()
    with history.open("ab") as f:
        f.write(whole[: len(whole) // 2])  # what a crash mid-append leaves
    journal = Journal(tmp_path / "journal")
    parsed = journal.read_history()
    assert len(parsed.records) == 1 and "torn tail" in parsed.problems[0]
    assert a.rollback(source="test").state == "applied"  # the record before the tear still works
    after = journal.read_history()
    assert after.problems == [] and [r["state"] for r in after.records] == ["applied", "applied"]
    assert values(debugfs_host)["mlx5_0"]["rp_ai_rate"] == 5


def test_a_corrupt_record_in_the_middle_is_skipped_not_fatal(debugfs_host: Path, tmp_path: Path) -> None:
    a, _ = make(debugfs_host, tmp_path / "journal")
    a.apply(a.plan({"rp_ai_rate": 20}), source="test", reason="one")
    a.apply(a.plan({"rp_time_reset": 150}), source="test", reason="two")
    history = tmp_path / "journal" / "history.log"
    lines = history.read_bytes().splitlines(keepends=True)
    history.write_bytes(lines[0].replace(b'"one"', b'"uno"') + lines[1])
    parsed = Journal(tmp_path / "journal").read_history()
    assert [r["reason"] for r in parsed.records] == ["two"] and "checksum mismatch" in parsed.problems[0]
    assert a.rollback(source="test").state == "applied"  # the newest intact applied set
    assert values(debugfs_host)["mlx5_0"]["rp_time_reset"] == 300


def test_a_crash_between_commit_and_cleanup_keeps_the_change(debugfs_host: Path, tmp_path: Path) -> None:
    a, _ = make(debugfs_host, tmp_path / "journal", Fault("unlink", path="pending.rec"))
    assert a.apply(a.plan(TARGET), source="test", reason="commit").state == "applied"
    assert (tmp_path / "journal" / "pending.rec").exists()  # left beside its recorded outcome
    again, _ = make(debugfs_host, tmp_path / "journal")
    assert again.recover() is None  # committed: nothing to undo, the intent is just removed
    assert not (tmp_path / "journal" / "pending.rec").exists()
    assert values(debugfs_host)["mlx5_1"]["rp_ai_rate"] == 20


def test_recovery_that_cannot_record_stays_open_and_is_idempotent(debugfs_host: Path, tmp_path: Path) -> None:
    before = values(debugfs_host)
    crashed, _ = make(
        debugfs_host, tmp_path / "journal", Fault("open", errno.EIO, path="history.log", times=0)
    )
    outcome = crashed.apply(crashed.plan(TARGET), source="test", reason="no commit")
    assert outcome.state == "failed" and "every file was put back" in (outcome.error or "")
    assert values(debugfs_host) == before
    pending = Journal(tmp_path / "journal").pending()
    assert pending is not None  # the intent stays until its outcome is on disk
    blocked, _ = make(debugfs_host, tmp_path / "journal")
    refused = blocked.apply(blocked.plan(TARGET), source="test", reason="blocked")
    assert refused.state == "refused" and "recovery needed" in (refused.error or "")
    for _ in range(3):  # recovery may run any number of times
        first = blocked.recover()
        if first is not None:
            assert first.state == "recovered" and first.undone == []  # nothing left to put back
    assert blocked.recover() is None and values(debugfs_host) == before
    assert [r["state"] for r in Journal(tmp_path / "journal").history()] == ["recovered"]


def test_the_pending_intent_is_checksummed_too(tmp_path: Path) -> None:
    journal = Journal(tmp_path / "journal")
    (tmp_path / "journal" / "pending.rec").write_text(json.dumps({"txid": "x", "writes": []}) + "\n")
    with pytest.raises(TuningError, match="pending.rec is corrupt"):
        journal.pending()
    assert os.stat(tmp_path / "journal").st_mode & 0o777 == 0o700
