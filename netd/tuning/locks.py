"""Locks that keep two writers off one NIC: one flock(2) per device parameter directory.

The lock is taken on the device's own parameter directory (``cc_params/`` or ``ecn/``), not on
anything in a journal directory, so two appliers with different journals (a daemon and a
``netd tune --state-dir ...``) still exclude each other on the same NIC, and appliers of different
NICs never wait for each other. Locks are non-blocking: a busy device refuses the change.
flock works on directories of any local filesystem, sysfs and debugfs included.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from netd.errors import TuningError

__all__ = ["device_locks", "flock"]


@contextmanager
def flock(path: Path, what: str) -> Iterator[None]:
    """An exclusive, non-blocking flock on a file or directory for the duration of the block."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise TuningError(f"cannot open {path} to lock {what}: {exc.strerror or exc}") from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise TuningError(f"{what} is being changed by another netd (locked); try again later") from None
        yield
    finally:
        os.close(fd)  # releases the lock


@contextmanager
def device_locks(directories: Iterable[Path]) -> Iterator[None]:
    """Every device directory locked, in path order (two appliers never hold one each and wait)."""
    with ExitStack() as stack:
        for directory in sorted(set(directories)):
            if directory.is_dir():  # a device that is gone has no writer to keep out; its writes fail
                stack.enter_context(flock(directory, f"the NIC parameters in {directory}"))
        yield
