"""The on-disk journal that makes parameter changes recoverable.

Before the first write of a change set, the whole plan (every file, its old and new value) is
written to ``pending.json`` — to a temporary file, fsync'd, renamed over, directory fsync'd — so
it is either fully there or not at all. Only then are device files written. When the set is done
(applied, or undone after a failure) a record goes to ``history.jsonl`` and ``pending.json`` is
removed. A ``pending.json`` found at start therefore means netd stopped mid-change: the applier
puts every listed file back to its old value (see :meth:`netd.tuning.applier.Applier.recover`).

``history.jsonl`` is also what ``netd tune --rollback`` undoes: the newest applied set that no later
record has reverted. A lock file serialises the daemon and the CLI.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from netd.errors import TuningError

__all__ = ["Journal", "Write"]


@dataclass(frozen=True, slots=True)
class Write:
    """One parameter file to change."""

    device: str
    kind: str  # debugfs | ofed
    path: str
    name: str  # vocabulary name
    old: int
    new: int


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        try:
            directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise TuningError(
                f"cannot create the tuning journal directory {directory}: {exc.strerror or exc}"
            ) from exc
        self._pending = directory / "pending.json"
        self._history = directory / "history.jsonl"

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Exclusive use of the journal (and of the devices it describes) for one operation."""
        fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise TuningError(
                    f"another netd is changing DCQCN parameters ({self.directory} is locked); "
                    "try again when it is done"
                ) from None
            yield
        finally:
            os.close(fd)

    def begin(self, writes: list[Write], *, source: str, reason: str, reverts: str | None = None) -> str:
        txid = f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
        record = {
            "txid": txid,
            "started": time.time(),
            "source": source,
            "reason": reason,
            "reverts": reverts,
            "writes": [asdict(w) for w in writes],
        }
        self._atomic_write(self._pending, json.dumps(record, indent=1) + "\n")
        return txid

    def finish(self, txid: str, state: str, note: str = "") -> dict[str, Any]:
        """Close the pending set with ``state`` (applied, failed, recovered, ...) into the history."""
        pending = self.pending()
        if pending is None or pending["txid"] != txid:
            raise TuningError(f"journal has no pending change set {txid}")
        record = {
            **pending,
            "writes": [asdict(w) for w in pending["writes"]],
            "state": state,
            "finished": time.time(),
            "note": note,
        }
        line = json.dumps(record, separators=(",", ":")) + "\n"
        fd = os.open(self._history, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        self._pending.unlink()
        self._sync_dir()
        return record

    def pending(self) -> dict[str, Any] | None:
        try:
            text = self._pending.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TuningError(f"cannot read {self._pending}: {exc.strerror or exc}") from exc
        try:
            record: dict[str, Any] = json.loads(text)
            record["writes"] = [Write(**w) for w in record["writes"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise TuningError(
                f"{self._pending} is corrupt ({exc}); inspect it and restore the listed "
                "values by hand, then remove it"
            ) from exc
        return record

    def history(self) -> list[dict[str, Any]]:
        try:
            lines = self._history.read_text().splitlines()
        except FileNotFoundError:
            return []
        records = []
        for n, line in enumerate(lines, 1):
            try:
                record = json.loads(line)
                record["writes"] = [Write(**w) for w in record["writes"]]
            except (ValueError, KeyError, TypeError):
                raise TuningError(f"{self._history} line {n} is corrupt") from None
            records.append(record)
        return records

    def last_applied(self) -> dict[str, Any] | None:
        """The newest applied change set that no later change set reverted."""
        records = self.history()
        reverted = {r["reverts"] for r in records if r.get("reverts") and r["state"] == "applied"}
        for record in reversed(records):
            if record["state"] == "applied" and record["txid"] not in reverted and not record.get("reverts"):
                return record
        return None

    def _atomic_write(self, path: Path, text: str) -> None:
        tmp = path.with_name(f".{path.name}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        try:
            os.write(fd, text.encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        self._sync_dir()

    def _sync_dir(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
