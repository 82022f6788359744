"""Crashing and failing the applier on purpose, and checking what it left behind.

Shared by the fault-injection tests and ``netd bench tune-faults``. A **kill trial** forks a child
that applies a change set through a :class:`~netd.tuning.faults.FaultyFiles` set to SIGKILL the
child at its k-th file operation (k random over the whole apply: journal intent, every device
write and read-back, the commit); about half the time a second child starts the recovery and is
killed the same way; in a quarter of the trials a recovery then runs while one file of the set cannot
be written (it must stop in the recovery-needed state); then the parent recovers for good and checks,
by reading the trees itself:

* **restored**: every file holds its original value (after rolling back, if the change set had
  committed before the kill), the history parses with no damaged record, and rollback works;
* **recovery_needed** (counted besides): the stuck recovery said so and left the intent on disk;
* **lost**: anything else. **corrupt_history**: the history has a damaged record, or cannot be read.

``empty_after_kill`` counts kills after which some parameter file did not hold a number (before
any recovery ran): what ``echo N > file`` risks between its truncate and its write.

A **fault trial** runs in-process: one injected error (EIO, EPERM, ENOSPC, EINVAL, a short write)
at one operation on a device file or the journal, then the same checks.
"""

from __future__ import annotations

import errno
import os
import random
import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from cc.model.params import DcqcnParams
from netd.emulated.cc_params import render, render_ofed
from netd.emulated.sysfs_tree import DeviceSpec, SysfsTree
from netd.errors import NetdError
from netd.sources.cc_params import ParamTree, discover
from netd.tuning.applier import Applier, Outcome
from netd.tuning.faults import Fault, FaultyFiles
from netd.tuning.files import Files
from netd.tuning.journal import Journal

__all__ = ["CHANGE", "Host", "build_host", "fault_trial", "kill_trial", "run_killed"]

CHANGE = {"rp_ai_rate": 20, "rp_time_reset": 150, "np_min_time_between_cnps": 8}
"""Three knobs on each of two NICs: six device writes per change set."""


def build_host(root: Path, kind: str = "debugfs", devices: int = 2) -> SysfsTree:
    """A host with ``devices`` mlx5 functions and their DCQCN parameters at the firmware defaults, in
    the debugfs layout, the OFED layout, both, or neither (``none``). Close the returned tree."""
    tree = SysfsTree(root)
    for p in range(devices):
        pci, netdev = f"0000:41:00.{p}", f"ens1f{p}np{p}"
        tree.add_device(DeviceSpec(name=f"mlx5_{p}", driver="mlx5", netdev=netdev, pci=pci))
        if kind in ("debugfs", "both"):
            render(root, pci, DcqcnParams())
        if kind in ("ofed", "both"):
            render_ofed(root, netdev, DcqcnParams())
    return tree


@dataclass(frozen=True)
class Host:
    """Parameter trees to torture: ``root`` stands for /sys (debugfs under root/kernel/debug)."""

    name: str
    root: Path

    def trees(self) -> list[ParamTree]:
        return discover(self.root, self.root / "kernel" / "debug")[0]

    def applier(self, journal_dir: Path, files: Files) -> Applier:
        return Applier(self.trees(), Journal(journal_dir, files), files=files)

    def values(self) -> dict[str, dict[str, int]]:
        """Every parameter of every device, read with the plain sysfs reader (not the file layer)."""
        return {tree.device: tree.read() for tree in self.trees()}


def run_killed(work: Callable[[Files], object], kill_at: int | None) -> int:
    """Run ``work`` in a forked child whose file layer SIGKILLs it at call ``kill_at``; the child's
    exit code, or minus the signal that ended it."""
    pid = os.fork()
    if pid == 0:  # the child: no cleanup of the parent's (pytest's, the bench's) state may run
        code = 0
        try:
            work(FaultyFiles(kill_at=kill_at))
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _apply(host: Host, journal_dir: Path) -> Callable[[Files], object]:
    def work(files: Files) -> Outcome:
        a = host.applier(journal_dir, files)
        return a.apply(a.plan(CHANGE), source="torture", reason="kill trial")

    return work


def _recover(host: Host, journal_dir: Path) -> Callable[[Files], object]:
    return lambda files: host.applier(journal_dir, files).recover()


def count_calls(host: Host, scratch: Path) -> int:
    """File operations of one whole apply (the range kill points are drawn from); puts it back."""
    files = FaultyFiles()
    _apply(host, scratch)(files)
    host.applier(scratch, Files()).rollback(source="torture")
    return len(files.calls)


def _verdict(host: Host, journal_dir: Path, before: dict[str, dict[str, int]], final: Outcome | None) -> str:
    """restored | recovery_needed | lost | corrupt_history, read back independently."""
    journal = Journal(journal_dir)
    try:
        if final is not None and final.state == "recovery-needed":
            return "recovery_needed" if journal.pending() is not None else "lost"
        parsed = journal.read_history()
        if parsed.problems:
            return "corrupt_history"
        if any(r["state"] == "applied" for r in parsed.records):  # committed before the kill
            if host.values() != {d: {**v, **CHANGE} for d, v in before.items()}:
                return "lost"
            if host.applier(journal_dir, Files()).rollback(source="torture").state != "applied":
                return "lost"
        if journal.read_history().problems:
            return "corrupt_history"
    except NetdError:
        return "corrupt_history"
    return "restored" if host.values() == before and journal.pending() is None else "lost"


def _all_readable(host: Host) -> bool:
    """Every parameter file holds a number right after the kill (before any recovery)."""
    try:
        host.values()
    except NetdError:  # an empty or half-written file does not parse
        return False
    return True


def kill_trial(host: Host, journal_dir: Path, rng: random.Random, calls: int) -> Counter[str]:
    """One apply killed at a random operation, maybe a recovery killed too, then the checks."""
    before = host.values()
    out: Counter[str] = Counter()
    out["kills"] += run_killed(_apply(host, journal_dir), rng.randint(1, calls)) == -signal.SIGKILL
    out["empty_after_kill"] += not _all_readable(host)
    if rng.random() < 0.5 and (journal_dir / "pending.rec").exists():
        status = run_killed(_recover(host, journal_dir), rng.randint(1, calls))
        out["recovery_kills"] += status == -signal.SIGKILL
        out["empty_after_kill"] += not _all_readable(host)
    if rng.random() < 0.25:
        out += _stuck_recovery(host, journal_dir, rng)
    final = host.applier(journal_dir, Files()).recover()
    out[_verdict(host, journal_dir, before, final)] += 1
    return out


def _stuck_recovery(host: Host, journal_dir: Path, rng: random.Random) -> Counter[str]:
    """A recovery while one file of the open set cannot be written: it must end in the documented
    recovery-needed state (the intent still on disk), or recover fully if that file needs nothing."""
    pending = Journal(journal_dir).settle()
    if pending is None:
        return Counter()
    stuck = Path(rng.choice(pending["writes"]).path)
    faults = [
        Fault(op, errno.EIO, path=str(stuck.parent), name=stuck.name, times=0) for op in ("replace", "pwrite")
    ]
    outcome = host.applier(journal_dir, FaultyFiles(*faults)).recover()
    if outcome is None or outcome.state == "recovered":
        return Counter()
    documented = outcome.state == "recovery-needed" and Journal(journal_dir).pending() is not None
    return Counter({"recovery_needed" if documented else "lost": 1})


DEVICE_FAULTS = (
    ("read", errno.EIO, False),
    ("write", errno.EIO, False),
    ("write", errno.ENOSPC, False),
    ("open", errno.EPERM, False),
    ("replace", errno.EIO, False),
    ("fsync", errno.EIO, False),
    ("pwrite", errno.EIO, True),
    ("pwrite", errno.EINVAL, True),
    ("pwrite", 0, True),  # a short write
    ("read", errno.EIO, True),
)
JOURNAL_FAULTS = (
    ("fallocate", ".reserve"),
    ("write", ".pending.rec.netd-tmp"),
    ("fsync", ".pending.rec.netd-tmp"),
    ("replace", "pending.rec"),
)


def fault_trial(host: Host, journal_dir: Path, rng: random.Random, where: str) -> str:
    """One injected error: ``where`` is ``device`` (expect failed, every file back), ``journal``
    (ENOSPC writing the intent: expect refused, no file touched) or ``commit`` (ENOSPC appending
    the outcome: expect failed, every file back). Returns the verdict, or ``wrong-state``."""
    before = host.values()
    kernel = False
    if where == "device":
        op, err, kernel = rng.choice(DEVICE_FAULTS)
        w = rng.choice(host.applier(journal_dir, Files()).plan(CHANGE))
        fault = Fault(op, err or errno.EIO, path=str(Path(w.path).parent), name=Path(w.path).name)
        fault.short = err == 0
    elif where == "journal":
        op, name = rng.choice(JOURNAL_FAULTS)
        fault = Fault(op, errno.ENOSPC, path=str(journal_dir), name=name)
    else:
        fault = Fault("pwrite", errno.ENOSPC, path=str(journal_dir), name="history.log")
        fault.short = rng.random() < 0.5
    files = FaultyFiles(fault, kernel=kernel)
    a = host.applier(journal_dir, files)
    outcome = a.apply(a.plan(CHANGE), source="torture", reason=f"{where} fault")
    expected = "refused" if where == "journal" else "failed"
    touched = any(p.startswith(str(host.root)) for _, p in files.calls)
    if outcome.state != expected or not files.fired or (where == "journal" and touched):
        return "wrong-state"
    return _verdict(host, journal_dir, before, None)
