"""A :class:`~netd.tuning.files.Files` that fails, shortens or kills at chosen calls.

Used by the fault-injection tests and ``netd bench tune-faults``: a :class:`Fault` names a call
(``open``, ``read``, ``write``, ``pwrite``, ``fsync``, ``replace``, ``fallocate``, ``ftruncate``,
``unlink``, ``fs_magic``, ``fstat``, ``pread``, ``close``), optionally the path it must concern
(substrings of the path and of the file name; for calls on a descriptor, the path it was opened
on), and which matching call fails
and how: an errno (EIO, ENOSPC, EPERM, ...) or a short write. ``kill_at=k`` sends SIGKILL to the
process at its k-th call of any kind — a crash exactly there, with nothing in the process left to
clean up. ``calls`` lists every call made, in order (``opened`` the flags of each open).
"""

from __future__ import annotations

import errno
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from netd.tuning.files import Files

__all__ = ["SYSFS_MAGIC", "Fault", "FaultyFiles"]

SYSFS_MAGIC = 0x62656572


@dataclass
class Fault:
    op: str
    errno: int = errno.EIO
    path: str = ""  # only calls concerning a path that contains this
    name: str = ""  # ... and whose file name contains this (a temporary file's name has it too)
    nth: int = 1  # the first matching call that fails
    times: int = 1  # how many matching calls fail from the nth on (0: every one)
    short: bool = False  # write/pwrite: write half the bytes and report that, instead of an errno
    seen: int = 0

    def due(self) -> bool:
        self.seen += 1
        return self.seen >= self.nth and (self.times == 0 or self.seen < self.nth + self.times)


class FaultyFiles(Files):
    def __init__(self, *faults: Fault, kill_at: int | None = None, kernel: bool = False) -> None:
        self.faults = list(faults)
        self.kill_at = kill_at
        self.kernel = kernel  # report every filesystem as sysfs (kernel-attribute writes)
        self.calls: list[tuple[str, str]] = []
        self.fired: list[tuple[str, str]] = []
        self.opened: list[tuple[str, int]] = []  # (path, flags) of every open
        self._paths: dict[int, str] = {}

    def _hit(self, op: str, path: str) -> Fault | None:
        self.calls.append((op, path))
        if self.kill_at is not None and len(self.calls) >= self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        for fault in self.faults:
            if fault.op == op and fault.path in path and fault.name in os.path.basename(path) and fault.due():
                self.fired.append((op, path))
                return fault
        return None

    def _check(self, op: str, path: str) -> None:
        fault = self._hit(op, path)
        if fault is not None:
            raise OSError(fault.errno, os.strerror(fault.errno), path)

    def open(self, path: Path, flags: int, mode: int = 0o600) -> int:
        self._check("open", str(path))
        self.opened.append((str(path), flags))
        fd = super().open(path, flags, mode)
        self._paths[fd] = str(path)
        return fd

    def close(self, fd: int) -> None:
        path = self._paths.pop(fd, "")
        try:
            self._check("close", path)
        finally:
            super().close(fd)

    def read(self, fd: int, size: int) -> bytes:
        self._check("read", self._paths.get(fd, ""))
        return super().read(fd, size)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        self._check("pread", self._paths.get(fd, ""))
        return super().pread(fd, size, offset)

    def write(self, fd: int, data: bytes) -> int:
        fault = self._hit("write", self._paths.get(fd, ""))
        if fault is not None and fault.short:
            return super().write(fd, data[: len(data) // 2])
        if fault is not None:
            raise OSError(fault.errno, os.strerror(fault.errno))
        return super().write(fd, data)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        fault = self._hit("pwrite", self._paths.get(fd, ""))
        if fault is not None and fault.short:
            return super().pwrite(fd, data[: len(data) // 2], offset)
        if fault is not None:
            raise OSError(fault.errno, os.strerror(fault.errno))
        return super().pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        self._check("fsync", self._paths.get(fd, ""))
        super().fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        self._check("ftruncate", self._paths.get(fd, ""))
        super().ftruncate(fd, size)

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        self._check("fallocate", self._paths.get(fd, ""))
        super().fallocate(fd, offset, length)

    def fstat(self, fd: int) -> os.stat_result:
        self._check("fstat", self._paths.get(fd, ""))
        return super().fstat(fd)

    def replace(self, src: Path, dst: Path) -> None:
        self._check("replace", str(dst))
        super().replace(src, dst)

    def unlink(self, path: Path) -> None:
        self._check("unlink", str(path))
        super().unlink(path)

    def fs_magic(self, path: Path) -> int:
        self._check("fs_magic", str(path))
        return SYSFS_MAGIC if self.kernel else super().fs_magic(path)
