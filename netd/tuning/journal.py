"""The write-ahead journal that makes parameter changes recoverable.

A change set's **intent** — every file with its old and new value — is made durable in
``pending.rec`` (temporary file, fsync, rename, directory fsync) *before* the first device write.
When the set is done (applied, or undone after a failure) its **outcome** is appended to
``history.log`` and fsync'd, and only then is ``pending.rec`` removed. So at any crash point:

* no ``pending.rec``: nothing was in flight (every outcome is in the history);
* ``pending.rec`` and an outcome with its txid: the crash came between the two steps; recovery only
  removes the intent;
* ``pending.rec`` alone: the set was interrupted; recovery puts its files back, then records it.

Both files hold records in the checksummed, length-delimited format of :mod:`netd.tuning.records`;
a torn history tail (an append cut short) is cut off before the next append, a corrupt record is
reported and skipped. Space for the outcome is reserved (``.reserve``, fallocate'd) when the
intent is written and freed just before the append, so a disk that fills up during a change set
still lets it be recorded; a journal that cannot be written at all refuses the change before any
device is touched. The intent stays on disk until its files are known to be back: a failed undo
leaves it in place, marked ``recovery_error`` (the *recovery-needed* state, docs/tuning.md).
"""

from __future__ import annotations

import errno
import logging
import os
import time
import uuid
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from netd.errors import TuningError
from netd.tuning.files import Files, atomic_replace, read_bytes, sync_dir
from netd.tuning.locks import flock
from netd.tuning.records import Parsed, frame, parse

__all__ = ["Journal", "Write"]

log = logging.getLogger(__name__)

_RESERVE_SLACK = 16384  # room for the outcome's note (an error message per file) beyond the intent


@dataclass(frozen=True, slots=True)
class Write:
    """One parameter file to change."""

    device: str
    kind: str  # debugfs | ofed
    path: str
    name: str  # vocabulary name
    old: int
    new: int


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _with_writes(record: dict[str, Any]) -> dict[str, Any]:
    try:
        return {**record, "writes": [Write(**w) for w in record["writes"]]}
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a change set ({exc})") from None


class Journal:
    def __init__(self, directory: Path, files: Files | None = None) -> None:
        self.directory = directory
        self.files = files or Files()
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise TuningError(f"cannot create the tuning journal directory {directory}: {_why(exc)}") from exc
        self.pending_path = directory / "pending.rec"
        self.history_path = directory / "history.log"
        self._reserve = directory / ".reserve"

    def locked(self) -> AbstractContextManager[None]:
        """Exclusive use of this journal for one operation (the devices have their own locks)."""
        return flock(self.directory, f"the tuning journal {self.directory}")

    # -- the intent -------------------------------------------------------------------------------
    def begin(self, writes: list[Write], *, source: str, reason: str, reverts: str | None = None) -> str:
        """Make the intent durable; raises TuningError (and changes nothing) when it cannot be."""
        blocked = self.settle()
        if blocked is not None:
            raise TuningError(recovery_message(blocked))
        txid = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        record = {
            "txid": txid,
            "started": time.time(),
            "source": source,
            "reason": reason,
            "reverts": reverts,
            "writes": [asdict(w) for w in writes],
        }
        data = frame(record)
        try:
            self._reserve_space(2 * len(data) + _RESERVE_SLACK)
            atomic_replace(self.files, self.pending_path, data)
        except OSError as exc:
            self._drop_reserve()
            raise TuningError(
                f"cannot write the tuning journal in {self.directory}: {_why(exc)}; "
                "the change was refused and no parameter was touched"
            ) from exc
        return txid

    def pending(self) -> dict[str, Any] | None:
        """The intent on disk (its ``writes`` as :class:`Write`), or None."""
        try:
            data = read_bytes(self.files, self.pending_path)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TuningError(f"cannot read {self.pending_path}: {_why(exc)}") from exc
        parsed = parse(data, self.pending_path.name)
        try:
            if len(parsed.records) != 1 or parsed.problems:
                raise ValueError("; ".join(parsed.problems) or "not exactly one record")
            return _with_writes(parsed.records[0])
        except ValueError as exc:
            raise TuningError(
                f"{self.pending_path} is corrupt ({exc}); inspect it, restore the listed values by "
                "hand, then remove it"
            ) from exc

    def mark_recovery_needed(self, txid: str, error: str) -> None:
        """Keep the intent and say why its files could not all be put back (best effort: the intent
        on disk is what matters, and it is already there)."""
        try:
            pending = self.pending()
            if pending is None or pending["txid"] != txid:
                return
            record = {**pending, "writes": [asdict(w) for w in pending["writes"]], "recovery_error": error}
            atomic_replace(self.files, self.pending_path, frame(record))
        except (OSError, TuningError) as exc:
            log.warning("%s: could not note why recovery is needed: %s", self.pending_path, exc)

    # -- the outcome ------------------------------------------------------------------------------
    def finish(self, txid: str, state: str, note: str = "") -> dict[str, Any]:
        """Record the outcome of the pending set, then remove the intent. Raises TuningError when the
        outcome cannot be recorded (the intent then stays, and recovery will record it)."""
        pending = self.pending()
        if pending is None or pending["txid"] != txid:
            raise TuningError(f"journal has no pending change set {txid}")
        record = {k: v for k, v in pending.items() if k != "recovery_error"}
        record.update(writes=[asdict(w) for w in pending["writes"]], state=state, finished=time.time())
        record["note"] = note
        self._drop_reserve()  # its space is now the outcome's
        try:
            if not self.committed(txid):
                self._append(frame(record))
        except OSError as exc:
            raise TuningError(
                f"cannot record change set {txid} ({state}) in {self.history_path}: {_why(exc)}"
            ) from exc
        self._close_intent()  # the outcome is durable: the set is committed from here on
        return _with_writes(record)

    def settle(self) -> dict[str, Any] | None:
        """The open intent, if any; an intent whose outcome is already recorded (a crash between the
        append and the removal) is removed instead."""
        pending = self.pending()
        if pending is None:
            self._drop_reserve()  # left by a crash between reserving and writing the intent
        elif self.committed(pending["txid"]):
            self._close_intent()
            return None
        return pending

    def _close_intent(self) -> None:
        try:
            self.files.unlink(self.pending_path)
            sync_dir(self.files, self.directory)
        except OSError:
            pass  # an intent left beside its recorded outcome is removed by settle()

    def read_history(self) -> Parsed:
        """Every intact outcome (``writes`` as :class:`Write`) and a line per damaged record skipped."""
        try:
            data = read_bytes(self.files, self.history_path)
        except FileNotFoundError:
            return Parsed()
        except OSError as exc:
            raise TuningError(f"cannot read {self.history_path}: {_why(exc)}") from exc
        parsed = parse(data, self.history_path.name)
        records = []
        for record in parsed.records:
            try:
                records.append(_with_writes(record))
            except ValueError as exc:
                parsed.problems.append(f"{self.history_path.name}: {record.get('txid', '?')}: {exc}, skipped")
        parsed.records = records
        return parsed

    def history(self) -> list[dict[str, Any]]:
        return self.read_history().records

    def committed(self, txid: str) -> bool:
        return any(r.get("txid") == txid for r in self.history())

    def last_applied(self) -> dict[str, Any] | None:
        """The newest applied change set that no later change set reverted."""
        records = self.history()
        reverted = {r["reverts"] for r in records if r.get("reverts") and r["state"] == "applied"}
        for record in reversed(records):
            if record["state"] == "applied" and record["txid"] not in reverted and not record.get("reverts"):
                return record
        return None

    # -- files ------------------------------------------------------------------------------------
    def _append(self, data: bytes) -> None:
        """Append one record after the last whole line (a torn tail is cut off first); on failure the
        file is cut back, so a full disk never leaves half a record behind."""
        fd = self.files.open(self.history_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            end = self._whole_end(fd)
            size = self.files.fstat(fd).st_size
            if end < size:
                log.warning("%s: cutting off a torn tail of %d bytes", self.history_path, size - end)
            try:
                self.files.ftruncate(fd, end)
                n = self.files.pwrite(fd, data, end)
                if n != len(data):
                    raise OSError(errno.ENOSPC, f"short write: {n} of {len(data)} bytes")
                self.files.fsync(fd)
            except OSError:
                try:
                    self.files.ftruncate(fd, end)
                    self.files.fsync(fd)
                except OSError:
                    pass  # a torn tail is detected and cut off by the next append or read
                raise
        finally:
            self.files.close(fd)

    def _whole_end(self, fd: int) -> int:
        """Offset just past the last newline (0 for an empty file or one without any)."""
        size = self.files.fstat(fd).st_size
        pos = size
        while pos > 0:
            start = max(0, pos - 65536)
            chunk = self.files.pread(fd, pos - start, start)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                return start + nl + 1
            pos = start
        return 0

    def _reserve_space(self, size: int) -> None:
        fd = self.files.open(self._reserve, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self.files.fallocate(fd, 0, size)
            self.files.fsync(fd)
        finally:
            self.files.close(fd)

    def _drop_reserve(self) -> None:
        try:
            self.files.unlink(self._reserve)
        except OSError:
            pass


def recovery_message(pending: dict[str, Any]) -> str:
    devices = sorted({w.device for w in pending["writes"]})
    why = pending.get("recovery_error") or "it was interrupted and not yet rolled back"
    return (
        f"recovery needed: change set {pending['txid']} on {', '.join(devices)} is not closed ({why}); "
        "run `netd tune --recover` (nothing is applied to these devices until it succeeds)"
    )
