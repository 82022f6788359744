"""Writing DCQCN parameters to NICs: planned, journaled, verified, undone on failure.

Every change goes the same way:

1. **Plan**: for each device tree, the knobs whose value in force differs from the target — only
   NIC knobs, each checked against the device range and the operator's safety bounds.
2. **Journal** the plan (old and new value of every file) before touching anything.
3. **Write** each file and **read it back**; a value that reads back different (the firmware
   clamped or refused it) counts as a failure.
4. On any failure, put back every file already written, newest first, verify those too, and record
   the set as failed; the error says what happened. Otherwise record it as applied.

:meth:`Applier.recover` runs at start: a journal left pending by a crash is rolled back the same
way. :meth:`Applier.rollback` undoes the newest applied set (``netd tune --rollback``). Dry-run is
the default for callers; this class only writes when asked to.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from netd.errors import TuningError
from netd.sources.cc_params import ParamTree, read_value, write_value
from netd.tuning.journal import Journal, Write
from netd.vocabulary.dcqcn_knobs import by_name

__all__ = ["Applier", "Outcome"]

log = logging.getLogger(__name__)


@dataclass
class Outcome:
    """What an apply, rollback or recovery did."""

    state: str  # applied | failed | nothing | recovered
    txid: str | None = None
    writes: list[Write] = field(default_factory=list)
    undone: list[Write] = field(default_factory=list)  # writes put back after a failure
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "state": self.state,
            "txid": self.txid,
            "error": self.error,
            "writes": [asdict(w) for w in self.writes],
            "undone": [asdict(w) for w in self.undone],
        }


class Applier:
    def __init__(
        self,
        trees: Sequence[ParamTree],
        journal: Journal,
        bounds: Mapping[str, tuple[float, float]] | None = None,
    ) -> None:
        self.trees = list(trees)
        self.journal = journal
        self.bounds = dict(bounds or {})

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
        with self.journal.locked():
            txid = self.journal.begin(writes, source=source, reason=reason, reverts=reverts)
            done: list[Write] = []
            try:
                for w in writes:
                    done.append(w)  # before writing: a write that fails may still have changed the file
                    self._write_verified(Path(w.path), w.new)
            except TuningError as exc:
                undone, undo_error = self._undo(done)
                note = str(exc) + (f"; undo also failed: {undo_error}" if undo_error else "")
                self.journal.finish(txid, "failed", note)
                return Outcome("failed", txid, writes, undone, note)
            self.journal.finish(txid, "applied")
            return Outcome("applied", txid, writes)

    def rollback(self, *, source: str) -> Outcome:
        """Undo the newest applied change set (files that were changed since are left alone)."""
        record = self.journal.last_applied()
        if record is None:
            return Outcome("nothing", error="no applied change set in the journal to roll back")
        writes = []
        for w in record["writes"]:
            now = read_value(Path(w.path))
            if now is None:
                raise TuningError(f"{w.path} is gone; cannot roll back {record['txid']}")
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
        """At start: if a change set was interrupted, put its files back. None when there was none."""
        with self.journal.locked():
            pending = self.journal.pending()
            if pending is None:
                return None
            writes: list[Write] = pending["writes"]
            restored: list[Write] = []
            errors = []
            for w in reversed(writes):
                try:
                    if read_value(Path(w.path)) != w.old:
                        self._write_verified(Path(w.path), w.old)
                        restored.append(w)
                except TuningError as exc:
                    errors.append(str(exc))
            note = "; ".join(errors) if errors else "restored after an interrupted change set"
            state = "recovery-failed" if errors else "recovered"
            self.journal.finish(pending["txid"], state, note)
            return Outcome(state, pending["txid"], writes, restored, "; ".join(errors) or None)

    def _write_verified(self, path: Path, value: int) -> None:
        write_value(path, value)
        back = read_value(path)
        if back != value:
            raise TuningError(f"{path}: wrote {value} but it reads back {back}; the device did not take it")

    def _undo(self, done: list[Write]) -> tuple[list[Write], str | None]:
        undone: list[Write] = []
        for w in reversed(done):
            try:
                if read_value(Path(w.path)) == w.old:  # the failed write never landed
                    continue
                self._write_verified(Path(w.path), w.old)
                undone.append(w)
            except TuningError as exc:
                return undone, str(exc)
        return undone, None
