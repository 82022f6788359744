"""The applier under injected faults: every read or write error undoes the change set; an undo that
fails leaves a durable recovery-needed state; one lock per NIC (pure Python, no root)."""

from __future__ import annotations

import dataclasses
import errno
import os
import threading
from pathlib import Path

import pytest

from netd.errors import TuningError
from netd.tuning.applier import Applier
from netd.tuning.faults import Fault, FaultyFiles
from netd.tuning.files import Files
from netd.tuning.journal import Journal
from netd.tuning.locks import device_locks
from netd.tuning.params import is_kernel_attribute, read_param, write_verified
from netd.vocabulary.dcqcn_knobs import by_name
from tests.tuning.conftest import build_host, trees_of

TARGET = {"rp_ai_rate": 20, "rp_time_reset": 150, "np_min_time_between_cnps": 8}


def values(root: Path) -> dict[str, dict[str, int]]:
    return {t.device: t.read() for t in trees_of(root)}


def make(root: Path, journal_dir: Path, files: Files) -> Applier:
    return Applier(trees_of(root), Journal(journal_dir, files))


def knob_file(root: Path, device: int, name: str) -> str:
    path = trees_of(root)[device].file(by_name(name))
    assert path is not None
    return str(path)


@pytest.mark.parametrize("kind", ["debugfs", "ofed"])
@pytest.mark.parametrize(
    ("fault", "kernel"),
    [
        (Fault("read", errno.EIO), False),  # the read-back fails
        (Fault("write", errno.ENOSPC), False),
        (Fault("open", errno.EPERM), False),
        (Fault("replace", errno.EIO), False),
        (Fault("pwrite", short=True), True),  # a kernel attribute took part of the value
        (Fault("pwrite", errno.EINVAL), True),  # the firmware refused it
        (Fault("read", errno.EIO), True),
    ],
    ids=[
        "readback-EIO",
        "write-ENOSPC",
        "open-EPERM",
        "rename-EIO",
        "short",
        "EINVAL",
        "kernel-readback-EIO",
    ],
)
def test_any_error_on_the_second_nic_undoes_both(
    tmp_path: Path, kind: str, fault: Fault, kernel: bool
) -> None:
    tree = build_host(tmp_path / "host", kind)
    root = tmp_path / "host"
    try:
        before = values(root)
        target = Path(knob_file(root, 1, "rp_time_reset"))  # the fifth of six writes
        fault = dataclasses.replace(fault, path=str(target.parent), name=target.name)
        files = FaultyFiles(fault, kernel=kernel)
        a = make(root, tmp_path / "journal", files)
        outcome = a.apply(a.plan(TARGET), source="test", reason="fault")
        assert outcome.state == "failed" and outcome.error and len(files.fired) == 1
        assert values(root) == before  # both NICs exactly as they were
        results = {(r["device"], r["name"]): r["result"] for r in outcome.to_dict()["results"]}
        assert results[("mlx5_0", "rp_ai_rate")] == "undone"
        assert results[("mlx5_1", "rp_ai_rate")] == "undone"
        assert results[("mlx5_1", "np_min_time_between_cnps")] == "not-written"  # never reached
        journal = Journal(tmp_path / "journal")
        assert journal.pending() is None and [r["state"] for r in journal.history()] == ["failed"]
    finally:
        tree.close()


def test_kernel_attributes_get_one_write_at_offset_zero_and_no_truncate(
    debugfs_host: Path, tmp_path: Path
) -> None:
    class Recording(FaultyFiles):
        pwrites: list[tuple[str, bytes, int]] = []

        def pwrite(self, fd: int, data: bytes, offset: int) -> int:
            self.pwrites.append((self._paths[fd], data, offset))
            return super().pwrite(fd, data, offset)

    files = Recording(kernel=True)
    a = make(debugfs_host, tmp_path / "journal", files)
    plan = a.plan({"rp_time_reset": 150})  # same width as 300: a regular file stands in exactly
    assert a.apply(plan, source="test", reason="kernel").state == "applied"
    device = str(debugfs_host / "kernel")
    opened = [(p, flags) for p, flags in files.opened if p.startswith(device)]
    assert opened and not [p for p, flags in opened if flags & (os.O_TRUNC | os.O_CREAT)]
    assert [(w[1], w[2]) for w in files.pwrites if w[0].startswith(device)] == [(b"150\n", 0)] * 2
    assert values(debugfs_host)["mlx5_1"]["rp_time_reset"] == 150


def test_regular_files_are_replaced_whole_never_truncated_in_place(
    debugfs_host: Path, tmp_path: Path
) -> None:
    files = FaultyFiles()
    a = make(debugfs_host, tmp_path / "journal", files)
    assert a.apply(a.plan(TARGET), source="test", reason="emulated").state == "applied"
    targets = {w.path for w in a.journal.history()[0]["writes"]}
    assert not [p for p, flags in files.opened if p in targets and flags & (os.O_TRUNC | os.O_WRONLY)]
    replaced = [p for op, p in files.calls if op == "replace"]
    assert targets <= set(replaced)


def test_a_value_that_reads_back_different_fails_and_is_undone(debugfs_host: Path, tmp_path: Path) -> None:
    class Clamping(Files):  # firmware keeps the timer at 200 µs or more
        def write(self, fd: int, data: bytes) -> int:
            if data == b"100\n":
                data = b"200\n"
            return super().write(fd, data)

    before = values(debugfs_host)
    a = make(debugfs_host, tmp_path / "journal", Clamping())
    outcome = a.apply(a.plan({"rp_ai_rate": 20, "rp_time_reset": 100}), source="test", reason="clamped")
    assert outcome.state == "failed" and "wrote 100 but it reads back 200" in (outcome.error or "")
    assert values(debugfs_host) == before


def test_an_unreadable_file_during_undo_is_still_put_back(debugfs_host: Path, tmp_path: Path) -> None:
    before = values(debugfs_host)
    ai = knob_file(debugfs_host, 0, "rp_ai_rate")
    # reads 1-2 of rp_ai_rate are its read-back (data, then end of file); read 3 is the undo's check
    faults = (Fault("read", errno.EIO, path=knob_file(debugfs_host, 0, "rp_time_reset")),)
    faults += (Fault("read", errno.EIO, path=ai, nth=3),)
    files = FaultyFiles(*faults)
    a = make(debugfs_host, tmp_path / "journal", files)
    outcome = a.apply(a.plan(TARGET), source="test", reason="eio twice")
    assert outcome.state == "failed" and values(debugfs_host) == before
    assert [op for op, _ in files.fired] == ["read", "read"] and outcome.undone[-1].path == ai


def test_a_failed_undo_is_a_durable_recovery_needed_state(debugfs_host: Path, tmp_path: Path) -> None:
    before = values(debugfs_host)
    ai0 = knob_file(debugfs_host, 0, "rp_ai_rate")
    faults = (
        Fault("read", errno.EIO, path=knob_file(debugfs_host, 1, "rp_ai_rate")),  # apply fails here
        Fault("replace", errno.EIO, path=ai0, nth=2, times=0),  # and mlx5_0 cannot be put back
    )
    a = make(debugfs_host, tmp_path / "journal", FaultyFiles(*faults))
    outcome = a.apply(a.plan(TARGET), source="test", reason="stuck")
    assert outcome.state == "recovery-needed" and not outcome.ok
    assert list(outcome.not_restored) == [ai0]
    assert values(debugfs_host)["mlx5_0"]["rp_ai_rate"] == 20  # still the new value
    journal = Journal(tmp_path / "journal")
    pending = journal.pending()
    assert pending is not None and "undo failed" in pending["recovery_error"]  # the intent is kept
    assert journal.history() == []  # and not closed as anything

    later = make(debugfs_host, tmp_path / "journal", FaultyFiles())
    blocked = later.apply(later.plan({"rp_hai_rate": 100}), source="test", reason="next decision")
    assert blocked.state == "refused" and "recovery needed" in (blocked.error or "")
    assert values(debugfs_host)["mlx5_0"]["rp_hai_rate"] == 50  # nothing written

    recovered = later.recover()  # the device works again: the operator's `netd tune --recover`
    assert recovered is not None and recovered.state == "recovered"
    assert values(debugfs_host) == before
    assert [r["state"] for r in journal.history()] == ["recovered"]
    assert later.apply(later.plan({"rp_hai_rate": 100}), source="test", reason="again").state == "applied"


def test_one_lock_per_nic_whatever_the_journal(debugfs_host: Path, tmp_path: Path) -> None:
    trees = trees_of(debugfs_host)
    other = make(debugfs_host, tmp_path / "other-journal", FaultyFiles())
    with device_locks([trees[0].path]):  # another applier, another journal, is changing mlx5_0
        busy = other.apply(other.plan(TARGET), source="test", reason="same nic")
        assert busy.state == "refused" and "locked" in (busy.error or "")
        assert values(debugfs_host)["mlx5_0"]["rp_ai_rate"] == 5
        only_1 = [w for w in other.plan(TARGET) if w.device == "mlx5_1"]
        assert other.apply(only_1, source="test", reason="other nic").state == "applied"
    assert values(debugfs_host)["mlx5_1"]["rp_ai_rate"] == 20


def test_netd_check_fails_while_recovery_is_needed(debugfs_host: Path, tmp_path: Path) -> None:
    from netd.commands.check import tuning_lines
    from netd.config.settings import load_config

    cfg = load_config(None, environ={}, overrides={"tuning": {"state_dir": str(tmp_path / "journal")}})
    assert tuning_lines(cfg)[1] is False  # nothing recorded yet
    ai0 = Path(knob_file(debugfs_host, 0, "rp_ai_rate"))
    faults = (
        Fault("read", errno.EIO, path=str(ai0.parent), name="rp_time_reset"),
        Fault("replace", errno.EIO, path=str(ai0.parent), name="rp_ai_rate", nth=2, times=0),
    )
    a = make(debugfs_host, tmp_path / "journal", FaultyFiles(*faults))
    assert a.apply(a.plan(TARGET), source="test", reason="stuck").state == "recovery-needed"
    lines, failed = tuning_lines(cfg)
    assert failed and lines[-1].status == "FAIL" and "recovery needed" in lines[-1].detail
    assert "netd tune --recover" in lines[-1].render()
    make(debugfs_host, tmp_path / "journal", FaultyFiles()).recover()
    lines, failed = tuning_lines(cfg)
    assert not failed and "1 change sets recorded, none open" in lines[0].detail


def test_the_ofed_lock_covers_the_whole_nic_not_one_directory(ofed_host: Path, tmp_path: Path) -> None:
    tree = trees_of(ofed_host)[0]
    a = make(ofed_host, tmp_path / "journal", FaultyFiles())
    np_only = [w for w in a.plan({"np_min_time_between_cnps": 8}) if w.device == "mlx5_0"]
    assert Path(np_only[0].path).parent == tree.path / "roce_np"
    with device_locks([tree.path]):  # another applier holds mlx5_0 while it writes roce_rp/
        busy = a.apply(np_only, source="test", reason="other side of the same nic")
    assert busy.state == "refused" and values(ofed_host)["mlx5_0"]["np_min_time_between_cnps"] == 4


def test_a_half_undone_set_is_never_reported_as_refused(debugfs_host: Path, tmp_path: Path) -> None:
    ai0 = Path(knob_file(debugfs_host, 0, "rp_ai_rate"))
    faults = (
        Fault("read", errno.EIO, path=knob_file(debugfs_host, 1, "rp_ai_rate")),
        Fault("replace", errno.EIO, path=str(ai0.parent), name=ai0.name, nth=2, times=0),
        # and the journal itself fails while noting why (its first open was begin's check)
        Fault("open", errno.EIO, path=str(tmp_path / "journal" / "pending.rec"), nth=2),
    )
    files = FaultyFiles(*faults)
    a = make(debugfs_host, tmp_path / "journal", files)
    outcome = a.apply(a.plan(TARGET), source="test", reason="worst case")
    assert len(files.fired) == 3
    assert outcome.state == "recovery-needed" and Journal(tmp_path / "journal").pending() is not None


def test_the_filesystem_decides_how_a_file_is_written(tmp_path: Path) -> None:
    assert is_kernel_attribute(Files(), Path("/sys/class/net/lo/mtu"))  # sysfs
    assert is_kernel_attribute(Files(), Path("/proc/sys/net/core/somaxconn"))  # procfs
    assert not is_kernel_attribute(Files(), tmp_path / "rp_ai_rate")


@pytest.mark.root
@pytest.mark.skipif(os.geteuid() != 0, reason="writes a sysfs attribute")
def test_a_real_sysfs_attribute_gets_one_pwrite_at_offset_zero() -> None:
    """lo's tx_queue_len, written with the value it already has: the real kernel path, no change."""
    attr = Path("/sys/class/net/lo/tx_queue_len")
    value = read_param(Files(), attr)
    files = FaultyFiles()
    write_verified(files, attr, value)
    assert [flags & (os.O_TRUNC | os.O_ACCMODE) for p, flags in files.opened if p == str(attr)] == [
        os.O_WRONLY,  # the write, without O_TRUNC
        os.O_RDONLY,  # the read-back
    ]
    assert [op for op, p in files.calls if op in ("pwrite", "write", "replace")] == ["pwrite"]
    assert read_param(Files(), attr) == value


def test_a_fifo_where_a_parameter_is_fails_instead_of_blocking(tmp_path: Path) -> None:
    """open(2) of a FIFO waits for a peer: a FIFO planted where a DCQCN parameter (or the journal) is
    must be an error, not a `netd tune` that never returns. Read and write run in a thread that must
    finish within seconds."""
    fifo = tmp_path / "rp_ai_rate"
    os.mkfifo(fifo)
    outcome: list[BaseException | int] = []

    def attempt() -> None:
        try:
            outcome.append(read_param(Files(), fifo))
        except BaseException as exc:
            outcome.append(exc)
        try:  # a write with no reader: ENXIO at once, not a wait for one
            os.close(Files().open(fifo, os.O_WRONLY))
        except OSError as exc:
            outcome.append(exc.errno)

    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "a FIFO blocked the tuning file layer"
    assert isinstance(outcome[0], TuningError) and "expected an unsigned integer" in str(outcome[0])
    assert outcome[1:] == [errno.ENXIO]
