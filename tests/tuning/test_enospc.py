"""A real full disk (a small tmpfs, root): the journal refuses a change before touching any NIC, and
a disk that fills up *during* a change set still lets it commit, thanks to the reserved space."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from netd.cli import main
from netd.tuning.applier import Applier
from netd.tuning.files import Files
from netd.tuning.journal import Journal
from tests.tuning.conftest import trees_of

pytestmark = [pytest.mark.root, pytest.mark.skipif(os.geteuid() != 0, reason="mounts a tmpfs")]

TARGET = {"rp_ai_rate": 20, "rp_time_reset": 150}


def fill(directory: Path) -> Path:
    """Take every free byte of the filesystem (the kernel says ENOSPC when it is full)."""
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            try:
                os.write(fd, b"\0" * 4096)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        for size in (512, 64, 1):  # the last partial block
            try:
                while os.write(fd, b"\0" * size):
                    pass
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "small"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "netd-test", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def values(root: Path) -> dict[str, dict[str, int]]:
    return {t.device: t.read() for t in trees_of(root)}


def test_a_full_disk_refuses_the_change_before_any_nic_is_touched(
    debugfs_host: Path, small_disk: Path
) -> None:
    before = values(debugfs_host)
    journal = Journal(small_disk / "journal")
    fill(small_disk)
    a = Applier(trees_of(debugfs_host), journal)
    outcome = a.apply(a.plan(TARGET), source="test", reason="full")
    assert outcome.state == "refused" and "No space left on device" in (outcome.error or "")
    assert values(debugfs_host) == before
    assert sorted(p.name for p in journal.directory.iterdir()) == []  # no intent, no reserve, no temp


def test_a_disk_that_fills_during_the_change_still_commits_it(
    debugfs_host: Path, small_disk: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    class FillAfterIntent(Files):
        """Another process takes the whole disk right after the intent is on it."""

        def replace(self, src: Path, dst: Path) -> None:
            super().replace(src, dst)
            if dst.name == "pending.rec" and not (small_disk / "filler").exists():
                fill(small_disk)

    before = values(debugfs_host)
    journal = Journal(small_disk / "journal", FillAfterIntent())
    a = Applier(trees_of(debugfs_host), journal)
    outcome = a.apply(a.plan(TARGET), source="test", reason="filling")
    assert (small_disk / "filler").exists()
    assert outcome.state == "applied", outcome.error  # the reserved space held the outcome
    parsed = journal.read_history()
    assert parsed.problems == [] and [r["state"] for r in parsed.records] == ["applied"]

    refused = a.rollback(source="test")  # still full: the rollback's own intent has no room
    assert refused.state == "refused" and values(debugfs_host)["mlx5_0"]["rp_ai_rate"] == 20
    monkeypatch.setenv("NETD_TUNING_STATE_DIR", str(journal.directory))
    assert main(["tune", "--rollback", "--sysfs-root", str(debugfs_host)]) == 1  # as the operator sees it
    err = capsys.readouterr().err
    assert (
        err.startswith("netd: not applied (refused): cannot write the tuning journal")
        and err.count("\n") == 1
    )
    assert "No space left on device" in err and values(debugfs_host)["mlx5_0"]["rp_ai_rate"] == 20
    (small_disk / "filler").unlink()
    assert a.rollback(source="test").state == "applied" and values(debugfs_host) == before
    assert journal.read_history().problems == []
