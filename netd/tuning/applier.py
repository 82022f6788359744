"""Writing DCQCN parameters to NICs: planned, journaled, verified, undone on any error.

Every change goes the same way, holding the journal's lock and one lock per NIC throughout
(:mod:`netd.tuning.locks`):

1. **Plan**: for each device tree, the knobs whose value in force differs from the target — only
   NIC knobs, each checked against the device range and the operator's safety bounds.
2. **Journal** the intent (old and new value of every file) durably before touching anything; a
   journal that cannot be written (ENOSPC, EROFS, EACCES) or a change set still open refuses the
   change here, with no device touched.
3. **Write** each file and **read it back** (:mod:`netd.tuning.params`); a read or write error of
   any kind, or a value that reads back different, is a failure.
4. **Commit**: the outcome is appended to the history. If that fails, the change is not durable
   and counts as failed too.
5. On any failure, put back every file already written, newest first, verifying each, and record
   the set as failed. If a file cannot be put back, the intent stays on disk and the outcome is
   ``recovery-needed``: applies through this journal are refused until :meth:`Applier.recover`
   succeeds (``netd tune --recover``, or the daemon retrying).

:meth:`Applier.recover` runs at start and on demand: an intent left by a crash or a failed undo is
rolled back the same way; it is idempotent and may itself be interrupted and re-run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from netd.errors import TuningError
from netd.sources.cc_params import ParamTree
from netd.tuning.files import Files
from netd.tuning.journal import Journal, Write
from netd.tuning.locks import device_locks
from netd.tuning.params import read_param, write_verified
from netd.vocabulary.dcqcn_knobs import by_name

__all__ = ["STATES", "Applier", "Outcome"]

log = logging.getLogger(__name__)

STATES = ("applied", "failed", "nothing", "refused", "recovered", "recovery-needed")
"""Outcome states. Only ``applied``, ``recovered`` and ``nothing`` mean every file is as intended."""


@dataclass
class Outcome:
    """What an apply, rollback or recovery did, file by file."""

    state: str  # one of STATES
    txid: str | None = None
    writes: list[Write] = field(default_factory=list)
    undone: list[Write] = field(default_factory=list)  # written, then put back
    error: str | None = None
    not_restored: dict[str, str] = field(default_factory=dict)  # path -> why it could not be put back

    @property
    def ok(self) -> bool:
        return self.state in ("applied", "recovered", "nothing")

    def result(self, w: Write) -> str:
        """applied | undone | not-restored | not-written (never reached, or the write did not land);
        after a recovery, ``unchanged`` for a file that already held its old value."""
        if w.path in self.not_restored:
            return "not-restored"
        if self.state == "applied":
            return "applied"
        if w in self.undone:
            return "undone"
        return "not-written" if self.state != "recovered" else "unchanged"

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "txid": self.txid,
            "error": self.error,
            "writes": [asdict(w) for w in self.writes],
            "undone": [asdict(w) for w in self.undone],
            "results": [
                {**asdict(w), "result": self.result(w), "error": self.not_restored.get(w.path)}
                for w in self.writes
            ],
        }


class Applier:
    def __init__(
        self,
        trees: Sequence[ParamTree],
        journal: Journal,
        bounds: Mapping[str, tuple[float, float]] | None = None,
        files: Files | None = None,
    ) -> None:
        self.trees = list(trees)
        self.journal = journal
        self.bounds = dict(bounds or {})
        self.files = files or journal.files

    def in_force(self) -> dict[str, dict[str, int]]:
        """device -> vocabulary name -> value, read now."""
        return {tree.device: tree.read() for tree in self.trees}

    def plan(self, target: Mapping[str, int]) -> list[Write]:
        """The writes that bring every device to ``target`` (vocabulary name -> value)."""
        writes: list[Write] = []
        for tree in self.trees:
            current = tree.read()
            for name, value in target.items():
                knob = by_name(name)
                value = int(value)
                knob.check(value)
                lo, hi = self.bounds.get(name, (knob.lo, knob.hi))
                if not lo <= value <= hi:
                    raise TuningError(
                        f"{name}={value} is outside the configured safety bounds [{lo:g}, {hi:g}]"
                    )
                path = tree.file(knob)
                if path is None or name not in current:
                    log.info("%s has no %s; skipped", tree.describe(), name)
                    continue
                if current[name] != value:
                    writes.append(Write(tree.device, tree.kind, str(path), name, current[name], value))
        return writes

    def apply(self, writes: list[Write], *, source: str, reason: str, reverts: str | None = None) -> Outcome:
        if not writes:
            return Outcome("nothing")
        with ExitStack() as held:
            try:  # refusals: nothing has been written yet
                held.enter_context(self.journal.locked())
                held.enter_context(device_locks(self._nic_dirs(writes)))
                txid = self.journal.begin(writes, source=source, reason=reason, reverts=reverts)
            except TuningError as exc:  # a lock is held, the journal is unwritable or a set is open
                return Outcome("refused", writes=writes, error=str(exc))
            return self._write_all(txid, writes)

    def _write_all(self, txid: str, writes: list[Write]) -> Outcome:
        done: list[Write] = []
        try:
            for w in writes:
                done.append(w)  # before writing: a write that fails may still have changed the file
                write_verified(self.files, Path(w.path), w.new)
            self.journal.finish(txid, "applied")
        except TuningError as exc:
            return self._abort(txid, writes, done, str(exc))
        return Outcome("applied", txid, writes)

    def _abort(self, txid: str, writes: list[Write], done: list[Write], error: str) -> Outcome:
        undone, failures = self._undo(done)
        if failures:
            note = f"{error}; undo failed: " + "; ".join(failures.values())
            self.journal.mark_recovery_needed(txid, note)
            log.error("DCQCN change set %s: recovery needed: %s", txid, note)
            return Outcome("recovery-needed", txid, writes, undone, note, failures)
        try:
            self.journal.finish(txid, "failed", error)
        except TuningError as exc:  # every file is back; the intent is closed at the next recovery
            error += f"; every file was put back, but {exc}"
        return Outcome("failed", txid, writes, undone, error)

    def rollback(self, *, source: str) -> Outcome:
        """Undo the newest applied change set (files that were changed since are left alone)."""
        record = self.journal.last_applied()
        if record is None:
            return Outcome("nothing", error="no applied change set in the journal to roll back")
        writes = []
        for w in record["writes"]:
            now = read_param(self.files, Path(w.path))
            if now != w.new:
                log.warning(
                    "%s is %s, not %s as %s left it: leaving it alone", w.path, now, w.new, record["txid"]
                )
                continue
            writes.append(Write(w.device, w.kind, w.path, w.name, now, w.old))
        if not writes:
            return Outcome(
                "nothing", error=f"every file of {record['txid']} was changed since; nothing to undo"
            )
        return self.apply(
            writes, source=source, reason=f"rollback of {record['txid']}", reverts=record["txid"]
        )

    def recover(self) -> Outcome | None:
        """Close an open change set: put its files back and record it. None when there was none.

        Raises TuningError when the journal or a device is locked by another netd (it may be
        applying that very set), or the intent is unreadable."""
        with self.journal.locked():
            pending = self.journal.settle()
            if pending is None:
                return None
            writes: list[Write] = pending["writes"]
            txid = pending["txid"]
            with device_locks(self._nic_dirs(writes)):
                restored, failures = self._undo(writes)
                if failures:
                    note = "; ".join(failures.values())
                    self.journal.mark_recovery_needed(txid, note)
                    return Outcome("recovery-needed", txid, writes, restored, note, failures)
                try:
                    self.journal.finish(txid, "recovered", "restored after an interrupted change set")
                except TuningError as exc:
                    return Outcome("recovery-needed", txid, writes, restored, f"files restored, but {exc}")
            return Outcome("recovered", txid, writes, restored)

    def _nic_dirs(self, writes: list[Write]) -> list[Path]:
        """The parameter directory of each NIC the writes touch (the lock is per NIC, not per file)."""
        dirs = []
        for w in writes:
            path = Path(w.path)
            tree = next((t.path for t in self.trees if path.is_relative_to(t.path)), None)
            dirs.append(tree or path.parent)  # a device no longer discovered: its own directory
        return dirs

    def _undo(self, writes: list[Write]) -> tuple[list[Write], dict[str, str]]:
        """Put every file back to its old value, newest first, carrying on past failures."""
        undone: list[Write] = []
        failures: dict[str, str] = {}
        for w in reversed(writes):
            path = Path(w.path)
            try:
                if read_param(self.files, path) == w.old:  # never changed, or the write did not land
                    continue
            except TuningError:
                pass  # unreadable: write the old value anyway; its read-back decides
            try:
                write_verified(self.files, path, w.old)
                undone.append(w)
            except TuningError as exc:
                failures[w.path] = str(exc)
        return undone, failures
