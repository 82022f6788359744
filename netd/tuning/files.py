"""The file layer of the applier and its journal: every system call they make, one method each.

Crash safety is a property of the *order* of operations (journal before device, fsync before
rename, rename before the directory fsync), so the order must be testable: :class:`Files` is the
only way the applier, the journal and the parameter writer touch a file, and a test (or
``netd bench tune-faults``) passes a subclass that fails, shortens or kills at any chosen call
(:mod:`netd.tuning.faults`). Methods raise :class:`OSError` like :mod:`os`; callers turn it into
a :class:`~netd.errors.TuningError` that names the file.
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

__all__ = ["KERNEL_FS_MAGIC", "Files", "atomic_replace", "read_bytes", "sync_dir", "write_all"]

# statfs(2) f_type of the kernel attribute filesystems: sysfs, debugfs, tracefs, procfs. Their files
# are not storage: a write is a command to the driver, parsed whole, and they cannot be renamed.
KERNEL_FS_MAGIC = frozenset({0x62656572, 0x64626720, 0x74726163, 0x9FA0})
_READ_MAX = 65536


class Files:
    """Plain :mod:`os` calls. Subclasses override any of them to inject faults."""

    def open(self, path: Path, flags: int, mode: int = 0o600) -> int:
        # O_NONBLOCK: files, directories and kernel attributes ignore it; a FIFO where a parameter or
        # the journal should be would otherwise block open() until a peer came (sysfs_io.READ_FLAGS).
        return os.open(path, flags | os.O_CLOEXEC | os.O_NONBLOCK, mode)

    def read(self, fd: int, size: int) -> bytes:
        return os.read(fd, size)

    def pread(self, fd: int, size: int, offset: int) -> bytes:
        return os.pread(fd, size, offset)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def pwrite(self, fd: int, data: bytes, offset: int) -> int:
        return os.pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def close(self, fd: int) -> None:
        os.close(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fallocate(self, fd: int, offset: int, length: int) -> None:
        os.posix_fallocate(fd, offset, length)

    def fstat(self, fd: int) -> os.stat_result:
        return os.fstat(fd)

    def replace(self, src: Path, dst: Path) -> None:
        os.replace(src, dst)

    def unlink(self, path: Path) -> None:
        os.unlink(path)

    def fs_magic(self, path: Path) -> int:
        """statfs(2) f_type of the filesystem holding ``path`` (0 when it cannot be asked)."""
        buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes on 64-bit Linux
        if _libc().statfs(os.fsencode(path), buf) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))
        return int(ctypes.c_long.from_buffer(buf).value) & 0xFFFFFFFF


_LIBC: ctypes.CDLL | None = None


def _libc() -> ctypes.CDLL:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def read_bytes(files: Files, path: Path) -> bytes:
    """The whole file (a kernel attribute ends its value with an empty read, like any file)."""
    fd = files.open(path, os.O_RDONLY)
    try:
        chunks = []
        while chunk := files.read(fd, _READ_MAX):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        files.close(fd)


def write_all(files: Files, fd: int, data: bytes) -> None:
    """All of ``data`` or an OSError: a short write (a full disk) is retried once for the rest, whose
    failure is the real error (ENOSPC); a write of 0 bytes is reported as ENOSPC."""
    view = memoryview(data)
    while view:
        n = files.write(fd, bytes(view))
        if n <= 0:
            raise OSError(errno.ENOSPC, f"short write: {len(data) - len(view)} of {len(data)} bytes")
        view = view[n:]


def sync_dir(files: Files, directory: Path) -> None:
    """fsync a directory, so that a rename or unlink in it survives a power cut."""
    fd = files.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        files.fsync(fd)
    finally:
        files.close(fd)


def atomic_replace(files: Files, path: Path, data: bytes, mode: int = 0o600) -> None:
    """``path`` holds ``data`` entirely or keeps what it held: temporary file, fsync, rename, directory
    fsync. The temporary file is removed when any step fails."""
    tmp = path.with_name(f".{path.name}.netd-tmp")
    fd = files.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        try:
            write_all(files, fd, data)
            files.fsync(fd)
        finally:
            files.close(fd)
        files.replace(tmp, path)
    except BaseException:
        try:
            files.unlink(tmp)
        except OSError:
            pass
        raise
    sync_dir(files, path.parent)
